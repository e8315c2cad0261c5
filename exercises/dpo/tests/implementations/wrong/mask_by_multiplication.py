"""Masks the padding by multiplying with the mask, without cleaning the padding first:
0 * -inf and 0 * NaN are NaN, so extreme padding leaks into the value and the gradient.

Caught by: test_t2_padding.py::test_padding_never_matters, test_t2_padding.py::test_empty_response_gives_zero, test_t2_padding.py::test_padding_mixture_never_matters, test_t3_toy.py::test_token_gradients_through_sequence_logp, test_t3_toy.py::test_padding_gets_zero_gradient
"""

import torch
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    return (token_logp * (mask != 0).to(token_logp.dtype)).sum(-1)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")
    with torch.no_grad():
        ref_logratios = ref_chosen_logp - ref_rejected_logp  # [B]
    pi_logratios = policy_chosen_logp - policy_rejected_logp  # [B]
    margin = beta * (pi_logratios - ref_logratios)  # [B]
    losses = torch.logaddexp(torch.zeros_like(margin), -margin)  # [B]
    return losses.sum() / max(margin.shape[0], 1)
