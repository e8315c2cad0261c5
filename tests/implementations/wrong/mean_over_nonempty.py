"""Averages over the non-empty responses only; empty ones must still count in the mean."""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    lengths = valid.sum(-1).clamp(min=1)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths)  # [B]


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)
    adv = advantages.detach()
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    nonempty = (mask != 0).any(-1)
    objective = torch.where(nonempty, objective, 0.0)
    return -objective.sum() / nonempty.sum().clamp(min=1)
