"""Arithmetic mean of the token ratios instead of the geometric mean."""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    token_ratio = torch.where(
        valid, torch.exp(torch.where(valid, logp - old_logp.detach(), 0.0)), 0.0
    )
    lengths = valid.sum(-1).clamp(min=1)
    mean = token_ratio.sum(-1) / lengths
    return torch.where(valid.any(-1), mean, torch.ones_like(mean))


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
