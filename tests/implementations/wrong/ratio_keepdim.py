"""Returns the ratio with shape [B, 1] (keepdim=True) instead of [B]."""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)
    lengths = valid.sum(-1, keepdim=True).clamp(min=1)
    return torch.exp(log_ratio.sum(-1, keepdim=True) / lengths)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask).squeeze(-1)
    adv = advantages.detach()
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    return -objective.mean()
