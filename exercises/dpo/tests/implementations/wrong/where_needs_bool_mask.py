"""Uses the mask itself as torch.where's condition, which only works for a bool mask.

Caught by: test_t0_contract.py::test_mask_types, test_t3_toy.py::test_weight_is_sigmoid_of_minus_margin, test_t3_toy.py::test_pairs_ranked_wrong_weigh_most, test_t3_toy.py::test_three_pairs, test_t3_toy.py::test_token_gradients_through_sequence_logp, test_t3_toy.py::test_padding_gets_zero_gradient
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask, token_logp, 0.0).sum(-1)  # [B]


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
    losses = -F.logsigmoid(margin)  # [B]
    return losses.sum() / max(losses.shape[0], 1)
