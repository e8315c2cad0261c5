"""Picks a stable formula on the sign of m with torch.where, but evaluates both branches on
the raw m: the value is right, yet the branch not taken overflows and sends NaN into the
gradient.

Caught by: test_t2_properties.py::test_large_margins_gradient
"""

import torch
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
    chosen = policy_chosen_logp - ref_chosen_logp.detach()  # [B]
    rejected = policy_rejected_logp - ref_rejected_logp.detach()  # [B]
    margin = beta * (chosen - rejected)  # [B]
    positive = torch.log1p(torch.exp(-margin))  # right for m >= 0
    negative = -margin + torch.log1p(torch.exp(margin))  # right for m < 0
    losses = torch.where(margin >= 0, positive, negative)  # [B]
    return losses.sum() / max(losses.shape[0], 1)
