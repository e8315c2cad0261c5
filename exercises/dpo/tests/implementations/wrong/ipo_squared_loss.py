"""Writes the IPO loss, (h - 1 / (2 beta))^2 on the difference of log-ratios h, as libraries
offer it beside DPO: a different objective, whose gradient does not fall off as a pair is
ranked better.

Caught by: test_t1_reference.py::test_worked_example, test_t1_reference.py::test_dpo_loss_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_chained_from_token_logps, test_t1_reference.py::test_dpo_loss_matches_reference_hidden, test_t2_properties.py::test_gradient_weight_is_sigmoid_of_minus_margin, test_t2_properties.py::test_policy_equal_to_reference_gives_log_2, test_t2_properties.py::test_large_margins_value, test_t2_properties.py::test_large_margins_gradient, test_t2_properties.py::test_margin_sweep_matches_formula, test_t3_toy.py::test_weight_is_sigmoid_of_minus_margin, test_t3_toy.py::test_pairs_ranked_wrong_weigh_most, test_t3_toy.py::test_three_pairs, test_t3_toy.py::test_token_gradients_through_sequence_logp
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
    losses = (margin / beta - 1 / (2 * beta)) ** 2  # [B]
    return losses.sum() / max(margin.shape[0], 1)
