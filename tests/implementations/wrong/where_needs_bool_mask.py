"""Passes the mask straight to torch.where, which accepts only bool masks: integer and float
masks crash.
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    log_ratio = torch.where(mask, logp - old_logp.detach(), 0.0)
    lengths = mask.sum(-1).clamp(min=1)
    return torch.exp(log_ratio.sum(-1) / lengths)


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
    objective = torch.where(mask.any(-1), objective, 0.0)
    return -objective.mean()
