"""Uses the stable form relu(-m) + log(1 + exp(-|m|)); its value is right, but torch gives
relu and abs a zero derivative at exactly m = 0, so when the policy equals the reference
(the first step of training, every m = 0) the gradient is 0 instead of -beta / 2B.

Caught by: test_t2_properties.py::test_policy_equal_to_reference_gives_log_2, test_t2_properties.py::test_margin_sweep_matches_formula, test_t3_toy.py::test_weight_is_sigmoid_of_minus_margin, test_t3_toy.py::test_pairs_ranked_wrong_weigh_most, test_t3_toy.py::test_three_pairs, test_t3_toy.py::test_token_gradients_through_sequence_logp
"""

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
    losses = torch.relu(-m) + torch.log1p(torch.exp(-m.abs()))  # [B]
    return losses.sum() / max(m.shape[0], 1)
