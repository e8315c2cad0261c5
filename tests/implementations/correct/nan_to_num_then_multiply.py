"""Correct: multiplies by the mask, but only after torch.nan_to_num has turned inf and NaN
into finite numbers (whose gradient nan_to_num sets to 0), so 0 * inf never happens.
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    weight = (mask != 0).to(logp.dtype)  # [B, L] 0/1
    log_ratio = torch.nan_to_num(logp - old_logp.detach(), nan=0.0) * weight  # [B, L]
    lengths = weight.sum(-1).clamp(min=1)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(ratio.dtype)
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    nonempty = (mask != 0).any(-1).to(ratio.dtype)  # [B] 0/1; objective is finite here
    return -(objective * nonempty).sum() / max(logp.shape[0], 1)
