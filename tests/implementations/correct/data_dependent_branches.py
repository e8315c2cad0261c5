"""Correct: vectorized, but with Python branches on tensor values: an early return when every
response is empty, and the clip side chosen per response with `if advantages[i] > 0`.

Inconclusive: test_t0_edge_cases.py::test_device_kept
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    log_ratio = torch.where(valid, logp - old_logp.detach(), 0.0)  # [B, L]
    lengths = valid.sum(-1)  # [B]
    if bool((lengths == 0).any()):
        lengths = lengths.clamp(min=1)  # empty rows: 0 / 1 = 0, ratio 1
    return torch.exp(log_ratio.sum(-1) / lengths)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    valid = mask != 0
    if not bool(valid.any()):
        return torch.where(valid, logp, 0.0).sum()  # all empty (or B = 0): an attached zero
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    terms = []
    for i in range(logp.shape[0]):
        a = float(advantages[i])
        if not bool(valid[i].any()) or a == 0:
            terms.append(ratio[i] * 0)
        elif a > 0:
            terms.append(torch.clamp(ratio[i], max=1 + clip_eps) * a)
        else:
            terms.append(torch.clamp(ratio[i], min=1 - clip_eps) * a)
    return -torch.stack(terms).mean()
