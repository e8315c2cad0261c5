"""Correct: fills padding with NaN, lets torch.nanmean skip it, then replaces the NaN mean of an
empty response with 0 through torch.where before exponentiating.
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), float("nan"))  # [B, L]
    mean = torch.nanmean(log_ratio, dim=-1)  # [B]; nan for an empty response
    return torch.exp(torch.where(valid.any(-1), mean, 0.0))


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
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    return -torch.nansum(objective) / max(logp.shape[0], 1)
