"""Correct: masked_fill for the sum, softplus(-m) = log(1 + e^-m) for the loss (torch's
softplus switches to the identity for large inputs), and an explicit branch for B = 0."""

import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    return token_logp.masked_fill(mask == 0, 0.0).sum(-1)  # [B]


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    if policy_chosen_logp.shape[0] == 0:
        return (policy_chosen_logp.sum() + policy_rejected_logp.sum()) * 0.0
    log_ratio_chosen = policy_chosen_logp - ref_chosen_logp.detach()
    log_ratio_rejected = policy_rejected_logp - ref_rejected_logp.detach()
    return F.softplus(-beta * (log_ratio_chosen - log_ratio_rejected)).mean()
