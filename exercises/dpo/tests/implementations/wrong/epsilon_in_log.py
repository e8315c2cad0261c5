"""Adds 1e-8 inside the log to avoid log(0): the loss of a badly ranked pair stops growing
near 18.4 and its gradient vanishes.

Caught by: test_t2_properties.py::test_large_margins_value, test_t2_properties.py::test_large_margins_gradient
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
    losses = -torch.log(torch.sigmoid(margin) + 1e-8)  # [B]
    return losses.sum() / max(losses.shape[0], 1)
