"""Computes in float64 for accuracy but returns the ratio in float64 instead of the dtype of
logp.

Caught by: test_t0_contract.py::test_dtype_kept, test_t0_contract.py::test_mask_types, test_t0_edge_cases.py::test_device_kept
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp.double() - old_logp.detach().double(), 0.0)  # [B, L]
    lengths = valid.sum(-1).clamp(min=1)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask).double()  # [B]
    adv = advantages.detach().double()
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)
    batch = max(objective.shape[0], 1)  # B = 0: the empty sum over 1
    return (-objective.sum() / batch).to(logp.dtype)
