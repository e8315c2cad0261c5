"""Name the usual mistake when a student's value matches it.

"Your loss equals the loss with the margin's sign swapped" teaches more than two numbers.
Each candidate below is a known mistake computed here, in float64, from the same inputs; a
hint is given only when the student's values match one candidate everywhere, and only when
that mistake makes a difference on these inputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _checks import Pairs, Tokens
from torch import Tensor


def sequence_candidates(tokens: Tokens) -> dict[str, Tensor]:
    """Wrong sequence log-probs [B] students often produce, keyed by the advice."""
    logp, valid = tokens.token_logp.double(), tokens.valid
    kept = torch.where(valid, logp, 0.0)  # [B, L]
    lengths = valid.sum(-1).double()  # [B]
    return {
        "it equals the mean of the valid token log-probs; a response's log-probability is "
        "their sum, not an average over its length": kept.sum(-1) / lengths.clamp(min=1),
        "it equals the sum divided by the padded length L; sum the valid log-probs and do "
        "not divide": kept.sum(-1) / logp.shape[-1],
        "it equals the sum over every position, padding included; sum only where the mask "
        "is set": logp.sum(-1),
    }


def _mean(losses: Tensor) -> Tensor:
    return losses.sum() / max(losses.shape[0], 1)


def loss_candidates(pairs: Pairs) -> dict[str, Tensor]:
    """Wrong losses (shape ()) students often produce, keyed by the advice that fixes them."""
    pc, pr, rc, rr = (t.double() for t in pairs.tensors())
    beta, m = pairs.beta, pairs.margin
    return {
        "it equals the loss with the margin's sign swapped; m = beta * ((pc - rc) - (pr - rr)) "
        "rewards the chosen response": _mean(F.softplus(m)),
        "it equals -beta * log sigmoid(m / beta); beta scales the margin inside the sigmoid, "
        "not the loss outside it": _mean(-beta * F.logsigmoid(m / beta)),
        "it ignores beta; the margin is beta times the difference of the log-ratios": _mean(
            F.softplus(-m / beta)
        ),
        "it equals the sum over the pairs; take the mean over the B pairs": F.softplus(-m).sum(),
        "it leaves out the reference model; each log-prob is measured against the "
        "reference's: (pc - rc) - (pr - rr)": _mean(F.softplus(-beta * (pc - pr))),
        "it multiplies only the policy's log-probs by beta; beta multiplies the whole "
        "difference of log-ratios": _mean(F.softplus(-(beta * (pc - pr) - (rc - rr)))),
        "it adds the reference log-probs instead of subtracting them": _mean(
            F.softplus(-beta * ((pc + rc) - (pr + rr)))
        ),
        "it equals -sigmoid(m); the loss is minus the LOG of sigmoid(m)": _mean(-torch.sigmoid(m)),
        "it equals log sigmoid(m) without the minus sign; the loss is -log sigmoid(m)": _mean(
            F.logsigmoid(m)
        ),
        "it equals -log sigmoid of the mean margin; take -log sigmoid of each pair's margin, "
        "then the mean": F.softplus(-m.mean()) if pairs.B else torch.zeros((), dtype=m.dtype),
    }


def _matches(actual: Tensor, candidate: Tensor, expected: Tensor) -> bool:
    if torch.allclose(candidate, expected, rtol=1e-6, atol=1e-9):
        return False  # this mistake makes no difference on this input
    return bool(torch.allclose(actual.detach().double(), candidate, rtol=1e-4, atol=1e-6))


def hint(actual: Tensor, expected: Tensor, candidates: dict[str, Tensor]) -> str:
    """The advice of the candidates that `actual` matches ("" when none does); two mistakes
    can coincide on one input, and then both are named."""
    expected = expected.detach().double()
    if actual.shape != expected.shape:
        return ""
    found = [
        advice
        for advice, candidate in candidates.items()
        if candidate.shape == expected.shape and _matches(actual, candidate, expected)
    ]
    if len(found) > 1:
        return "Your value looks like one of these known mistakes: " + "; or ".join(found)
    return f"Your value looks like a known mistake: {found[0]}" if found else ""


def sequence_hint(actual: Tensor, expected: Tensor, tokens: Tokens) -> str:
    return hint(actual, expected, sequence_candidates(tokens))


def loss_hint(actual: Tensor, expected: Tensor, pairs: Pairs) -> str:
    return hint(actual, expected, loss_candidates(pairs))
