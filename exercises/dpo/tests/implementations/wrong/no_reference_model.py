"""Forgets the reference model: the margin is beta * (pc - pr).

Caught by: test_t1_reference.py::test_worked_example, test_t1_reference.py::test_dpo_loss_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_chained_from_token_logps, test_t1_reference.py::test_dpo_loss_matches_reference_hidden, test_t2_properties.py::test_gradient_weight_is_sigmoid_of_minus_margin, test_t2_properties.py::test_only_log_ratios_matter, test_t2_properties.py::test_policy_equal_to_reference_gives_log_2, test_t2_properties.py::test_large_margins_value, test_t2_properties.py::test_large_margins_gradient, test_t2_properties.py::test_margin_sweep_matches_formula, test_t3_toy.py::test_weight_is_sigmoid_of_minus_margin, test_t3_toy.py::test_three_pairs, test_t3_toy.py::test_token_gradients_through_sequence_logp
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    return torch.where(valid, token_logp, 0.0).sum(-1)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")
    margin = beta * (policy_chosen_logp - policy_rejected_logp)  # [B]
    losses = -F.logsigmoid(margin)  # [B]
    return losses.sum() / max(losses.shape[0], 1)
