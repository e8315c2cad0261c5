"""T2 Math and gradient properties, part 2: what the paper says about the loss and its gradient.

These tests check properties of DPO, mostly against a formula written out here or against
the submission itself, so a failure names the property, not just a number: the reference
model is frozen, each pair's gradient weight is sigmoid(-m), only log-ratios matter, the
first step (policy = reference) is a log 2 loss, huge margins stay finite, every order of
magnitude of the margin gives the formula's loss and gradient (hidden), and an empty batch
still gives a loss one can backpropagate.
"""

from __future__ import annotations

import math

import pytest
import torch
from _checks import (
    F64,
    Pairs,
    call_dpo_loss,
    expect,
    expect_close,
    expect_tensor,
    expected_grads,
    expected_loss,
    fail,
    finite,
    leaf,
    make_pairs,
    pairs_with_margins,
    show,
    tolerance,
)

pytestmark = pytest.mark.tier("T2")

# Comparing a submission with itself after a move of the inputs: loose enough that rounding
# never decides (float32 arithmetic inside is T1's business), while forgetting the reference
# model moves the loss by far more.
SELF_TOLERANCE = (1e-5, 1e-7)
HUGE_MARGINS = (-1e4, -1e3, -150.0, -30.0, 0.5, 30.0, 150.0, 1e3, 1e4)
SWEEP_MARGINS = (0.0, *(sign * 10.0**k for k in range(-3, 5) for sign in (1, -1)))  # 17
SWEEP_BETAS = (0.01, 0.1, 1.0, 10.0)
STABLE_ADVICE = (
    "compute -log sigmoid(m) in a form that cannot overflow: F.logsigmoid(m), "
    "F.softplus(-m), or torch.logaddexp(0, -m); log(sigmoid(m)) is log(0) = -inf once "
    "m < -104 in float32, and clamping m changes the answer"
)


def test_reference_model_is_frozen(student):
    """ref_chosen_logp and ref_rejected_logp get no gradient, even with requires_grad=True."""
    pairs = make_pairs(61, B=3, spread=4.0)
    chosen, rejected = leaf(pairs.policy_chosen), leaf(pairs.policy_rejected)
    ref_chosen, ref_rejected = leaf(pairs.ref_chosen), leaf(pairs.ref_rejected)
    loss = student.dpo_loss(chosen, rejected, ref_chosen, ref_rejected)
    expect_tensor(loss, "dpo_loss", ())
    expect(loss.requires_grad, "dpo_loss returned a loss without a gradient path to the policy")
    loss.backward()
    for name, value in (("ref_chosen_logp", ref_chosen), ("ref_rejected_logp", ref_rejected)):
        expect(
            value.grad is None,
            lambda name=name, value=value: (
                f"after backward through dpo_loss, {name}.grad is {show(value.grad)}; expected "
                "None: the reference model is frozen, so use its log-probs through "
                f"{name}.detach()"
            ),
        )
    for name, value, before in (
        ("ref_chosen_logp", ref_chosen, pairs.ref_chosen),
        ("ref_rejected_logp", ref_rejected, pairs.ref_rejected),
    ):
        expect(torch.equal(value.detach(), before), f"dpo_loss modified {name}")


def test_gradient_weight_is_sigmoid_of_minus_margin(student):
    """Each pair's gradient is -beta * sigmoid(-m) / B on pc and +beta * sigmoid(-m) / B on pr.

    Pairs the implicit reward model ranks wrong (m < 0) weigh most."""
    margins = (-6.0, -2.0, -0.5, 0.25, 2.0, 6.0)
    pairs = pairs_with_margins(margins, beta=0.2, name=f"margins {list(margins)}, beta 0.2")
    _, chosen, rejected = call_dpo_loss(student, pairs)
    want_chosen, want_rejected = expected_grads(pairs)
    formula = "expected -beta * sigmoid(-m) / B on each chosen log-prob"
    expect_close(
        chosen,
        want_chosen,
        "d loss / d policy_chosen_logp",
        *tolerance(F64),
        pairs.describe,
        formula,
    )
    expect_close(
        rejected,
        want_rejected,
        "d loss / d policy_rejected_logp",
        *tolerance(F64),
        pairs.describe,
        "expected +beta * sigmoid(-m) / B on each rejected log-prob, the chosen one's negative",
    )


def test_only_log_ratios_matter(student):
    """Moving a response's policy and reference log-probs by the same amount changes nothing.

    The loss sees each response only through its log-ratio log(pi / pi_ref)."""
    pairs = make_pairs(62, B=4, beta=0.3, spread=3.0, name="log-ratios")
    g = torch.Generator().manual_seed(62)
    shift_chosen, shift_rejected = -40.0 * torch.rand(2, 4, generator=g, dtype=F64)
    moved = Pairs(
        pairs.policy_chosen + shift_chosen,
        pairs.policy_rejected + shift_rejected,
        pairs.ref_chosen + shift_chosen,
        pairs.ref_rejected + shift_rejected,
        pairs.beta,
        "the same pairs, each response moved under both models",
    )
    before, after = call_dpo_loss(student, pairs), call_dpo_loss(student, moved)
    names = ("dpo_loss", "d loss / d policy_chosen_logp", "d loss / d policy_rejected_logp")
    for name, got, want in zip(names, after, before, strict=True):
        expect_close(
            got,
            want,
            f"{name} after moving each response's policy and reference log-probs together",
            *SELF_TOLERANCE,
            moved.describe,
            "expected the value before the move: the margin uses only pc - rc and pr - rr "
            "(forgetting the reference model breaks this)",
        )


def test_policy_equal_to_reference_gives_log_2(student):
    """With the policy equal to the reference (m = 0), the loss is log 2, gradients -+beta / 2B.

    That is the first step of every training run: each pair's gradient is -beta / (2B) on the
    chosen log-prob and +beta / (2B) on the rejected one."""
    pairs = make_pairs(63, B=4, beta=0.1, name="policy = reference")
    pairs = Pairs(
        pairs.ref_chosen.clone(), pairs.ref_rejected.clone(), *pairs.tensors()[2:], 0.1, pairs.name
    )
    loss, chosen, rejected = call_dpo_loss(student, pairs)
    context, (rtol, atol) = pairs.describe, tolerance(F64)
    expect_close(loss, torch.tensor(math.log(2), dtype=F64), "dpo_loss", rtol, atol, context)
    weight = torch.full((4,), 0.1 / (2 * 4), dtype=F64)
    advice = (
        "at m = 0 the gradient is -beta * sigmoid(0) / B = -beta / (2B); a stable form built "
        "from relu(-m) or clamp(-m, min=0) with |m| has the wrong derivative at exactly 0, "
        "so the very first update of a training run would be wrong"
    )
    expect_close(chosen, -weight, "d loss / d policy_chosen_logp", rtol, atol, context, advice)
    expect_close(rejected, weight, "d loss / d policy_rejected_logp", rtol, atol, context, advice)


def huge_margin_pairs() -> Pairs:
    name = f"float32, margins {list(HUGE_MARGINS)}, beta 1"
    return pairs_with_margins(HUGE_MARGINS, beta=1.0, name=name, dtype=torch.float32)


def test_large_margins_value(student):
    """With margins up to |m| = 1e4 in float32, the loss is finite and has its exact value."""
    pairs = huge_margin_pairs()
    loss, _, _ = call_dpo_loss(student, pairs)
    if not finite(loss):
        fail(f"dpo_loss came out {float(loss)}; {STABLE_ADVICE}; {pairs.describe()}")
    rtol, atol = tolerance(torch.float32)
    expect_close(loss, expected_loss(pairs), "dpo_loss", rtol, atol, pairs.describe, STABLE_ADVICE)


def test_large_margins_gradient(student):
    """With margins up to |m| = 1e4 in float32, the gradients are finite and exact.

    A badly ranked pair gets -+beta / B, a well ranked one 0."""
    pairs = huge_margin_pairs()
    _, chosen, rejected = call_dpo_loss(student, pairs)
    want_chosen, want_rejected = expected_grads(pairs)
    rtol, atol = tolerance(torch.float32)
    for name, got, want in (
        ("policy_chosen_logp", chosen, want_chosen),
        ("policy_rejected_logp", rejected, want_rejected),
    ):
        if not finite(got):
            fail(
                f"d loss / d {name} came out {show(got)}; expected finite values: "
                f"{STABLE_ADVICE}. torch.where(m > 0, a(m), b(m)) still sends NaN back from "
                f"the branch it did not select when that branch overflows; {pairs.describe()}"
            )
        expect_close(got, want, f"d loss / d {name}", rtol, atol, pairs.describe, STABLE_ADVICE)


@pytest.mark.hidden
def test_margin_sweep_matches_formula(student):
    """Margins 0 and +-1e-3 .. +-1e4 (every power of ten), betas 0.01 to 10, float64 and
    float32: the loss is the mean of log(1 + e^-m) and each pair's gradient -+beta *
    sigmoid(-m) / B.

    Every order of magnitude of the margin, on both sides, in one batch per beta and dtype."""
    for dtype in (F64, torch.float32):
        for beta in SWEEP_BETAS:
            name = f"margin sweep -1e4..1e4, beta {beta:g}, {dtype}"
            pairs = pairs_with_margins(
                SWEEP_MARGINS, beta=beta, name=name, dtype=dtype, hidden=True
            )
            loss, chosen, rejected = call_dpo_loss(student, pairs)
            want_chosen, want_rejected = expected_grads(pairs)
            rtol, atol = tolerance(dtype)
            for what, got, want in (
                ("dpo_loss", loss, expected_loss(pairs)),
                ("d loss / d policy_chosen_logp", chosen, want_chosen),
                ("d loss / d policy_rejected_logp", rejected, want_rejected),
            ):
                expect_close(got, want, what, rtol, atol, pairs.describe, hidden=True)


def test_empty_batch_gives_differentiable_zero(student):
    """With B = 0 pairs the loss is a zero Tensor of shape [] that backward() accepts."""
    empty = torch.zeros(0, dtype=torch.float32)
    chosen, rejected = leaf(empty), leaf(empty)
    loss = student.dpo_loss(chosen, rejected, empty.clone(), empty.clone())
    expect_tensor(
        loss, "dpo_loss on B = 0 pairs", (), why=", a zero Tensor of shape [] (not a Python number)"
    )
    expect(
        loss.requires_grad,
        "dpo_loss on B = 0 pairs returned a tensor without a gradient path to the policy's "
        "log-probs; a training loop calls loss.backward() on every batch, so build the zero "
        "from the inputs (a sum over no pairs is one), not torch.tensor(0.)",
    )
    value = float(loss.detach())
    expect(
        value == 0.0,
        f"dpo_loss on B = 0 pairs is {value}; expected 0 (the mean of no terms is NaN: divide "
        "the sum by max(B, 1))",
    )
    loss.backward()  # must not raise: the zero is part of an ordinary graph
