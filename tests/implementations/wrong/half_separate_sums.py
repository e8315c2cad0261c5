"""Sums the log-probabilities of each policy in the dtype of logp: in float16 a sum of
thousands of log-probabilities near -40 overflows (largest value 65504), inf - inf is nan.

Caught by: test_t1_reference.py::test_long_half_precision_matches_reference
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0
    wide = logp.dtype  # sums in the dtype of logp
    seq_new = torch.where(valid, logp.to(wide), 0.0).sum(-1)  # [B] log pi(y|q)
    seq_old = torch.where(valid, old_logp.detach().to(wide), 0.0).sum(-1)  # [B] log pi_old(y|q)
    lengths = valid.sum(-1).clamp(min=1)
    return torch.exp((seq_new - seq_old) / lengths).to(logp.dtype)


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    ratio = sequence_ratio(logp, old_logp, mask)  # [B]
    adv = advantages.detach().to(logp.dtype)  # [B]
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where((mask != 0).any(-1), objective, 0.0)  # empty responses add 0
    return -torch.cat([objective, objective.new_zeros(1)]).sum() / max(len(objective), 1)
