"""Correct: the textbook stable form max(-m, 0) + log(1 + e^-|m|) with torch.maximum, whose
derivative at a tie (m = 0) is split half and half, which gives the right -1/2; and
sequence_logp through a boolean-mask einsum on the zero-filled log-probs."""

import torch
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    zeroed = token_logp.masked_fill(~(mask != 0), 0)  # [B, L]
    ones = torch.ones(token_logp.shape[-1], dtype=token_logp.dtype)  # [L]
    return torch.einsum("bl,l->b", zeroed, ones)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")
    m = beta * (
        (policy_chosen_logp - ref_chosen_logp.detach())
        - (policy_rejected_logp - ref_rejected_logp.detach())
    )  # [B]
    losses = torch.maximum(-m, torch.zeros_like(m)) + torch.log1p(torch.exp(-m.abs()))  # [B]
    return losses.sum() / max(m.shape[0], 1)
