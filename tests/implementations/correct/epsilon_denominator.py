"""Correct: divides by (T + 1e-12) instead of clamping T; the epsilon lives in float32 or
wider so half types do not round it to 0.
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    wide = torch.promote_types(logp.dtype, torch.float32)
    denominator = valid.sum(-1).to(wide) + 1e-12  # [B]; an empty row gives 0 / 1e-12 = 0
    return torch.exp(log_ratio.sum(-1).to(wide) / denominator).to(logp.dtype)


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
    total = objective.sum() / (objective.shape[0] + 1e-12)  # B = 0 gives 0 / 1e-12 = 0
    return (-total).to(logp.dtype)
