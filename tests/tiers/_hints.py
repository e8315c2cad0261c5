"""Name the usual mistake when a student's value matches it.

When a value is wrong, a student learns most from hearing *which* wrong formula it matches:
"your ratio equals the arithmetic mean of the token ratios" says more than two numbers. Each
candidate below is a known mistake computed here, in float64, from the same inputs; a hint is
given only when the student's values match one candidate on every response, and only when
that candidate differs from the right answer on these inputs.

Numerical mistakes are checked the same way: `overflow_hint` computes the ratios outside log
space (products of token ratios or of probabilities) or with sums in a narrow dtype, in the
submission's own dtype, so they under- or overflow (or lose precision) exactly as the
submission's code would, and names one only when the submission's values agree with it on
every response: nan where it is nan, the same numbers where it is finite. A lone nan or inf
(a loss) is no evidence: nan has many causes, so it never earns a hint by itself.
"""

from __future__ import annotations

import torch
from _checks import Batch, tolerance
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


def _gap(x: Tensor, y: Tensor) -> float:
    """The largest distance between two results; nan meets nan (or inf meets the same inf)
    at distance 0, nan meets a number at distance inf."""
    same = (x == y) | (x.isnan() & y.isnan())
    distance = torch.where(same, 0.0, (x - y).abs().nan_to_num(nan=float("inf")))
    return float(distance.max()) if distance.numel() else 0.0


def _matches(
    actual: Tensor, candidate: Tensor, expected: Tensor, rtol: float = 1e-4, atol: float = 1e-6
) -> bool:
    """`actual` is the candidate's value: close to it (nan where it is nan) while the candidate
    is far from the right answer, or a hundred times closer to it than the candidate is to the
    right answer (a mistake that only costs precision, computed alike)."""
    a, c, e = actual.detach().double(), candidate.detach().double(), expected.double()
    if a.dim() == 0 and not bool(a.isfinite()):
        return False  # a lone nan or inf has too many causes to name one
    if not torch.allclose(c, e, rtol=1e-6, atol=1e-9, equal_nan=True) and torch.allclose(
        a, c, rtol=rtol, atol=atol, equal_nan=True
    ):
        return True
    gap = _gap(c, e)
    return 0 < gap < float("inf") and _gap(a, c) <= 0.01 * gap


def hint(
    actual: Tensor,
    expected: Tensor,
    candidates: dict[str, Tensor],
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> str:
    """The advice of every candidate that `actual` matches (two mistakes can give the same
    value on one input: both are named), or "" when none does."""
    expected = expected.detach().double()
    if actual.shape != expected.shape:
        return ""
    found = [
        advice
        for advice, candidate in candidates.items()
        if candidate.shape == expected.shape and _matches(actual, candidate, expected, rtol, atol)
    ]
    if not found:
        return ""
    return "Your value looks like a known mistake: " + "; or else ".join(found[:2])


def ratio_hint(actual: Tensor, expected: Tensor, batch: Batch) -> str:
    return hint(actual, expected, ratio_candidates(batch))


def loss_hint(actual: Tensor, expected: Tensor, batch: Batch) -> str:
    return hint(actual, expected, loss_candidates(batch))


def overflow_candidates(batch: Batch) -> dict[str, Tensor]:
    """Ratios [B] computed outside log space, or from sums in the batch's own dtype, keyed by
    the advice that fixes them; computed in that dtype, so they break where a submission
    that computes them alike breaks."""
    valid, dtype = batch.valid, batch.logp.dtype
    name = str(dtype).removeprefix("torch.")
    T = valid.sum(-1).clamp(min=1).to(dtype)  # [B]
    one = torch.ones((), dtype=dtype)
    log_ratio = torch.where(valid, batch.logp - batch.old_logp, 0 * one)  # [B, L]
    probability = torch.where(valid, batch.logp.exp(), one).prod(-1)  # [B]
    old_probability = torch.where(valid, batch.old_logp.exp(), one).prod(-1)  # [B]
    new_sum = torch.where(valid, batch.logp, 0 * one).sum(-1)  # [B]
    old_sum = torch.where(valid, batch.old_logp, 0 * one).sum(-1)  # [B]
    log_space = (
        f"in {name}, over many tokens, it under- or overflows or loses precision; average the "
        "log-ratios, then exponentiate once"
    )
    return {
        f"it equals exp of the summed log-ratios, then the T-th root: {log_space}": (
            log_ratio.sum(-1).exp() ** (1 / T)
        ),
        f"it equals the product of the token ratios, then the T-th root: {log_space}": (
            torch.where(valid, log_ratio.exp(), one).prod(-1) ** (1 / T)
        ),
        "it equals the quotient of the two policies' products of probabilities, then the "
        f"T-th root: {log_space}": (probability / old_probability) ** (1 / T),
        f"it sums each policy's log-probabilities separately in {name}, where sums of "
        f"thousands of them pass the largest value {torch.finfo(dtype).max:g}; subtract "
        "old_logp before summing, or sum in float32": ((new_sum - old_sum) / T).exp(),
    }


def overflow_hint(actual: Tensor, expected: Tensor, batch: Batch) -> str:
    """The numerical mistake that a ratio [B], or a loss () built on it, matches."""
    candidates = overflow_candidates(batch)
    if actual.dim() == 0:
        candidates = {advice: loss_from_ratio(batch, c) for advice, c in candidates.items()}
    rtol, atol = tolerance(batch.logp.dtype)
    rtol, atol = max(rtol, 1e-4), max(atol, 1e-6)
    return hint(actual, expected, candidates, rtol, atol)
