"""Gives an empty response ratio 0 instead of 1.

Caught by: test_t1_reference.py::test_ratio_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_ratio_matches_reference_hidden, test_t1_reference.py::test_long_half_precision_matches_reference, test_t2_properties.py::test_empty_response_has_ratio_one, test_t2_properties.py::test_all_empty_mask_gives_differentiable_zero, test_t2_properties.py::test_empty_rows_in_every_dtype, test_t2_ratio_sweep.py::test_ratio_sweep_sequence_ratio
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    lengths = valid.sum(-1).clamp(min=1)  # [B]
    return torch.where(valid.any(-1), torch.exp(log_ratio.sum(-1) / lengths), 0.0)  # [B]


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
