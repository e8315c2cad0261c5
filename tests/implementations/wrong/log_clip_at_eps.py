"""Clips the log-ratio to [-eps, eps] instead of [log(1 - eps), log(1 + eps)]: the bounds
become e^-eps and e^eps.

Caught by: test_t0_edge_cases.py::test_advantages_dtype_does_not_change_result_dtype, test_t1_reference.py::test_loss_matches_reference, test_t1_reference.py::test_loss_matches_reference_hidden, test_t2_clipping.py::test_clip_eps_sets_the_boundary, test_t2_clipping.py::test_long_sequences_stay_finite, test_t2_ratio_sweep.py::test_ratio_sweep_positive_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_negative_advantages, test_t3_toy.py::test_toy_loss, test_t3_toy.py::test_sweep_curves_follow_clipped_surrogate
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
    clipped_log_s = log_s.clamp(-clip_eps, clip_eps)
    adv = advantages.detach().to(log_s.dtype)
    objective = torch.minimum(log_s.exp() * adv, clipped_log_s.exp() * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    return -objective.sum() / max(logp.shape[0], 1)
