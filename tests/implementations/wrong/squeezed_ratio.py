"""Calls .squeeze() on the ratio: a batch of one response comes back with shape [] instead of
[1].
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)
    lengths = valid.sum(-1, keepdim=True).clamp(min=1)
    return torch.exp(log_ratio.sum(-1, keepdim=True) / lengths).squeeze()


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
