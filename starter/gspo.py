"""GSPO: the sequence importance ratio and the clipped sequence loss.

Fill in the two functions below. Press Run to check your work against the visible tests,
and Submit when you are ready to be graded on every tier.

Conventions used throughout:
    B    number of responses in the batch
    L    number of token positions (responses are right-padded to a common length)
    logp, old_logp    [B, L] log-probabilities of the sampled tokens under the current
                      and the old policy
    mask              [B, L] 1 (or True) where a token belongs to the response, 0 on padding;
                      it may be bool, integer or float
    advantages        [B] one advantage per response
"""

import torch  # noqa: F401  (you will need it)
from torch import Tensor


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """Return the sequence importance ratio s of every response, shape [B].

    s_i is the geometric mean of the token ratios pi/pi_old over the valid tokens of
    response i: average the valid log-ratios (logp - old_logp) over the number of valid
    tokens, then exponentiate once.

    Things the tests check:
      * the result is a Tensor of shape [B], with the dtype and device of logp (also for an
        empty batch, B = 0, where it has shape [0]);
      * a response with no valid token has ratio exactly 1;
      * padded positions never matter, even if they hold -inf, +inf, 1e30 or NaN: keep them
        out of the arithmetic before you exponentiate (and out of the gradient);
      * gradients flow to logp; old_logp is a constant (the old policy is frozen);
      * thousands of tokens with very negative log-probabilities stay finite: work in log
        space;
      * your inputs are left unmodified.
    """
    raise NotImplementedError(
        "sequence_ratio is not written yet: average the valid log-ratios of each response, "
        "then exponentiate."
    )


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float = 0.2,
) -> Tensor:
    """Return the GSPO loss, a scalar Tensor of shape ().

    For each response, with s from sequence_ratio and A its advantage:
        objective_i = min(s_i * A_i, clip(s_i, 1 - clip_eps, 1 + clip_eps) * A_i)
    and the loss is minus the mean of objective_i over all B responses.

    Things the tests check:
      * the loss is a 0-dimensional Tensor (not a Python float) with the dtype of logp, even
        when advantages come in another dtype (float64 advantages, float32 logp: float32);
      * a response with no valid token contributes exactly 0, yet still counts in the mean;
      * if every response is empty, or there is none (B = 0), the loss is a zero Tensor you
        can still call backward on (the mean of an empty tensor is nan: guard it);
      * advantages and old_logp are constants: no gradient reaches them, even when the
        caller passed tensors with requires_grad=True;
      * the clip is one decision per response, not per token.
    """
    raise NotImplementedError(
        "gspo_loss is not written yet: clip the sequence ratio of each response, take the "
        "smaller surrogate, and return minus the batch mean."
    )
