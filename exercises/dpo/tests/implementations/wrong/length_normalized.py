"""Averages the valid token log-probs instead of summing them (a length-normalized
log-probability), which changes every margin.

Caught by: test_t1_reference.py::test_sequence_logp_matches_reference, test_t1_reference.py::test_low_precision_matches_reference, test_t1_reference.py::test_chained_from_token_logps, test_t1_reference.py::test_sequence_logp_matches_reference_hidden, test_t1_reference.py::test_long_responses_match_reference, test_t3_toy.py::test_token_gradients_through_sequence_logp
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    total = torch.where(valid, token_logp, 0.0).sum(-1)  # [B]
    return total / valid.sum(-1).clamp(min=1)  # [B]


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
