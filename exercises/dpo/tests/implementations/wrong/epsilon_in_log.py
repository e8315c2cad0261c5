"""Adds 1e-8 inside the log to avoid log(0): the loss of a badly ranked pair stops growing
near 18.4 and its gradient vanishes.

Caught by: test_t1_reference.py::test_dpo_loss_matches_reference, test_t1_reference.py::test_dpo_loss_matches_reference_hidden, test_t2_properties.py::test_gradient_weight_is_sigmoid_of_minus_margin, test_t2_properties.py::test_large_margins_value, test_t2_properties.py::test_large_margins_gradient, test_t2_properties.py::test_margin_sweep_matches_formula, test_t3_toy.py::test_weight_is_sigmoid_of_minus_margin
"""

import torch
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    clean = torch.nan_to_num(token_logp, nan=0.0, posinf=0.0, neginf=0.0)  # [B, L]
    return (clean * (mask != 0).to(token_logp.dtype)).sum(-1)  # [B]


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
    losses = -torch.log(torch.sigmoid(margin) + 1e-8)  # [B]
    return losses.sum() / max(margin.shape[0], 1)
