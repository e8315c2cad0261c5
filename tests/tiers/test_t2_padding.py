"""T2 Math and gradient properties, part 2: padding never matters, in values or gradients.

Padded positions may hold anything a real pipeline leaves there: -inf (masked logits), +inf,
huge numbers, NaN. Each test compares the submission with itself on the same batch with
ordinary padding, so a failure here is about padding alone (T1 judges the formula).
"""

from __future__ import annotations

import pytest
import torch
from _checks import Batch, call_loss, call_ratio, expect_close, fail, make_batch, show

pytestmark = pytest.mark.tier("T2")

EXTREMES = (float("-inf"), float("inf"), 1e30, float("nan"))
PADDING_ADVICE = (
    "padding must be removed before the exponential and before any sum: use torch.where or "
    "masked_fill, not multiplication by the mask (0 * inf and 0 * nan are nan)"
)

NAN_GRADIENT_ADVICE = (
    "A nan gradient on padding means the padded values took part in some arithmetic before "
    "they were removed: backward then multiplies 0 by inf or nan (after exp, or a product with "
    "a 0 mask); remove padded positions with torch.where before anything else"
)


def padded_with(batch: Batch, value: float, target: str) -> Batch:
    """The batch with every padded position of `target` ("logp" or "old_logp") set to value."""
    filled = getattr(batch, target).masked_fill(~batch.valid, value)
    if target == "logp":
        return Batch(
            filled, batch.old_logp, batch.mask, batch.advantages, batch.clip_eps, batch.name
        )
    return Batch(batch.logp, filled, batch.mask, batch.advantages, batch.clip_eps, batch.name)


def student_clean(student, call, name: str, clean: Batch):
    """The student's own result on ordinary padding: the padding tests compare against it, so
    they test the padding alone (T1 judges the formula)."""
    got, grad = call(student, clean)
    if not (bool(torch.isfinite(got).all()) and bool(torch.isfinite(grad).all())):
        fail(
            f"{name} or its gradient is not finite even when padding holds ordinary values: "
            f"{show(got)}; fix that first (T1 and the tests above show where)"
        )
    return got, grad


def check_padding(
    name: str, where: str, got, grad, clean_got, clean_grad, valid, hidden: bool = False
) -> None:
    """Value finite and unchanged; gradient exactly 0 on padding and unchanged on valid tokens."""
    shown = "" if hidden else f" {show(got)}"
    if not bool(torch.isfinite(got).all()):
        fail(f"{where}, {name} came out non-finite{shown}; {PADDING_ADVICE}")
    expect_close(
        got,
        clean_got,
        f"{name} {where}",
        1e-9,
        1e-12,
        hint=PADDING_ADVICE,
        hidden=hidden,
        context="expected the value you return for ordinary padding",
    )
    padded = grad[~valid]
    expect_close(
        padded,
        torch.zeros_like(padded),
        f"d {name} / d logp on padded positions {where}",
        0,
        0,
        hint=lambda: NAN_GRADIENT_ADVICE if bool(padded.isnan().any()) else "",
        hidden=hidden,
    )
    expect_close(
        grad,
        clean_grad,
        f"d {name} / d logp {where}",
        1e-9,
        1e-12,
        hint=PADDING_ADVICE,
        hidden=hidden,
    )


def check_extremes(student, call, name: str, clean: Batch) -> None:
    clean_got, clean_grad = student_clean(student, call, name, clean)
    for target in ("logp", "old_logp"):
        for value in EXTREMES:
            got, grad = call(student, padded_with(clean, value, target))
            where = f"when the padded positions of {target} hold {value}"
            check_padding(name, where, got, grad, clean_got, clean_grad, clean.valid)


def test_padding_neutralized_in_ratio(student):
    """Padding holding -inf, +inf, 1e30 or NaN changes neither the ratio nor its gradient."""
    clean = make_batch(53, B=3, L=6, lengths=[6, 2, 4], spread=0.2, name="padded")
    check_extremes(student, call_ratio, "sequence_ratio", clean)


def test_padding_neutralized_in_loss(student):
    """Padding holding -inf, +inf, 1e30 or NaN changes neither the loss nor its gradient."""
    clean = make_batch(54, B=3, L=6, lengths=[6, 2, 4], spread=0.2, name="padded")
    check_extremes(student, call_loss, "gspo_loss", clean)


@pytest.mark.hidden
def test_padding_mixture_neutralized(student):
    """Padding holding a random mixture of extreme values in both inputs changes nothing."""
    clean = make_batch(
        55,
        B=6,
        L=9,
        lengths=[9, 1, 4, 7, 2, 5],
        spread=0.4,
        clip_eps=0.1,
        name="padding mixture",
        hidden=True,
    )
    g = torch.Generator().manual_seed(55)
    pool = torch.tensor(
        [float("-inf"), float("inf"), 1e30, -1e30, float("nan")], dtype=torch.float64
    )
    junk = pool[torch.randint(0, 5, (2, *clean.logp.shape), generator=g)]  # [2, B, L]
    dirty = Batch(
        torch.where(clean.valid, clean.logp, junk[0]),
        torch.where(clean.valid, clean.old_logp, junk[1]),
        clean.mask,
        clean.advantages,
        clean.clip_eps,
        clean.name,
        hidden=True,
    )
    for name, call in (("sequence_ratio", call_ratio), ("gspo_loss", call_loss)):
        clean_got, clean_grad = student_clean(student, call, name, clean)
        got, grad = call(student, dirty)
        where = "when the padding of logp and old_logp holds a mixture of extreme values"
        check_padding(name, where, got, grad, clean_got, clean_grad, clean.valid, hidden=True)
