"""Correct: clips in log space: log s is clamped to [log(1 - eps), log(1 + eps)] and
exponentiated, which is clip(s, 1 - eps, 1 + eps) exactly.
"""

import math

import torch
from torch import Tensor


def _log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    token = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    return token.sum(-1) / valid.sum(-1).clamp(min=1)  # [B] mean log-ratio


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    return _log_ratio(logp, old_logp, mask).exp()


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    log_s = _log_ratio(logp, old_logp, mask)  # [B]
    clipped_log_s = log_s.clamp(math.log(1 - clip_eps), math.log(1 + clip_eps))
    adv = advantages.detach().to(log_s.dtype)
    objective = torch.minimum(log_s.exp() * adv, clipped_log_s.exp() * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    return -objective.sum() / max(logp.shape[0], 1)
