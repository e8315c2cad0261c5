"""Uses the stable form relu(-m) + log(1 + exp(-|m|)); its value is right, but torch gives
relu and abs a zero derivative at exactly m = 0, so when the policy equals the reference
(the first step of training, every m = 0) the gradient is 0 instead of -beta / 2B.

Caught by: test_t2_properties.py::test_policy_equal_to_reference_gives_log_2, test_t3_toy.py::test_weight_is_sigmoid_of_minus_margin
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
    losses = torch.relu(-margin) + torch.log1p(torch.exp(-margin.abs()))  # [B]
    return losses.sum() / max(losses.shape[0], 1)
