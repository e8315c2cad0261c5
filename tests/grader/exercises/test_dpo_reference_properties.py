"""Property tests of the DPO reference over random batches (hypothesis).

Each property is a fact of the paper or of the contract: padding never matters, the loss is
finite and exact for margins up to 1e4 in float32, each pair's gradient is -+beta * sigmoid(-m)
/ B, and only the log-ratios pc - rc and pr - rr matter.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

PROPERTY = settings(max_examples=50, deadline=None)
F64 = torch.float64


def softplus(x: float) -> float:
    """log(1 + e^x) in float64 arithmetic, without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def sigmoid(x: float) -> float:
    return math.exp(-softplus(-x))


@st.composite
def responses(draw):
    """token_logp [B, L] whose padded cells hold one extreme value, and the mask [B, L]."""
    b, length = draw(st.integers(1, 5)), draw(st.integers(1, 12))
    flat = st.lists(st.floats(-20.0, 0.0), min_size=b * length, max_size=b * length)
    token_logp = torch.tensor(draw(flat), dtype=F64).reshape(b, length)
    bits = draw(st.lists(st.booleans(), min_size=b * length, max_size=b * length))
    mask = torch.tensor(bits).reshape(b, length)
    pad = draw(st.sampled_from([math.nan, math.inf, -math.inf, 1e30]))
    mask_dtype = draw(st.sampled_from([torch.bool, torch.int32, torch.float64]))
    return token_logp.masked_fill(~mask, pad), mask.to(mask_dtype)


@PROPERTY
@given(responses())
def test_sequence_logp_is_the_sum_over_valid_tokens(dpo_reference, batch):
    token_logp, mask = batch
    leaf = token_logp.clone().requires_grad_(True)
    result = dpo_reference.sequence_logp(leaf, mask)
    valid = mask != 0
    want = [
        math.fsum(v for v, keep in zip(row, keeps, strict=True) if keep)
        for row, keeps in zip(token_logp.tolist(), valid.tolist(), strict=True)
    ]
    torch.testing.assert_close(result, torch.tensor(want, dtype=F64), rtol=1e-12, atol=1e-12)
    result.sum().backward()
    assert torch.equal(leaf.grad, valid.to(F64))  # 1 on valid tokens, exactly 0 on padding


@st.composite
def pairs(draw, limit: float = 1e4, dtype=F64):
    """pc, pr, rc, rr [B] (every log-prob negative) whose margins are drawn from
    [-limit, limit], and beta."""
    b = draw(st.integers(1, 6))
    beta = draw(st.sampled_from([0.01, 0.1, 0.5, 1.0, 4.0]))
    margin = st.floats(-limit, limit)
    margins = torch.tensor(draw(st.lists(margin, min_size=b, max_size=b)), dtype=F64)
    bases = draw(st.lists(st.floats(-60.0, -1.0), min_size=2 * b, max_size=2 * b))
    rc, rr = torch.tensor(bases, dtype=F64).reshape(2, b)
    half = margins / (2 * beta)
    rc, rr = rc - half.clamp(min=0), rr + half.clamp(max=0)
    return tuple(t.to(dtype) for t in (rc + half, rr - half, rc, rr)), beta


def margins_of(pc, pr, rc, rr, beta) -> list[float]:
    return [
        beta * ((a - c) - (b - d))
        for a, b, c, d in zip(*(t.tolist() for t in (pc, pr, rc, rr)), strict=True)
    ]


def run(reference, pc, pr, rc, rr, beta):
    chosen, rejected = pc.clone().requires_grad_(True), pr.clone().requires_grad_(True)
    loss = reference.dpo_loss(chosen, rejected, rc, rr, beta=beta)
    loss.backward()
    return loss, chosen.grad, rejected.grad


@PROPERTY
@given(pairs(limit=1e4, dtype=torch.float32))
def test_float32_stays_finite_and_exact_up_to_margins_of_1e4(dpo_reference, drawn):
    (pc, pr, rc, rr), beta = drawn
    loss, chosen, rejected = run(dpo_reference, pc, pr, rc, rr, beta)
    margins = margins_of(pc, pr, rc, rr, beta)  # of the float32 inputs, in float64
    want = math.fsum(softplus(-m) for m in margins) / len(margins)
    assert loss.dtype == torch.float32 and math.isfinite(loss.item())
    assert loss.item() == pytest.approx(want, rel=1e-5, abs=1e-6)
    weights = torch.tensor([beta * sigmoid(-m) / len(margins) for m in margins])
    assert torch.isfinite(chosen).all() and torch.isfinite(rejected).all()
    torch.testing.assert_close(chosen, -weights, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(rejected, weights, rtol=1e-4, atol=1e-7)


@PROPERTY
@given(pairs(limit=30.0))
def test_gradient_is_beta_sigmoid_of_minus_margin_over_b(dpo_reference, drawn):
    (pc, pr, rc, rr), beta = drawn
    _, chosen, rejected = run(dpo_reference, pc, pr, rc, rr, beta)
    margins = margins_of(pc, pr, rc, rr, beta)
    weights = torch.tensor([beta * sigmoid(-m) / len(margins) for m in margins], dtype=F64)
    torch.testing.assert_close(chosen, -weights, rtol=1e-9, atol=1e-15)
    torch.testing.assert_close(rejected, weights, rtol=1e-9, atol=1e-15)


@PROPERTY
@given(pairs(limit=30.0), st.lists(st.floats(-50.0, 50.0), min_size=2, max_size=2))
def test_only_the_log_ratios_matter(dpo_reference, drawn, shifts):
    (pc, pr, rc, rr), beta = drawn
    loss = dpo_reference.dpo_loss(pc, pr, rc, rr, beta=beta)
    a, b = shifts
    moved = dpo_reference.dpo_loss(pc + a, pr + b, rc + a, rr + b, beta=beta)
    torch.testing.assert_close(moved, loss, rtol=1e-9, atol=1e-12)
