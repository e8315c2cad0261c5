"""Correct: picks the clip side from the sign of A with torch.where: min(s, 1+eps)*A for
A >= 0, max(s, 1-eps)*A for A < 0.
"""

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
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(ratio.dtype)  # [B]
    upper = ratio.clamp(max=1 + clip_eps) * adv  # A >= 0: only a large ratio is cut
    lower = ratio.clamp(min=1 - clip_eps) * adv  # A < 0: only a small ratio is cut
    objective = torch.where(adv >= 0, upper, lower)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    if objective.numel() == 0:
        return ratio.sum() * 0  # B = 0: an empty sum, still attached to logp
    return -objective.mean()
