"""Correct: log(1 + e^-m) written out with a stable branch on the sign of m, each branch fed a
clamped margin so that the branch not taken cannot overflow (torch.where would otherwise send
NaN back from it)."""

import torch
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    keep = mask.bool()  # [B, L]
    return torch.where(keep, token_logp, 0.0).sum(-1)  # [B]


def neg_log_sigmoid(m: Tensor) -> Tensor:
    """-log sigmoid(m) = log(1 + e^-m) for m >= 0, and -m + log(1 + e^m) for m < 0."""
    positive = m.clamp(min=0)
    negative = m.clamp(max=0)
    return torch.where(
        m >= 0,
        torch.log1p(torch.exp(-positive)),
        -negative + torch.log1p(torch.exp(negative)),
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
