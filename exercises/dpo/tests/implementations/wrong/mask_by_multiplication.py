"""Masks the padding by multiplying with the mask: 0 * -inf and 0 * NaN are NaN, so extreme
padding leaks into the value and the gradient.

Caught by: test_t2_padding.py::test_padding_never_matters, test_t2_padding.py::test_empty_response_gives_zero, test_t3_toy.py::test_padding_gets_zero_gradient
"""

import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    return (token_logp * mask.to(token_logp.dtype)).sum(-1)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")
    chosen = policy_chosen_logp - ref_chosen_logp.detach()  # [B]
    rejected = policy_rejected_logp - ref_rejected_logp.detach()  # [B]
    margin = beta * (chosen - rejected)  # [B]
    losses = -F.logsigmoid(margin)  # [B]
    return losses.sum() / max(losses.shape[0], 1)
