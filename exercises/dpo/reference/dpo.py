"""Reference solution for the DPO exercise.

DPO (Direct Preference Optimization) trains a policy on preference pairs (a prompt, a chosen
response y_w and a rejected response y_l) without fitting a reward model first. With the
implicit reward r(y) = beta * log(pi(y) / pi_ref(y)), the loss of one pair is

    -log sigmoid(r(y_w) - r(y_l)) = -log sigmoid(m),  m = beta * ((pc - rc) - (pr - rr)),

where pc, pr are the policy's sequence log-probs of the chosen and the rejected response and
rc, rr the frozen reference model's. The gradient of a pair is -beta * sigmoid(-m) times the
difference of the policy's log-prob gradients: pairs the implicit reward ranks wrong weigh most.

The grader compares submissions against this file; it is never shown to students.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["dpo_loss", "sequence_logp"]


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half types are summed in float32: hundreds of fp16 log-probs lose too much."""
    return torch.promote_types(dtype, torch.float32)


def _check_tokens(token_logp: Tensor, mask: Tensor) -> None:
    """Raise a message that says what was expected and what came."""
    for name, value in (("token_logp", token_logp), ("mask", mask)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    if not token_logp.is_floating_point():
        raise TypeError(f"token_logp must be a floating tensor; got dtype {token_logp.dtype}")
    if token_logp.dim() != 2:
        raise ValueError(f"token_logp must have shape [B, L]; got {list(token_logp.shape)}")
    if mask.shape != token_logp.shape:
        raise ValueError(
            f"mask must have the shape of token_logp {list(token_logp.shape)}; "
            f"got {list(mask.shape)}"
        )
    if mask.is_complex():
        raise TypeError(f"mask must be bool, integer or float; got dtype {mask.dtype}")


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    """Sum of each response's valid token log-probs, shape [B]; an empty response gives 0.

    `torch.where` (not multiplication by the mask) keeps -inf, NaN and 1e30 in padded
    positions out of the sum, and its backward sends exactly 0 to those positions.
    """
    _check_tokens(token_logp, mask)
    valid = mask != 0  # [B, L] bool, for any mask dtype
    dtype = _compute_dtype(token_logp.dtype)
    zero = torch.zeros((), dtype=dtype, device=token_logp.device)
    kept = torch.where(valid, token_logp.to(dtype), zero)  # [B, L], padding exactly 0
    return kept.sum(dim=-1).to(token_logp.dtype)  # [B]


def _check_pairs(logps: dict[str, Tensor], beta: float) -> None:
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise TypeError(f"beta must be a real number; got {type(beta).__name__}")
    if not (beta > 0 and math.isfinite(beta)):
        raise ValueError(f"beta must be a positive, finite number; got {beta}")
    shape = None
    for name, value in logps.items():
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
        if not value.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor; got dtype {value.dtype}")
        if value.dim() != 1:
            raise ValueError(f"{name} must have shape [B]; got {list(value.shape)}")
        shape = shape or value.shape
        if value.shape != shape:
            raise ValueError(
                f"{name} must have the shape of policy_chosen_logp {list(shape)}; "
                f"got {list(value.shape)}"
            )


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    """Mean over the B pairs of -log sigmoid(m), shape (), in the policy's dtype.

    `logsigmoid` stays finite for any finite margin (log(sigmoid(m)) is -inf below m = -104
    in float32), and the mean is written as sum / max(B, 1) so that B = 0 gives a zero that
    still has a gradient path to the policy inputs.
    """
    logps = {
        "policy_chosen_logp": policy_chosen_logp,
        "policy_rejected_logp": policy_rejected_logp,
        "ref_chosen_logp": ref_chosen_logp,
        "ref_rejected_logp": ref_rejected_logp,
    }
    _check_pairs(logps, beta)
    dtype = _compute_dtype(policy_chosen_logp.dtype)
    chosen = policy_chosen_logp.to(dtype) - ref_chosen_logp.detach().to(dtype)  # [B]
    rejected = policy_rejected_logp.to(dtype) - ref_rejected_logp.detach().to(dtype)  # [B]
    margin = beta * (chosen - rejected)  # [B], the implicit reward margin m
    losses = -F.logsigmoid(margin)  # [B]
    pairs = max(margin.shape[0], 1)
    return (losses.sum() / pairs).to(policy_chosen_logp.dtype)  # ()
