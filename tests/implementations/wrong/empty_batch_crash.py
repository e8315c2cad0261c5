"""Stacks the per-response ratios without a guard: with no response (B = 0), torch.stack gets
an empty list and raises.

Caught by: test_t0_edge_cases.py::test_empty_batch
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    ratios = []
    for i in range(logp.shape[0]):
        valid = mask[i] != 0  # [L]
        log_ratio = torch.where(valid, logp[i] - old_logp[i].detach(), 0.0)  # [L]
        ratios.append(torch.exp(log_ratio.sum() / valid.sum().clamp(min=1)))
    return torch.stack(ratios)  # [B]


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    if logp.shape[0] == 0:
        return torch.where(mask != 0, logp, 0.0).sum()  # B = 0: an empty sum, attached to logp
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    total = ratio.new_zeros(())  # 0 in the dtype and device of logp
    for i in range(logp.shape[0]):
        a = advantages[i].detach().to(ratio.dtype)
        term = torch.minimum(ratio[i] * a, ratio[i].clamp(1 - clip_eps, 1 + clip_eps) * a)
        total = total + torch.where((mask[i] != 0).any(), term, 0.0)
    return -total / logp.shape[0]
