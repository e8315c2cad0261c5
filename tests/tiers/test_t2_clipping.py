"""T2 Math and gradient properties, part 3: token weights, per-response clipping, invariances.

The paper's gradient (its Eq. 11) gives every valid token of an unclipped response the same
weight s_i * A_i / T_i (divided by B for the batch mean, negated for the loss); a clipped
response gives all its tokens weight 0. Which side clips depends on the sign of A.
"""

from __future__ import annotations

import pytest
import torch
from _checks import (
    Batch,
    call_loss,
    call_ratio,
    difference,
    expect_close,
    fail,
    is_close,
    make_batch,
    ratio_batch,
    reference_loss,
    reference_ratio,
    unclipped_weights,
    worst_entry,
)
from _hints import loss_hint, overflow_hint, ratio_hint

pytestmark = pytest.mark.tier("T2")


def check_rows(student, batch: Batch, clipped: list[bool], labels: list[str]) -> None:
    """Each row's gradient is -s*A/(B*T) on every valid token, or 0 where it is clipped."""
    _, grad = call_loss(student, batch)
    weights = unclipped_weights(batch)  # [B, L]
    want = torch.where(torch.tensor(clipped).unsqueeze(-1), 0.0, weights)  # [B, L]
    for i, label in enumerate(labels):
        got_row, want_row = grad[i][batch.valid[i]], want[i][batch.valid[i]]
        if is_close(got_row, want_row, 1e-7, 1e-12):
            continue
        token, got, expected = worst_entry(got_row, want_row)
        gap = difference(got, expected, 1e-7, 1e-12)
        if clipped[i]:
            fail(
                f"row {i} ({label}) is clipped, so every one of its tokens must get gradient 0; "
                f"token {token[0]} {gap}. Clip the sequence ratio once per response and keep "
                "min(s*A, clip(s)*A): the clipped branch is a constant"
            )
        same = is_close(got_row, got_row[:1].expand_as(got_row), 1e-6, 0)
        fail(
            f"row {i} ({label}) is not clipped, so each valid token must get gradient "
            f"-s*A/(B*T); token {token[0]} {gap}"
            + ("" if same else " (the tokens of one response must share one weight)")
        )
    pad = grad[~batch.valid]
    expect_close(pad, torch.zeros_like(pad), "d loss / d logp on padding", 0, 0)


def test_equal_token_gradient_weights(student):
    """Every valid token of an unclipped response gets the same weight -s*A/(B*T)."""
    batch = ratio_batch(
        [1.05, 0.9, 1.15, 0.97], [6, 3, 1, 5], [1.0, -2.0, 0.5, -0.3], L=6, name="unclipped rows"
    )
    labels = ["s=1.05, A=+1, T=6", "s=0.9, A=-2, T=3", "s=1.15, A=+0.5, T=1", "s=0.97, A=-0.3"]
    check_rows(student, batch, [False] * 4, labels)


def test_positive_advantage_clips_above(student):
    """With A > 0 only s > 1+eps clips (zero gradient); below 1-eps the raw term is kept."""
    batch = ratio_batch([1.5, 0.5, 1.1], [4, 3, 2], [1.0, 1.0, 1.0], L=4, name="A = +1")
    labels = [
        "A=+1, s=1.5 above 1+eps: clipped",
        "A=+1, s=0.5 below 1-eps: min keeps s*A",
        "A=+1, s=1.1 inside",
    ]
    check_rows(student, batch, [True, False, False], labels)


def test_negative_advantage_clips_below(student):
    """With A < 0 only s < 1-eps clips (zero gradient); above 1+eps the raw term is kept."""
    batch = ratio_batch([0.5, 1.5, 0.9], [4, 3, 2], [-1.0, -1.0, -1.0], L=4, name="A = -1")
    labels = [
        "A=-1, s=0.5 below 1-eps: clipped",
        "A=-1, s=1.5 above 1+eps: min keeps s*A",
        "A=-1, s=0.9 inside",
    ]
    check_rows(student, batch, [True, False, False], labels)


@pytest.mark.hidden
def test_clip_eps_sets_the_boundary(student):
    """The clip width comes from clip_eps: responses just inside and just outside 1 +- eps."""
    rows = (
        "with A=+1 and s just above 1+eps (clipped)",
        "with A=+1 and s just below 1+eps (not clipped)",
        "with A=-1 and s just below 1-eps (clipped)",
        "with A=-1 and s just above 1-eps (not clipped)",
    )
    for eps in (0.05, 0.3, 0.5):
        ratios = [1 + eps * 1.1, 1 + eps * 0.9, 1 - eps * 1.1, 1 - eps * 0.9]
        batch = ratio_batch(ratios, [3, 2, 4, 1], [1.0, 1.0, -1.0, -1.0], L=4, clip_eps=eps)
        _, grad = call_loss(student, batch)
        weights = unclipped_weights(batch)  # [B, L]
        clipped = torch.tensor([True, False, True, False]).unsqueeze(-1)
        want = torch.where(clipped, 0.0, weights)
        if not is_close(grad, want, 1e-7, 1e-12):
            row = worst_entry(grad, want)[0][0]
            fail(
                f"with clip_eps={eps}, the response {rows[row]} gets the wrong gradient: "
                "responses just outside 1 +- clip_eps are clipped (zero gradient) and those "
                "just inside are not; take the bounds from the clip_eps argument"
            )


def duplicated(batch: Batch) -> Batch:
    """Every token (and padding) repeated in place: [a, b, pad] -> [a, a, b, b, pad, pad]."""
    twice = {
        name: getattr(batch, name).repeat_interleave(2, dim=-1)
        for name in ("logp", "old_logp", "mask")
    }
    return Batch(
        twice["logp"],
        twice["old_logp"],
        twice["mask"],
        batch.advantages,
        batch.clip_eps,
        batch.name + ", every token duplicated",
    )


UNDIVIDED = (
    "; yours squared: its log-ratios are summed, not averaged; divide by the number of valid tokens"
)


def test_duplicating_tokens_leaves_loss_unchanged(student):
    """Repeating every token of every response leaves the ratios and the loss unchanged."""
    batch = make_batch(61, B=4, L=5, lengths=[5, 2, 0, 3], spread=0.3, name="original")
    twice = duplicated(batch)
    ratio, _ = call_ratio(student, batch)
    ratio_twice, _ = call_ratio(student, twice)
    expect_close(
        ratio_twice,
        ratio,
        "sequence_ratio after duplicating every token",
        1e-9,
        1e-12,
        batch.describe,
        lambda: (
            "the geometric mean of [a, a, b, b] is that of [a, b]"
            + (UNDIVIDED if is_close(ratio_twice.log(), 2 * ratio.log(), 1e-6, 1e-9) else "")
        ),
    )
    loss, _ = call_loss(student, batch)
    loss_twice, _ = call_loss(student, twice)
    expect_close(
        loss_twice,
        loss,
        "gspo_loss after duplicating every token",
        1e-9,
        1e-12,
        batch.describe,
        "the loss depends on each response's ratio only, never on its length",
    )


def test_permuting_responses_permutes_ratios(student):
    """Reordering the responses reorders the ratios the same way and leaves the loss unchanged."""
    batch = make_batch(62, B=5, L=4, lengths=[4, 1, 3, 0, 2], spread=0.4, name="original")
    order = torch.tensor([3, 0, 4, 1, 2])
    shuffled = Batch(
        batch.logp[order],
        batch.old_logp[order],
        batch.mask[order],
        batch.advantages[order],
        batch.clip_eps,
        "rows reordered [3, 0, 4, 1, 2]",
    )
    ratio, _ = call_ratio(student, batch)
    ratio_shuffled, _ = call_ratio(student, shuffled)
    expect_close(
        ratio_shuffled,
        ratio[order],
        "sequence_ratio of the reordered batch",
        1e-9,
        1e-12,
        batch.describe,
        "each ratio must depend on its own response only",
    )
    loss, _ = call_loss(student, batch)
    loss_shuffled, _ = call_loss(student, shuffled)
    expect_close(
        loss_shuffled, loss, "gspo_loss of the reordered batch", 1e-9, 1e-12, batch.describe
    )


def long_batch(dtype: torch.dtype) -> Batch:
    """4096 positions, log-probabilities between -50 and -30: products of token ratios or of
    probabilities under- and overflow long before the end; a mean of log-ratios does not."""
    g = torch.Generator().manual_seed(4096)
    old_logp = -30 - 20 * torch.rand(3, 4096, generator=g, dtype=torch.float64)  # [3, 4096]
    logp = -30 - 20 * torch.rand(3, 4096, generator=g, dtype=torch.float64)  # [3, 4096]
    mask = torch.arange(4096).expand(3, 4096) < torch.tensor([[4096], [3000], [1]])
    advantages = torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
    return Batch(
        logp.to(dtype),
        old_logp.to(dtype),
        mask,
        advantages.to(dtype),
        0.2,
        f"3 responses of 4096, 3000 and 1 tokens, log-probs in [-50, -30], {dtype}",
    )


def test_long_sequences_stay_finite(student, reference):
    """4096 tokens of log-probabilities near -40 give the float64 reference's ratio and loss."""
    for dtype, (rtol, atol) in ((torch.float64, (1e-7, 1e-9)), (torch.float32, (1e-4, 1e-6))):
        check_long_batch(student, reference, long_batch(dtype), rtol, atol)


def check_long_batch(student, reference, batch: Batch, rtol: float, atol: float) -> None:
    """Ratio, then loss, against the reference; a hint only where the values match a mistake."""
    ratio, _ = call_ratio(student, batch)
    want, _ = reference_ratio(reference, batch)
    expect_close(
        ratio,
        want,
        f"sequence_ratio on {batch.name}",
        rtol,
        atol,
        hint=lambda: overflow_hint(ratio, want, batch) or ratio_hint(ratio, want, batch),
    )
    loss, _ = call_loss(student, batch)
    want, _ = reference_loss(reference, batch)
    expect_close(
        loss,
        want,
        f"gspo_loss on {batch.name}",
        rtol,
        atol,
        hint=lambda: overflow_hint(loss, want, batch) or loss_hint(loss, want, batch),
    )
