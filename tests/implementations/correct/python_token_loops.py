"""Correct: Python loops over the responses and over their tokens, with branches that read the
mask's values (`if mask[i, t]`). Right on every real device; on `meta`, which has no values,
the device check is inconclusive.

Inconclusive: test_t0_edge_cases.py::test_device_kept
"""

import torch
from torch import Tensor


def _mean_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor, i: int) -> Tensor:
    wide = torch.promote_types(logp.dtype, torch.float32)
    total, count = logp.new_zeros((), dtype=wide), 0
    for t in range(logp.shape[1]):
        if mask[i, t]:
            total = total + (logp[i, t].to(wide) - old_logp[i, t].detach().to(wide))
            count += 1
    return total / max(count, 1)


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    ratios = [_mean_log_ratio(logp, old_logp, mask, i).exp() for i in range(logp.shape[0])]
    if not ratios:
        return logp.new_ones(0)
    return torch.stack(ratios).to(logp.dtype)  # [B]


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    B = logp.shape[0]
    total = (torch.where(mask != 0, logp, 0.0) * 0).sum()  # a zero attached to logp
    for i in range(B):
        if not mask[i].any():
            continue  # an empty response adds nothing
        s = _mean_log_ratio(logp, old_logp, mask, i).exp()
        a = advantages[i].detach().to(s.dtype)
        total = total + torch.minimum(s * a, s.clamp(1 - clip_eps, 1 + clip_eps) * a)
    return (-total / max(B, 1)).to(logp.dtype)
