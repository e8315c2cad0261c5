"""Keeps only the first 512 positions (a max_length taken from a training config), so the
tokens of a longer response beyond it are left out of its log-probability.

Caught by: test_t1_reference.py::test_long_responses_match_reference
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask[:, :512] != 0  # [B, 512]
    return torch.where(valid, token_logp[:, :512], 0.0).sum(-1)  # [B]


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
