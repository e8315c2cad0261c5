"""Correct: neutralizes padding with masked_fill (out of place) and keeps empty rows with a
float guard.
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    padding = mask == 0  # [B, L]
    log_ratio = (logp - old_logp.detach()).masked_fill(padding, 0.0)  # [B, L]
    lengths = (~padding).sum(-1).to(log_ratio.dtype)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths.clamp(min=1.0))


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)
    adv = advantages.detach().type_as(ratio)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
    empty = (mask == 0).all(-1)  # [B]
    return -surrogate.masked_fill(empty, 0.0).sum() / max(logp.shape[0], 1)
