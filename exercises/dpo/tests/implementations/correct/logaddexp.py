"""Correct: -log sigmoid(m) = log(e^0 + e^-m) through torch.logaddexp, references read under
torch.no_grad(), and the sum over tokens as a product with a cleaned tensor: NaN and
infinities in the padding are replaced by torch.nan_to_num before the mask multiplies."""

import torch
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    clean = torch.nan_to_num(token_logp, nan=0.0, posinf=0.0, neginf=0.0)  # [B, L]
    return (clean * (mask != 0).to(token_logp.dtype)).sum(-1)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")
    with torch.no_grad():
        ref_logratios = ref_chosen_logp - ref_rejected_logp  # [B]
    pi_logratios = policy_chosen_logp - policy_rejected_logp  # [B]
    margin = beta * (pi_logratios - ref_logratios)  # [B]
    losses = torch.logaddexp(torch.zeros_like(margin), -margin)  # [B]
    return losses.sum() / max(margin.shape[0], 1)
