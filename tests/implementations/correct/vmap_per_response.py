"""Correct: writes the objective of one response and maps it over the batch with
torch.func.vmap.
"""

import torch
from torch import Tensor


def _log_ratio_one(logp: Tensor, old_logp: Tensor, valid: Tensor) -> Tensor:
    token = torch.where(valid, logp - old_logp, 0.0)  # [L]
    return token.sum() / valid.sum().clamp(min=1)  # ()


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    mean = torch.func.vmap(_log_ratio_one)(logp, old_logp.detach(), mask != 0)  # [B]
    return mean.exp()


def _objective_one(s: Tensor, a: Tensor, nonempty: Tensor, eps: float) -> Tensor:
    term = torch.minimum(s * a, s.clamp(1 - eps, 1 + eps) * a)
    return torch.where(nonempty, term, 0.0)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    s = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(s.dtype)
    nonempty = (mask != 0).any(-1)
    per_response = torch.func.vmap(_objective_one, in_dims=(0, 0, 0, None))
    objective = per_response(s, adv, nonempty, clip_eps)  # [B]
    return -objective.sum() / max(logp.shape[0], 1)
