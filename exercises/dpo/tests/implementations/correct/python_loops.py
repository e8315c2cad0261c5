"""Correct: explicit Python loops, one response and one pair at a time, with boolean indexing
to pick the valid tokens; the running total starts from an empty slice's sum, a zero that
keeps the gradient path when there are no pairs."""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    totals = []
    for row, row_mask in zip(token_logp, mask, strict=True):
        totals.append(row[row_mask != 0].sum())
    if not totals:
        return token_logp.sum(-1)
    return torch.stack(totals)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError("beta must be positive, got " + str(beta))
    pairs = policy_chosen_logp.shape[0]
    total = policy_chosen_logp[:0].sum()
    for i in range(pairs):
        chosen_reward = beta * (policy_chosen_logp[i] - ref_chosen_logp[i].detach())
        rejected_reward = beta * (policy_rejected_logp[i] - ref_rejected_logp[i].detach())
        total = total - F.logsigmoid(chosen_reward - rejected_reward)
    return total / max(pairs, 1)
