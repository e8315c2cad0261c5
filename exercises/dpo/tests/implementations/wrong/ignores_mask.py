"""Sums every position, padding included.

Caught by: test_t1_reference.py::test_sequence_logp_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_chained_from_token_logps, test_t1_reference.py::test_sequence_logp_matches_reference_hidden, test_t1_reference.py::test_long_responses_match_reference, test_t2_padding.py::test_padding_never_matters, test_t2_padding.py::test_empty_response_gives_zero, test_t2_padding.py::test_padding_mixture_never_matters, test_t3_toy.py::test_token_gradients_through_sequence_logp, test_t3_toy.py::test_padding_gets_zero_gradient
"""

import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    return token_logp.sum(-1)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    if policy_chosen_logp.shape[0] == 0:
        return (policy_chosen_logp.sum() + policy_rejected_logp.sum()) * 0.0
    log_ratio_chosen = policy_chosen_logp - ref_chosen_logp.detach()
    log_ratio_rejected = policy_rejected_logp - ref_rejected_logp.detach()
    return F.softplus(-beta * (log_ratio_chosen - log_ratio_rejected)).mean()
