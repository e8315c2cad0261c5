"""Name the usual mistake when a student's value matches it.

When a value is wrong, a student learns most from hearing *which* wrong formula it matches:
"your ratio equals the arithmetic mean of the token ratios" says more than two numbers. Each
candidate below is a known mistake computed here, in float64, from the same inputs; a hint is
given only when the student's values match one candidate on every response, and only when
that candidate differs from the right answer on these inputs.

A value that under- or overflows is checked the same way: `overflow_hint` names the way out
of log space only when the submission's value is inf, nan or 0 where the exact one is an
ordinary number, and a product of token ratios or of probabilities, computed in the
submission's dtype, breaks on the very same responses.
"""

from __future__ import annotations

import torch
from _checks import Batch
from torch import Tensor


def _parts(batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
    """Valid log-ratios with padding at 0 [B, L], valid lengths T [B], the valid mask [B, L]."""
    valid = batch.valid
    log_ratio = torch.where(valid, batch.logp.double() - batch.old_logp.double(), 0.0)  # [B, L]
    return log_ratio, valid.sum(-1).double(), valid


def ratio_candidates(batch: Batch) -> dict[str, Tensor]:
    """Wrong sequence ratios [B] students often produce, keyed by the advice that fixes them."""
    log_ratio, lengths, valid = _parts(batch)
    T = lengths.clamp(min=1)
    token_ratio = torch.where(valid, log_ratio.exp(), 0.0)  # [B, L]
    L = batch.logp.shape[-1]
    return {
        "it equals the arithmetic mean of the token ratios; GSPO uses the geometric mean: "
        "average the log-ratios, then exponentiate once": torch.where(
            lengths > 0, token_ratio.sum(-1) / T, 1.0
        ),
        "it equals exp(sum of log-ratios / L); divide by each response's number of valid "
        "tokens, not by the padded length L": (log_ratio.sum(-1) / L).exp(),
        "it equals the product of the token ratios; take the mean of the log-ratios "
        "(divide by the valid length) before exponentiating": log_ratio.sum(-1).exp(),
        "it equals the inverse ratio; the log-ratio is logp - old_logp": (
            -log_ratio.sum(-1) / T
        ).exp(),
        "it equals the mean log-ratio itself; exponentiate it": log_ratio.sum(-1) / T,
        "it equals the ratio with its mean log-ratio clamped to [-10, 10]; GSPO clips the "
        "ratio only inside the loss, through min(s*A, clip(s)*A), never the log-ratio itself": (
            (log_ratio.sum(-1) / T).clamp(-10, 10).exp()
        ),
        "it equals the ratio with every token log-ratio clamped to [-20, 20]; GSPO clips the "
        "ratio only inside the loss, through min(s*A, clip(s)*A), never a token's log-ratio": (
            (torch.where(valid, log_ratio.clamp(-20, 20), 0.0).sum(-1) / T).exp()
        ),
    }


def _objectives(batch: Batch, ratio: Tensor) -> tuple[Tensor, Tensor]:
    eps = batch.clip_eps
    adv = batch.advantages.double()
    return ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv  # [B], [B]


def _per_token_objective(batch: Batch) -> Tensor:
    """GRPO-style: each token ratio clipped on its own, averaged over the valid tokens [B]."""
    log_ratio, lengths, valid = _parts(batch)
    raw, clipped = _objectives(batch, log_ratio.exp().T)  # [L, B] each
    token = torch.where(valid, torch.minimum(raw, clipped).T, 0.0)  # [B, L]
    return token.sum(-1) / lengths.clamp(min=1)


def loss_from_ratio(batch: Batch, ratio: Tensor) -> Tensor:
    """The right loss () built on the given ratios [B] (float64)."""
    raw, clipped = _objectives(batch, ratio.double())
    nonempty = batch.valid.any(-1)  # [B]
    objective = torch.where(nonempty, torch.minimum(raw, clipped), 0.0)  # [B]
    return -objective.sum() / max(batch.B, 1)


def loss_candidates(batch: Batch) -> dict[str, Tensor]:
    """Wrong losses (shape ()) students often produce, keyed by the advice that fixes them:
    the loss's own mistakes first, then the right loss built on a wrong ratio."""
    log_ratio, lengths, _ = _parts(batch)
    ratio = (log_ratio.sum(-1) / lengths.clamp(min=1)).exp()  # [B]
    raw, clipped = _objectives(batch, ratio)
    nonempty = lengths > 0  # [B]
    good = torch.where(nonempty, torch.minimum(raw, clipped), 0.0)  # [B]
    count = max(int(nonempty.sum()), 1)
    dual = torch.where(
        batch.advantages.double() < 0, torch.maximum(good, 3 * batch.advantages.double()), good
    )
    from_ratio = {
        f"its sequence ratios are wrong: {advice}": loss_from_ratio(batch, wrong)
        for advice, wrong in ratio_candidates(batch).items()
    }
    return {
        "it equals minus the correct loss; the loss is the NEGATIVE mean objective": good.mean(),
        "it equals the sum over responses; take the mean over all B responses": -good.sum(),
        "it equals the mean over non-empty responses only; empty responses contribute 0 but "
        "still count in the mean over all B": -good.sum() / count,
        "it uses max() where the clipped objective takes min()": -torch.where(
            nonempty, torch.maximum(raw, clipped), 0.0
        ).mean(),
        "it lets empty responses contribute their advantage; an empty response must "
        "contribute exactly 0": -torch.where(nonempty, good, batch.advantages.double()).mean(),
        "it ignores the min(): use min(s*A, clip(s)*A), not the clipped term alone": -torch.where(
            nonempty, clipped, 0.0
        ).mean(),
        "it equals per-token (GRPO-style) clipping; GSPO clips one sequence ratio per "
        "response, so all its tokens share one clipping decision": -_per_token_objective(
            batch
        ).mean(),
        "it equals the dual-clip objective, which caps a negative advantage's loss at 3*|A|; "
        "GSPO has no second clip: with A < 0 a large ratio keeps s*A": -torch.where(
            nonempty, dual, 0.0
        ).mean(),
    } | from_ratio


def _matches(actual: Tensor, candidate: Tensor, expected: Tensor) -> bool:
    a, c = actual.detach().double(), candidate.detach().double()
    if torch.allclose(c, expected, rtol=1e-6, atol=1e-9, equal_nan=True):
        return False  # this mistake makes no difference on this input
    return bool(torch.allclose(a, c, rtol=1e-4, atol=1e-6, equal_nan=True))


def hint(actual: Tensor, expected: Tensor, candidates: dict[str, Tensor]) -> str:
    """The advice of the first candidate that `actual` matches, or "" when none does."""
    expected = expected.detach().double()
    if actual.shape != expected.shape:
        return ""
    for advice, candidate in candidates.items():
        if candidate.shape == expected.shape and _matches(actual, candidate, expected):
            return f"Your value looks like a known mistake: {advice}"
    return ""


def ratio_hint(actual: Tensor, expected: Tensor, batch: Batch) -> str:
    return hint(actual, expected, ratio_candidates(batch))


def loss_hint(actual: Tensor, expected: Tensor, batch: Batch) -> str:
    return hint(actual, expected, loss_candidates(batch))


def _broken(values: Tensor) -> Tensor:
    """Where a ratio came out inf, nan or 0 [B] bool."""
    values = values.detach().double()
    return ~torch.isfinite(values) | (values == 0)


def overflow_candidates(batch: Batch) -> list[Tensor]:
    """Ratios [B] computed outside log space, in the batch's own dtype: a product of token
    ratios, exp of the summed log-ratios, and a ratio of products of probabilities, each
    followed by the T-th root."""
    valid = batch.valid
    T = valid.sum(-1).clamp(min=1).to(batch.logp.dtype)  # [B]
    one = torch.ones((), dtype=batch.logp.dtype)
    log_ratio = torch.where(valid, batch.logp - batch.old_logp, 0 * one)  # [B, L]
    probability = torch.where(valid, batch.logp.exp(), one).prod(-1)  # [B]
    old_probability = torch.where(valid, batch.old_logp.exp(), one).prod(-1)  # [B]
    return [
        torch.where(valid, log_ratio.exp(), one).prod(-1) ** (1 / T),
        log_ratio.sum(-1).exp() ** (1 / T),
        (probability / old_probability) ** (1 / T),
    ]


LOG_SPACE_ADVICE = (
    "Your value looks like a known mistake: it is inf, nan or 0 on rows where the exact ratio "
    "is an ordinary number, as a product of thousands of token ratios (or of probabilities) "
    "under- or overflows on this input; average the log-ratios, then exponentiate once"
)


def overflow_hint(actual: Tensor, expected: Tensor, batch: Batch) -> str:
    """The log-space advice, when the ratio [B] or the loss () came out inf, nan or 0 where
    the exact value did not, and leaving log space breaks on the same responses."""
    bad = _broken(actual) & ~_broken(expected)  # [B] or ()
    if not bool(bad.any()):
        return ""
    breaks = torch.stack([_broken(c) for c in overflow_candidates(batch)]).any(0)  # [B]
    same = bool(breaks.any()) if bad.dim() == 0 else bool(breaks[bad].all())
    return LOG_SPACE_ADVICE if same else ""
