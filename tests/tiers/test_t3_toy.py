"""T3 Toy experiment: the statement's three-response diagnostic, run through the submission.

Row 0 (A=+1) has token ratios [2, 0.5]: geometric mean 1, so both tokens get the same
gradient. Row 1 (A=+1) has ratio 1.5, above 1+eps: clipped, no gradient. Row 2 (A=-1) has
ratio 0.5, below 1-eps: clipped, no gradient. Padded cells hold extreme values and must get
gradient 0. The toy's result is recorded in the report before any check, so the student sees
the ratios, gradient matrix and curves even when a check fails.
"""

from __future__ import annotations

import math

import pytest
from _checks import difference, fail

pytestmark = pytest.mark.tier("T3")

WANT_RATIOS = (1.0, 1.5, 0.5)
TOL = 1e-6


@pytest.fixture(scope="module")
def toy_run(student, experiment):
    """run_toy(student) once for the whole tier: (result, None) or (None, why it could not run).

    A wrong kind of result (a float, a wrong shape) makes the toy raise TypeError/ValueError;
    that is kept as a message so each test fails with it, instead of erroring in setup. The
    student's own exceptions (StudentError) propagate to the judge unchanged.
    """
    try:
        return experiment.run_toy(student), None
    except (TypeError, ValueError) as error:
        return None, f"the toy could not use your functions' results: {error}"


@pytest.fixture
def toy(toy_run, record_artifacts) -> tuple[dict | None, str | None]:
    """The toy's run, recorded in the report before the test checks anything."""
    result, _ = toy_run
    if result is not None:
        record_artifacts(result)
    return toy_run


def ran(toy: tuple[dict | None, str | None]) -> dict:
    """The toy's result, or a failure (in the test, not its setup) saying why it did not run."""
    result, problem = toy
    if result is None:
        fail(problem or "the toy produced no result")
    return result


def close(value, target: float) -> bool:
    return (
        value is not None
        and math.isfinite(value)
        and abs(value - target) <= TOL * (1 + abs(target))
    )


def cells(result: dict, row: int, valid: bool) -> list:
    """Gradient cells of one row: its valid tokens, or its padded positions."""
    pairs = zip(result["grad_matrix"][row], result["mask"][row], strict=True)
    return [g for g, m in pairs if bool(m) == valid]


def text(values) -> str:
    """None stands for NaN or inf in the toy's JSON-ready result."""
    return "[" + ", ".join("NaN/inf" if v is None else f"{v:.6g}" for v in values) + "]"


def gap(values, targets, what: str) -> str:
    """`what` [i] came out X; expected Y (differs by ...): the first value off its target."""
    for index, (value, target) in enumerate(zip(values, targets, strict=True)):
        if not close(value, target):
            got = float("nan") if value is None else value
            return f"{what} [{index}] {difference(got, target, TOL, TOL)}"
    return f"{what} came out {text(values)}"


def test_toy_ratios(toy):
    """The three sequence ratios come out 1, 1.5 and 0.5."""
    toy = ran(toy)
    got = toy["ratios"]
    if not all(close(g, w) for g, w in zip(got, WANT_RATIOS, strict=True)):
        fail(
            f"{gap(got, WANT_RATIOS, 'the toy ratio')}; all three came out {text(got)}: "
            "expected [1, 1.5, 0.5], the geometric means of the token ratios [2, 0.5], "
            "[1.5, 2.25, 1] and [0.25, 0.5, 0.5, 1]"
        )


def test_row0_equal_gradients(toy):
    """Row 0 (token ratios [2, 0.5], ratio 1): both valid tokens get the same gradient -1/6."""
    toy = ran(toy)
    got = cells(toy, 0, valid=True)
    want = -1.0 / 6.0  # -s*A/(B*T) = -1*1/(3*2)
    if not all(close(g, want) for g in got):
        fail(
            f"{gap(got, [want] * len(got), 'the gradient of row 0, token')}: one ratio s=1 for "
            "the whole response, so both valid tokens share the weight -s*A/(B*T) = -1/6"
        )


def test_row1_positive_advantage_clipped(toy):
    """Row 1 (A=+1, ratio 1.5 > 1+eps) is clipped: zero gradient on all its tokens."""
    toy = ran(toy)
    got = cells(toy, 1, valid=True)
    if not all(close(g, 0.0) for g in got):
        fail(
            f"{gap(got, [0.0] * len(got), 'the gradient of row 1, token')}; expected zeros: "
            "with A > 0 and s = 1.5 > 1 + 0.2 the clipped branch (a constant) is the smaller term"
        )


def test_row2_negative_advantage_clipped(toy):
    """Row 2 (A=-1, ratio 0.5 < 1-eps) is clipped: zero gradient on all its tokens."""
    toy = ran(toy)
    got = cells(toy, 2, valid=True)
    if not all(close(g, 0.0) for g in got):
        fail(
            f"{gap(got, [0.0] * len(got), 'the gradient of row 2, token')}; expected zeros: "
            "with A < 0 and s = 0.5 < 1 - 0.2 the clipped branch (a constant) is the smaller term"
        )


def test_padding_gets_zero_gradient(toy):
    """Padded cells (holding -inf, inf, 1e30 and NaN) get gradient exactly 0."""
    toy = ran(toy)
    got = [g for row in range(len(toy["mask"])) for g in cells(toy, row, valid=False)]
    wrong = [g for g in got if g != 0.0]
    if wrong:
        first = float("nan") if wrong[0] is None else wrong[0]
        fail(
            f"the gradient of a padded cell {difference(first, 0.0, 0, 0)}; all padded cells "
            f"came out {text(got)}: keep padding out of the arithmetic with torch.where or "
            "masked_fill"
        )


def test_toy_loss(toy):
    """The toy's loss is minus the mean of min(s*A, clip(s)*A): -(1 + 1.2 - 0.8) / 3."""
    toy = ran(toy)
    want = -(1.0 + 1.2 - 0.8) / 3
    if not close(toy["loss"], want):
        got = float("nan") if toy["loss"] is None else toy["loss"]
        fail(
            f"the toy's loss {difference(got, want, TOL, TOL)}; it is -(1 + 1.2 - 0.8) / 3: "
            "row 1 keeps clip(1.5) * 1 = 1.2, row 2 keeps clip(0.5) * (-1) = -0.8"
        )


def test_sweep_curves_follow_clipped_surrogate(toy):
    """Sweeping one response's ratio traces min(sA, clip(s)A) and its slope, for A = +1 and -1."""
    toy = ran(toy)
    expected = toy["expected"]["curves"]
    for name in ("objective_pos", "objective_neg", "derivative_pos", "derivative_neg"):
        got, want = toy["curves"][name], expected[name]
        bad = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not close(g, w)]
        if bad:
            x = toy["curves"]["x"][bad[0]]
            value = got[bad[0]]
            fail(
                f"the sweep curve {name} at log s = {x:.3g} "
                f"{difference(float('nan') if value is None else value, want[bad[0]], TOL, TOL)} "
                f"({len(bad)} of {len(got)} points off)"
            )
