"""Zeroes the padding of old_logp in place with masked_fill_, modifying the caller's tensor."""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    old = old_logp.detach()
    old.masked_fill_(~valid, 0.0)  # detach() shares storage: this writes into the caller's tensor
    log_ratio = torch.where(valid, logp, 0.0) - old
    lengths = valid.sum(-1).clamp(min=1)
    return torch.exp(log_ratio.sum(-1) / lengths)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach()  # [B]
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)  # empty responses add 0
    return -objective.mean()
