"""T1 Reference compare: values and gradients agree with the reference on seeded random batches.

The visible tests show their inputs when they fail; the hidden ones (Submit only) draw more
varied batches (sizes, empty and full responses, spreads, clip widths, long sequences) and
say which kind of case failed without revealing its tensors. Comparisons are made against the
reference evaluated in float64 on the very same inputs, with a tolerance fitted to the dtype.
"""

from __future__ import annotations

import pytest
import torch
from _checks import (
    Batch,
    call_loss,
    call_ratio,
    expect,
    expect_close,
    make_batch,
    reference_loss,
    reference_ratio,
    tolerance,
)
from _hints import loss_hint, overflow_hint, ratio_hint

pytestmark = pytest.mark.tier("T1")

VISIBLE_CASES = (
    make_batch(1, B=4, L=6, spread=0.1, name="small batch"),
    make_batch(2, B=3, L=8, spread=1.0, clip_eps=0.3, name="wide log-ratio spread, clip 0.3"),
    make_batch(
        3,
        B=5,
        L=4,
        lengths=[4, 0, 2, 4, 1],
        spread=0.3,
        clip_eps=0.1,
        name="short responses, clip 0.1",
    ),
    make_batch(5, B=1, L=6, spread=0.3, name="a single response"),
)


def hidden_cases() -> list[Batch]:
    """Ten seeded batches that vary every knob at once (drawn once, same on every run)."""
    g = torch.Generator().manual_seed(2025)
    spreads, widths = (0.01, 0.1, 0.5, 2.0), (0.05, 0.1, 0.2, 0.3, 0.5)
    cases = []
    for k in range(10):
        B = int(torch.randint(1, 9, (1,), generator=g))
        L = int(torch.randint(1, 41, (1,), generator=g))
        spread = spreads[k % len(spreads)]
        eps = widths[k % len(widths)]
        name = f"#{k}: spread {spread}, clip_eps {eps}, {B} responses of up to {L} tokens"
        cases.append(make_batch(100 + k, B, L, spread=spread, clip_eps=eps, name=name, hidden=True))
    return cases


LONG_CASES = (
    make_batch(
        300, B=3, L=2048, lengths=[2048, 1500, 7], spread=0.05, name="long, narrow", hidden=True
    ),
    make_batch(
        301,
        B=2,
        L=1024,
        lengths=[1024, 600],
        spread=0.5,
        clip_eps=0.3,
        name="long, wide",
        hidden=True,
    ),
)


def compare_ratio(student, reference, batch: Batch, with_grad: bool = True) -> None:
    rtol, atol = tolerance(batch.logp.dtype)
    # each response's ratio depends on its own row only, so d(sum of the ratios) / d logp
    # holds every response's own gradient, row by row
    ratio, grad = call_ratio(student, batch)
    want, want_grad = reference_ratio(reference, batch)
    context = batch.describe
    expect_close(
        ratio,
        want,
        "sequence_ratio",
        rtol,
        atol,
        context,
        lambda: overflow_hint(ratio, want, batch) or ratio_hint(ratio, want, batch),
        hidden=batch.hidden,
    )
    if with_grad:
        what = "d(sum of the ratios) / d logp"
        expect_close(grad, want_grad, what, rtol, atol, context, hidden=batch.hidden)


def compare_loss(student, reference, batch: Batch, with_grad: bool = True) -> torch.Tensor:
    """Compare the loss (and its gradient) with the reference; return the gradient."""
    rtol, atol = tolerance(batch.logp.dtype)
    loss, grad = call_loss(student, batch)
    want, want_grad = reference_loss(reference, batch)
    context = batch.describe
    expect_close(
        loss,
        want,
        "gspo_loss",
        rtol,
        atol,
        context,
        lambda: overflow_hint(loss, want, batch) or loss_hint(loss, want, batch),
        hidden=batch.hidden,
    )
    if with_grad:
        expect_close(grad, want_grad, "d loss / d logp", rtol, atol, context, hidden=batch.hidden)
    return grad


def test_ratio_matches_reference(student, reference):
    """sequence_ratio and its gradient match the reference on four small batches (one has B=1)."""
    for batch in VISIBLE_CASES:
        compare_ratio(student, reference, batch)


def test_loss_matches_reference(student, reference):
    """gspo_loss and its gradient match the reference on four small batches (one has B=1)."""
    for batch in VISIBLE_CASES:
        compare_loss(student, reference, batch)


def test_low_precision_matches_reference(student, reference):
    """float32, float16 and bfloat16 inputs give the reference's values within their precision."""
    base = make_batch(4, B=4, L=12, lengths=[12, 5, 9, 0], spread=0.2, name="low precision")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        batch = base.to(dtype)
        exact = dtype == torch.float32  # half-type gradients are too coarse to compare
        compare_ratio(student, reference, batch, with_grad=exact)
        compare_loss(student, reference, batch, with_grad=exact)


@pytest.mark.hidden
def test_ratio_matches_reference_hidden(student, reference):
    """sequence_ratio and its gradient match the reference on ten varied hidden batches."""
    for batch in hidden_cases():
        compare_ratio(student, reference, batch)


@pytest.mark.hidden
def test_loss_matches_reference_hidden(student, reference):
    """gspo_loss and its gradient match the reference on ten varied hidden batches."""
    for batch in hidden_cases():
        compare_loss(student, reference, batch)


@pytest.mark.hidden
def test_long_sequences_match_reference(student, reference):
    """Responses of up to 2048 tokens match the reference in float64 and float32."""
    for batch in LONG_CASES:
        for dtype in (torch.float64, torch.float32):
            compare_ratio(student, reference, batch.to(dtype))
            compare_loss(student, reference, batch.to(dtype))


def long_half_batch(dtype: torch.dtype) -> Batch:
    """2048 positions, log-probabilities in [-50, -30], empty responses between long ones: in
    float16 a sum of the log-probabilities alone passes 65504 and overflows."""
    g = torch.Generator().manual_seed(2048)
    old_logp = -30 - 20 * torch.rand(4, 2048, generator=g, dtype=torch.float64)  # [4, 2048]
    logp = old_logp + 0.05 * torch.randn(4, 2048, generator=g, dtype=torch.float64)
    mask = torch.arange(2048).expand(4, 2048) < torch.tensor([[2048], [0], [1500], [0]])
    advantages = torch.tensor([1.0, -1.0, -0.5, 2.0], dtype=torch.float64)
    name = f"long, {dtype}, rows 1 and 3 empty"
    return Batch(logp, old_logp, mask, advantages, 0.2, name, hidden=True).to(dtype)


@pytest.mark.hidden
def test_long_half_precision_matches_reference(student, reference):
    """Responses of 2048 tokens with empty ones between them, in float16 and bfloat16: values
    within the type's precision, gradients finite and exactly 0 on padding and empty rows."""
    for dtype in (torch.float16, torch.bfloat16):
        batch = long_half_batch(dtype)
        compare_ratio(student, reference, batch, with_grad=False)
        grad = compare_loss(student, reference, batch, with_grad=False)
        expect(
            bool(grad[batch.valid].isfinite().all()),
            f"d loss / d logp is not finite on some valid tokens ({dtype})",
        )
        expect_close(
            torch.where(batch.valid, 0.0, grad.double()),
            torch.zeros(batch.logp.shape, dtype=torch.float64),
            f"d loss / d logp on padding and empty rows ({dtype})",
            0,
            0,
            hidden=True,
        )
