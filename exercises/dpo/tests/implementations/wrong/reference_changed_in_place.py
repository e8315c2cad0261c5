"""Subtracts with -= on an alias of ref_chosen_logp, which changes the caller's reference
log-probs in place.

Caught by: test_t0_contract.py::test_inputs_not_modified, test_t2_properties.py::test_reference_model_is_frozen
"""

import torch
import torch.nn.functional as F
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
    ref = ref_chosen_logp.detach()  # shares memory with the caller's tensor
    ref -= ref_rejected_logp.detach()  # rc - rr, written into ref_chosen_logp
    margin = beta * ((policy_chosen_logp - policy_rejected_logp) - ref)  # [B]
    losses = -F.logsigmoid(margin)  # [B]
    return losses.sum() / max(losses.shape[0], 1)
