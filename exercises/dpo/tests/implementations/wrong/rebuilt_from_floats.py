"""Builds the result from Python floats (one .item() per response), which cuts the
gradient path to token_logp.

Caught by: test_t0_contract.py::test_gradient_reaches_the_policy, test_t1_reference.py::test_sequence_logp_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_chained_from_token_logps, test_t1_reference.py::test_sequence_logp_matches_reference_hidden, test_t1_reference.py::test_long_responses_match_reference, test_t2_padding.py::test_padding_never_matters, test_t2_padding.py::test_empty_response_gives_zero, test_t2_padding.py::test_padding_mixture_never_matters, test_t3_toy.py::test_token_gradients_through_sequence_logp, test_t3_toy.py::test_padding_gets_zero_gradient
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    sums = [row[keep].sum().item() for row, keep in zip(token_logp, valid, strict=True)]
    return torch.tensor(sums, dtype=token_logp.dtype)  # [B]


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
