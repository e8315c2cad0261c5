"""Reference solution for the GSPO exercise.

GSPO (Group Sequence Policy Optimization) replaces PPO/GRPO's per-token importance ratio
with one ratio per response: the geometric mean of the valid tokens' ratios,

    s_i = exp( sum_t m_it * (logp_it - old_logp_it) / sum_t m_it ),

and clips that single number, so every token of a response shares one clipping decision and
one gradient weight s_i * A_i / (B * T_i).

The grader compares submissions against this file; it is never shown to students.
"""

from __future__ import annotations

import numbers

import torch
from torch import Tensor

__all__ = ["gspo_loss", "sequence_ratio"]


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half types are summed in float32: thousands of fp16 log-ratios lose too much."""
    return torch.promote_types(dtype, torch.float32)


def _check_scores(logp: Tensor, old_logp: Tensor, mask: Tensor) -> None:
    """Raise a message that says what was expected and what came."""
    for name, value in (("logp", logp), ("old_logp", old_logp), ("mask", mask)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    for name, value in (("logp", logp), ("old_logp", old_logp)):
        if not value.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor; got dtype {value.dtype}")
    if logp.dim() != 2:
        raise ValueError(f"logp must have shape [B, L]; got {list(logp.shape)}")
    if old_logp.shape != logp.shape:
        raise ValueError(
            f"old_logp must have the shape of logp {list(logp.shape)}; got {list(old_logp.shape)}"
        )
    if mask.shape != logp.shape:
        raise ValueError(
            f"mask must have shape [B, L] = {list(logp.shape)}; got {list(mask.shape)}"
        )
    if mask.is_complex():
        raise TypeError(f"mask must be bool, integer or float; got dtype {mask.dtype}")
    if mask.device.type != "meta" and mask.numel() and not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("mask must be binary: every entry 0/1 or False/True")


def _valid_log_ratio(logp: Tensor, old_logp: Tensor, valid: Tensor) -> Tensor:
    """Per-token log-ratio with padded positions set to exactly 0 before any arithmetic.

    `torch.where` (not multiplication by the mask) keeps -inf, +inf, 1e30 and NaN in padded
    positions out of the values, and its backward sends exactly 0 to those positions.
    """
    dtype = _compute_dtype(logp.dtype)
    zero = torch.zeros((), dtype=dtype, device=logp.device)
    current = torch.where(valid, logp.to(dtype), zero)  # [B, L]
    old = torch.where(valid, old_logp.detach().to(dtype), zero)  # [B, L], frozen
    return current - old  # [B, L]


def _mean_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Mean valid log-ratio per response (0 for an empty one) and the valid lengths T."""
    _check_scores(logp, old_logp, mask)
    valid = mask != 0  # [B, L] bool
    log_ratio = _valid_log_ratio(logp, old_logp, valid)  # [B, L]
    lengths = valid.sum(dim=-1)  # [B]
    mean = log_ratio.sum(dim=-1) / lengths.clamp(min=1).to(log_ratio.dtype)  # [B]
    return mean, lengths


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """Geometric mean of the valid-token ratios of each response, shape [B] (also for B = 0),
    in the dtype and on the device of logp.

    Averaging in log space and exponentiating once stays finite for thousands of strongly
    negative log-probabilities, where a product of token ratios would under- or overflow.
    """
    mean, _ = _mean_log_ratio(logp, old_logp, mask)
    return torch.exp(mean).to(logp.dtype)  # [B]


def _check_loss_args(logp: Tensor, advantages: Tensor, clip_eps: float) -> None:
    if not isinstance(advantages, Tensor):
        raise TypeError(f"advantages must be a torch.Tensor; got {type(advantages).__name__}")
    if advantages.dtype == torch.bool or advantages.is_complex():
        raise TypeError(f"advantages must be a real tensor; got dtype {advantages.dtype}")
    if advantages.shape != logp.shape[:1]:
        raise ValueError(
            f"advantages must have shape [B] = {list(logp.shape[:1])}; got {list(advantages.shape)}"
        )
    if isinstance(clip_eps, bool) or not isinstance(clip_eps, numbers.Real):
        raise TypeError(f"clip_eps must be a real number; got {type(clip_eps).__name__}")
    if not 0 < clip_eps < 1:
        raise ValueError(f"clip_eps must lie in (0, 1); got {clip_eps}")


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    """Negative mean over all B responses of min(s*A, clip(s, 1-eps, 1+eps)*A), shape ().

    An empty response has s = 1 but must contribute exactly 0 (it still counts in the mean),
    so its objective is zeroed explicitly rather than left at A. With no response at all
    (B = 0) the loss is a zero that backward() accepts, not the NaN of an empty mean. The
    loss takes the dtype of logp whatever the dtype of advantages: float64 advantages beside
    float32 log-probabilities give a float32 loss.
    """
    _check_loss_args(logp, advantages, clip_eps)
    mean, lengths = _mean_log_ratio(logp, old_logp, mask)
    ratio = torch.exp(mean)  # [B]
    adv = advantages.detach().to(ratio.dtype)  # [B], frozen
    unclipped = ratio * adv  # [B]
    clipped = ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv  # [B]
    objective = torch.minimum(unclipped, clipped)  # [B]
    objective = torch.where(lengths > 0, objective, torch.zeros_like(objective))  # [B]
    if objective.numel() == 0:
        return (logp.sum() * 0).to(logp.dtype)  # no responses: a differentiable zero
    return (-objective.mean()).to(logp.dtype)  # ()
