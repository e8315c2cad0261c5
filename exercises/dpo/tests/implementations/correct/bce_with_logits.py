"""Correct: the loss as binary cross-entropy of the margin against the label 1 (the chosen
response wins), and the sum over tokens as an index_add of the selected valid tokens."""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    valid = mask != 0  # [B, L]
    rows = torch.arange(token_logp.shape[0]).unsqueeze(-1).expand_as(valid)[valid]  # [N]
    totals = token_logp.new_zeros(token_logp.shape[0])  # [B]
    return totals.index_add(0, rows, token_logp[valid])


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")
    chosen_rewards = beta * (policy_chosen_logp - ref_chosen_logp.detach())  # [B]
    rejected_rewards = beta * (policy_rejected_logp - ref_rejected_logp.detach())  # [B]
    logits = chosen_rewards - rejected_rewards  # [B]
    total = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits), reduction="sum")
    return total / max(logits.shape[0], 1)
