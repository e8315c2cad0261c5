"""Correct: writes the loss PPO's way, as the larger of two per-response losses:
max(-s*A, -clip(s)*A) = -min(s*A, clip(s)*A).
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
    losses = torch.maximum(-adv * s, -adv * torch.clamp(s, 1 - clip_eps, 1 + clip_eps))
    losses = torch.where((mask != 0).any(-1), losses, 0.0)
    return losses.sum() / max(logp.shape[0], 1)
