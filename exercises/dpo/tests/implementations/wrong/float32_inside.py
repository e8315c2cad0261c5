"""Computes the loss in float32 and casts it back: the dtype is right, but float64 inputs get
only float32 accuracy (with log-probs near -3000, as long responses have, the loss is off
by a few parts in a million).

Caught by: test_t1_reference.py::test_dpo_loss_matches_reference, test_t1_reference.py::test_chained_from_token_logps, test_t1_reference.py::test_dpo_loss_matches_reference_hidden, test_t2_properties.py::test_margin_sweep_matches_formula
"""

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
    pc, pr = policy_chosen_logp.float(), policy_rejected_logp.float()
    rc, rr = ref_chosen_logp.detach().float(), ref_rejected_logp.detach().float()
    losses = -F.logsigmoid(beta * ((pc - rc) - (pr - rr)))  # [B]
    return (losses.sum() / max(len(losses), 1)).to(policy_chosen_logp.dtype)
