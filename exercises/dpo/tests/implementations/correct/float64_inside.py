"""Correct: everything computed in float64 and cast back to the input's dtype at the end."""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    wide = token_logp.to(torch.float64)
    kept = torch.where(mask != 0, wide, torch.zeros_like(wide))  # [B, L]
    return kept.sum(-1).to(token_logp.dtype)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if beta <= 0:
        raise ValueError(f"beta must be positive; got {beta}")
    pc, pr = policy_chosen_logp.double(), policy_rejected_logp.double()
    rc, rr = ref_chosen_logp.detach().double(), ref_rejected_logp.detach().double()
    losses = -F.logsigmoid(beta * ((pc - rc) - (pr - rr)))  # [B]
    return (losses.sum() / max(len(losses), 1)).to(policy_chosen_logp.dtype)
