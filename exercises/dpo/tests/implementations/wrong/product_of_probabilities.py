"""Multiplies the token probabilities and takes the log of the product: the same number in
exact arithmetic, but the product underflows to 0 (log-prob -inf) for long responses or in
half precision, and exp of the padding's NaN poisons the gradient.

Caught by: test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_long_responses_match_reference, test_t2_padding.py::test_padding_never_matters, test_t2_padding.py::test_empty_response_gives_zero, test_t2_padding.py::test_padding_mixture_never_matters, test_t3_toy.py::test_padding_gets_zero_gradient
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    return torch.where(valid, token_logp.exp(), 1.0).prod(-1).log()  # [B]


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
