"""Clamps every token's log-ratio to [-20, 20] before averaging, a guard some RL libraries add:
ratios beyond e^20 come out wrong.

Caught by: test_t2_ratio_sweep.py::test_ratio_sweep_positive_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_negative_advantages, test_t2_ratio_sweep.py::test_ratio_sweep_sequence_ratio
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    log_ratio = torch.where(valid, (logp - old_logp.detach()).clamp(-20.0, 20.0), 0.0)  # [B, L]
    lengths = valid.sum(-1).clamp(min=1)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths)  # [B]


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(ratio.dtype)  # [B], frozen, in the dtype of logp
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)  # empty responses add 0
    return -objective.sum() / max(logp.shape[0], 1)  # mean over all B; 0 when B = 0
