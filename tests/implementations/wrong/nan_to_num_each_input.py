"""Applies torch.nan_to_num to logp and old_logp separately: +inf and -inf become the largest
finite numbers, whose difference overflows back to inf, and 0 * inf is nan.

Caught by: test_t2_padding.py::test_padding_mixture_neutralized
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    weight = (mask != 0).to(logp.dtype)  # [B, L] 0/1
    log_ratio = (torch.nan_to_num(logp, nan=0.0) - torch.nan_to_num(old_logp.detach(), nan=0.0)) * weight  # [B, L]
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
