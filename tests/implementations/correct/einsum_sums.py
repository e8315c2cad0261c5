"""Correct: sums with einsum and a 0/1 weight matrix, after torch.where has removed padding."""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    weight = valid.to(logp.dtype)  # [B, L]
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    total = torch.einsum("bl,bl->b", log_ratio, weight)  # [B]
    lengths = torch.einsum("bl->b", weight).clamp(min=1)  # [B]
    return torch.exp(total / lengths)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    s = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(s.dtype)
    objective = torch.minimum(s * adv, s.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    scale = torch.full_like(objective, 1.0 / max(logp.shape[0], 1))  # [B], each 1/B
    return -torch.einsum("b,b->", objective, scale)
