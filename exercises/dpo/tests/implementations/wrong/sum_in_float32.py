"""Sums in float32 whatever the input dtype, so float64, float16 and bfloat16 log-probs come
back as float32.

Caught by: test_t0_contract.py::test_dtype_kept, test_t1_reference.py::test_chained_from_token_logps, test_t1_reference.py::test_sequence_logp_matches_reference_hidden
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    return torch.where(valid, token_logp, 0.0).sum(-1, dtype=torch.float32)


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
