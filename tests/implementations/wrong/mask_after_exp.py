"""Exponentiates the raw token log-ratios and masks afterwards: the values survive, but the
gradient of exp at inf or NaN padding is nan.

Caught by: test_t2_padding.py::test_padding_neutralized_in_ratio, test_t2_padding.py::test_padding_neutralized_in_loss, test_t2_padding.py::test_padding_mixture_neutralized, test_t2_properties.py::test_all_empty_mask_gives_differentiable_zero, test_t2_properties.py::test_empty_rows_in_every_dtype, test_t3_toy.py::test_padding_gets_zero_gradient
"""

import torch
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    log_ratio = torch.where(valid, (logp - old_logp.detach()).exp(), 1.0).log()  # [B, L]
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
