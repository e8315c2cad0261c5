"""T2 Math and gradient properties, part 4: the whole range of the sequence ratio.

One batch holds a response for every ratio from 1e-9 to 1e9 (each power of ten) and for
ratios just inside and just outside 1 +- clip_eps, and is compared with the reference row by
row. Each row's advantage is scaled so that its objective is +1 or -1: every row then weighs
the same in the loss and in the gradient, and a mistake confined to very small or very large
ratios (a clamp on the log-ratio, a second clip for negative advantages, a wider upper bound)
shows as clearly as one near 1. One call per clip width keeps the grading fast.
"""

from __future__ import annotations

import math

import pytest
import torch
from _checks import (
    Batch,
    call_loss,
    call_ratio,
    expect_close,
    is_close,
    reference_loss,
    reference_ratio,
    tolerance,
    worst_entry,
)
from _hints import loss_hint, ratio_hint
from torch import Tensor

pytestmark = pytest.mark.tier("T2")

DECADES = tuple(10.0**k for k in range(-9, 10))  # 1e-9 ... 1e9
NEAR_BOUNDS = (0.5, 0.9, 0.99, 1.01, 1.1, 1.5, 2.0)  # multiples of clip_eps away from 1
CLIP_WIDTHS = (0.05, 0.2, 0.5, 0.9)
L = 5


def sweep_ratios(clip_eps: float) -> list[float]:
    """Every power of ten, 1, and ratios on both sides of 1 - eps and 1 + eps."""
    near = [1 + sign * clip_eps * f for f in NEAR_BOUNDS for sign in (1, -1)]
    return sorted([*DECADES, 1.0, *(s for s in near if s > 0)])


def scaled_advantage(s: float, sign: int, clip_eps: float) -> float:
    """The advantage that makes min(s*A, clip(s)*A) equal to `sign` (0 for sign 0)."""
    if sign > 0:
        return 1 / min(s, 1 + clip_eps)
    if sign < 0:
        return -1 / max(s, 1 - clip_eps)
    return 0.0


def sweep_batch(sign: int, clip_eps: float) -> Batch:
    """One response per swept ratio (lengths 1..L), then two empty responses. Token
    log-ratios vary around log s but average exactly to it; log-probabilities stay below 0."""
    ratios = sweep_ratios(clip_eps)
    B = len(ratios) + 2
    lengths = torch.tensor([1 + i % L for i in range(len(ratios))] + [0, 0])  # [B]
    mask = torch.arange(L).expand(B, L) < lengths.unsqueeze(-1)  # [B, L]
    g = torch.Generator().manual_seed(B * 1000 + round(clip_eps * 100))
    log_s = torch.tensor([*(math.log(s) for s in ratios), 0.0, 0.0], dtype=torch.float64)
    wiggle = torch.where(mask, 0.1 * torch.rand(B, L, generator=g, dtype=torch.float64), 0.0)
    wiggle = torch.where(
        mask, wiggle - wiggle.sum(-1, keepdim=True) / lengths.clamp(min=1)[:, None], 0.0
    )
    old_logp = -(0.5 + 2 * torch.rand(B, L, generator=g, dtype=torch.float64))
    old_logp = old_logp - log_s.clamp(min=0).unsqueeze(-1)  # [B, L], keeps logp below 0
    logp = old_logp + torch.where(mask, log_s.unsqueeze(-1) + wiggle, 0.3)  # [B, L]
    empty_advantages = [float(sign or 1), float(-sign or -1)]
    advantages = [scaled_advantage(s, sign, clip_eps) for s in ratios] + empty_advantages
    advantages = torch.tensor(advantages, dtype=torch.float64)  # [B]
    kind = {1: "A > 0", -1: "A < 0", 0: "A = 0"}[sign]
    name = f"ratio sweep 1e-9..1e9, {kind}, clip_eps {clip_eps}"
    return Batch(logp, old_logp, mask, advantages, clip_eps, name)


def branch(batch: Batch, row: int) -> str:
    """Which term of min(s*A, clip(s)*A) the row takes, and what its tokens' gradient is."""
    valid = batch.valid[row]
    T = int(valid.sum())
    if T == 0:
        return "an empty response: it adds 0 and its tokens get no gradient"
    s = math.exp(float((batch.logp[row] - batch.old_logp[row])[valid].mean()))
    A, eps = float(batch.advantages[row]), batch.clip_eps
    if A == 0:
        return "A = 0: its objective and its gradient are 0"
    clipped = s > 1 + eps if A > 0 else s < 1 - eps
    side = "above 1 + clip_eps" if s > 1 + eps else "below 1 - clip_eps" if s < 1 - eps else ""
    where = f"s = {s:.6g} lies {side}" if side else f"s = {s:.6g} lies inside 1 +- clip_eps"
    if clipped:
        return f"{where} with A {'>' if A > 0 else '<'} 0: the clipped term (a constant) is kept"
    return f"{where}: min keeps s*A, so each token gets -s*A/(B*T)"


def describe_row(batch: Batch, row: int, loss: bool = True) -> str:
    """The row's length, and for the loss its advantage and the branch of the clip it takes."""
    T = int(batch.valid[row].sum())
    head = f"row {row} of the {batch.name} ({T} valid token{'' if T == 1 else 's'}"
    if not loss:
        return head + ")"
    A = float(batch.advantages[row])
    scaled = ", scaled so that its objective is +-1" if A and T else ""
    return f"{head}, A = {A:.6g}{scaled}): {branch(batch, row)}"


def expect_rows_close(
    got: Tensor, want: Tensor, what: str, batch: Batch, loss: bool = True, hint=""
) -> None:
    """Compare [B] or [B, L] results; a failure names the worst row (and its clip branch)."""
    rtol, atol = tolerance(batch.logp.dtype)
    if is_close(got, want, rtol, atol):
        return
    row = worst_entry(got, want)[0][0]
    context = lambda: describe_row(batch, row, loss)  # noqa: E731
    expect_close(got[row], want[row], f"{what} on row {row}", rtol, atol, context, hint)


def check_loss_sweep(student, reference, sign: int) -> None:
    for clip_eps in CLIP_WIDTHS:
        batch = sweep_batch(sign, clip_eps)
        loss, grad = call_loss(student, batch)
        want, want_grad = reference_loss(reference, batch)
        expect_rows_close(grad, want_grad, "d loss / d logp", batch)
        rtol, atol = tolerance(batch.logp.dtype)
        hint = lambda: loss_hint(loss, want, batch)  # noqa: E731, B023 (used at once)
        expect_close(loss, want, f"gspo_loss on the {batch.name}", rtol, atol, hint=hint)


def test_ratio_sweep_positive_advantages(student, reference):
    """A > 0, ratios from 1e-9 to 1e9 and near 1 +- eps, four clip widths: loss and gradient
    match the reference on every row (only s > 1 + eps is clipped)."""
    check_loss_sweep(student, reference, 1)


def test_ratio_sweep_negative_advantages(student, reference):
    """A < 0, ratios from 1e-9 to 1e9 and near 1 +- eps, four clip widths: loss and gradient
    match the reference on every row (only s < 1 - eps is clipped; a huge s is not)."""
    check_loss_sweep(student, reference, -1)


def test_ratio_sweep_zero_advantages(student, reference):
    """A = 0 on every response, ratios from 1e-9 to 1e9: the loss and its gradient are 0."""
    batch = sweep_batch(0, 0.2)
    loss, grad = call_loss(student, batch)
    want, want_grad = reference_loss(reference, batch)
    expect_rows_close(grad, want_grad, "d loss / d logp", batch)
    expect_close(loss, want, f"gspo_loss on the {batch.name}", 0, 1e-12)


def test_ratio_sweep_sequence_ratio(student, reference):
    """sequence_ratio and its gradient match the reference for ratios from 1e-9 to 1e9."""
    batch = sweep_batch(1, 0.2)
    ratios = torch.tensor([*sweep_ratios(0.2), 1.0, 1.0], dtype=torch.float64)
    weights = 1 / ratios  # d(sum(w * s)) / d logp is then about 1/T on every row
    ratio, grad = call_ratio(student, batch, weights)
    want, want_grad = reference_ratio(reference, batch, weights)
    hint = lambda: ratio_hint(ratio, want, batch)  # noqa: E731
    expect_rows_close(ratio, want, "sequence_ratio", batch, loss=False, hint=hint)
    expect_rows_close(grad, want_grad, "d(sum(ratio / s)) / d logp", batch, loss=False)
