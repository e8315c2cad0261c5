"""Picks a stable formula on the sign of m with torch.where, but evaluates both branches on
the raw m: the value is right, yet the branch not taken overflows and sends NaN into the
gradient.

Caught by: test_t2_properties.py::test_large_margins_gradient, test_t2_properties.py::test_margin_sweep_matches_formula
"""

import torch
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    keep = mask.bool()  # [B, L]
    return torch.where(keep, token_logp, 0.0).sum(-1)  # [B]


def neg_log_sigmoid(m: Tensor) -> Tensor:
    """-log sigmoid(m) = log(1 + e^-m) for m >= 0, and -m + log(1 + e^m) for m < 0."""
    return torch.where(
        m >= 0,
        torch.log1p(torch.exp(-m)),
        -m + torch.log1p(torch.exp(m)),
    )


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive (got {beta})")
    ref_margin = (ref_chosen_logp - ref_rejected_logp).detach()  # [B]
    margin = beta * ((policy_chosen_logp - policy_rejected_logp) - ref_margin)  # [B]
    count = max(margin.shape[0], 1)
    return neg_log_sigmoid(margin).sum() / count
