"""Correct: decides per response whether it is clipped (A > 0 and s > 1 + eps, or A < 0 and
s < 1 - eps) and uses the detached clipped value there, s * A elsewhere.
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    return torch.exp(log_ratio.sum(-1) / valid.sum(-1).clamp(min=1))


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    s = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(s.dtype)
    clipped = ((adv > 0) & (s > 1 + clip_eps)) | ((adv < 0) & (s < 1 - clip_eps))  # [B]
    flat = (s.clamp(1 - clip_eps, 1 + clip_eps) * adv).detach()  # the constant branch
    objective = torch.where(clipped, flat, s * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    return -objective.sum() / max(logp.shape[0], 1)
