"""Correct: gathers the valid tokens with boolean indexing and splits them per response by
length (`lengths.tolist()`); the shapes depend on the mask's values, so `meta` cannot run it.

Inconclusive: test_t0_edge_cases.py::test_device_kept
"""

import torch
from torch import Tensor


def _mean_log_ratios(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    flat = logp[valid] - old_logp.detach()[valid]  # [total valid tokens]
    pieces = torch.split(flat, valid.sum(-1).tolist())
    means = [piece.mean() if piece.numel() else piece.sum() for piece in pieces]
    if not means:  # B = 0: an empty result that is still attached to logp
        return (logp - old_logp.detach()).sum(-1)
    return torch.stack(means)  # [B]


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    return _mean_log_ratios(logp, old_logp, mask).exp()


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    s = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(s.dtype)
    objective = torch.minimum(s * adv, s.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    nonempty = (mask != 0).any(-1)
    objective = objective[nonempty]  # the empty responses add nothing...
    return -objective.sum() / max(logp.shape[0], 1)  # ...but count in B
