"""DPO: sequence log-probabilities and the direct preference loss.

Fill in the two functions below. Press Run to check your work against the visible tests,
and Submit when you are ready to be graded on every tier.

Conventions used throughout:
    B    number of preference pairs (or of responses, for sequence_logp)
    L    number of token positions (responses are right-padded to a common length)
    token_logp    [B, L] log-probability of each sampled token of each response
    mask          [B, L] 1 (or True) where a token belongs to the response, 0 on padding;
                  it may be bool, integer or float
    policy_chosen_logp, policy_rejected_logp    [B] sequence log-probs under the policy
    ref_chosen_logp, ref_rejected_logp          [B] the same under the frozen reference model
"""

import torch  # noqa: F401  (you will need it)
from torch import Tensor


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    """Return the log-probability of every response, shape [B].

    A response's log-probability is the sum of the log-probs of its valid tokens.

    Things the tests check:
      * the result is a Tensor of shape [B], with the dtype of token_logp;
      * padded positions never matter, even if they hold -inf, +inf, 1e30 or NaN: keep them out of
        the sum (and out of the gradient) by selecting, not by multiplying with the mask;
      * a response with no valid token gives exactly 0;
      * the mask may be bool, integer or float;
      * your inputs are left unmodified.
    """
    raise NotImplementedError(
        "sequence_logp is not written yet: select each response's valid token log-probs "
        "and sum them."
    )


def dpo_loss(
    policy_chosen_logp: Tensor,
    policy_rejected_logp: Tensor,
    ref_chosen_logp: Tensor,
    ref_rejected_logp: Tensor,
    beta: float = 0.1,
) -> Tensor:
    """Return the DPO loss, a scalar Tensor of shape ().

    For each pair, with pc, pr, rc, rr its four sequence log-probs:
        m = beta * ((pc - rc) - (pr - rr))      (the implicit reward margin)
    and the loss is the mean over the B pairs of -log sigmoid(m).

    Things the tests check:
      * the loss is a 0-dimensional Tensor (not a Python float) with the policy's dtype;
      * the reference log-probs are constants: no gradient reaches them, even when the caller
        passed tensors with requires_grad=True, and they are not modified;
      * the value and the gradient stay finite for margins as large as |m| = 1e4 in float32
        (log(sigmoid(m)) does not);
      * an empty batch (B = 0) gives a zero you can still call backward on;
      * beta <= 0 raises ValueError with a message.
    """
    raise NotImplementedError(
        "dpo_loss is not written yet: compute the margin m of each pair, then the mean of "
        "-log sigmoid(m) in a form that cannot overflow."
    )
