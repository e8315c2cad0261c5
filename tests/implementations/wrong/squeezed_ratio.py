"""Calls .squeeze() on the ratio: a batch of one response comes back with shape [] instead of
[1].

Caught by: test_t0_contract.py::test_sequence_ratio_returns_one_ratio_per_response, test_t1_reference.py::test_ratio_matches_reference, test_t1_reference.py::test_ratio_matches_reference_hidden
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    lengths = valid.sum(-1).clamp(min=1)  # [B]
    return torch.exp(log_ratio.sum(-1) / lengths).squeeze()  # [B]


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
