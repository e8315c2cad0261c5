"""T3 Toy experiment: which pairs a DPO step pushes hardest, measured through the submission.

The toy (experiment.py) reads each pair's gradient weight back from the submission's
gradients on a sweep of implicit reward margins m from -8 to 8 (beta = 0.5), and runs three
pairs (m = -2, 0, +2) both as sequence log-probs and from token log-probs whose padding holds
-inf, NaN, 1e30 and +inf. Its result is recorded in the report before any check, so the
student sees the plot and the tables even when a check fails. Each test below asserts one of
the toy's named checks and explains it with the toy's numbers.
"""

from __future__ import annotations

import pytest
from _checks import fail

pytestmark = pytest.mark.tier("T3")


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


def number(value) -> str:
    """None stands for NaN or inf in the toy's JSON-ready result."""
    return "NaN/inf" if value is None else f"{value:.6g}"


def numbers(values) -> str:
    return "[" + ", ".join(map(number, values)) + "]"


def first_off(got: list, want: list, close) -> int | None:
    return next(
        (i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not close(g, w)), None
    )


def test_weight_is_sigmoid_of_minus_margin(toy, experiment):
    """Along the sweep, the weight read from d loss / d (chosen log-prob) is sigmoid(-m)."""
    toy = ran(toy)
    if toy["checks"]["weight_is_sigmoid"]:
        return
    sweep, want = toy["sweep"], toy["expected"]["weight"]
    for key, side in (("weight", "chosen"), ("rejected_weight", "rejected")):
        i = first_off(sweep[key], want, experiment.close)
        if i is not None:
            fail(
                f"at margin m = {sweep['margin'][i]:g}, the weight read from d loss / d "
                f"(the {side} log-prob) came out {number(sweep[key][i])}; expected "
                f"sigmoid(-m) = {want[i]:.6g} (the gradient of -log sigmoid(m) with respect to "
                f"the chosen log-prob is -beta * sigmoid(-m) / B; on the rejected one it is "
                "the opposite)"
            )
    fail("the sweep's weights do not follow sigmoid(-m)")


def test_pairs_ranked_wrong_weigh_most(toy):
    """Every pair's weight is positive and falls as the margin grows.

    The worse the implicit reward model ranks a pair, the harder the step pushes it."""
    toy = ran(toy)
    if not toy["checks"]["wrong_pairs_weigh_most"]:
        sweep = toy["sweep"]
        fail(
            f"along margins {sweep['margin'][0]:g} .. {sweep['margin'][-1]:g} the weights came "
            f"out {numbers(sweep['weight'])}; expected positive weights that fall from near 1 "
            "to near 0, as sigmoid(-m) does (a negative weight pushes the pair the wrong way)"
        )


def test_three_pairs(toy):
    """The three pairs (m = -2, 0, +2): the loss and each pair's gradients match the formula."""
    toy = ran(toy)
    if toy["checks"]["pair_gradients_match"] and toy["checks"]["loss_matches"]:
        return
    pairs, want = toy["pairs"], toy["expected"]
    fail(
        f"for the margins {numbers(pairs['margin'])} (beta = {toy['beta']:g}, B = 3) the loss "
        f"came out {number(pairs['loss'])}, d loss / d pc {numbers(pairs['grad_chosen'])} and "
        f"d loss / d pr {numbers(pairs['grad_rejected'])}; expected the loss "
        f"{want['loss']:.6g} = mean of log(1 + e^-m), d loss / d pc "
        f"{numbers(want['grad_chosen'])} = -beta * sigmoid(-m) / B and d loss / d pr "
        f"{numbers(want['grad_rejected'])}"
    )


def test_token_gradients_through_sequence_logp(toy, experiment):
    """Through sequence_logp, every valid token of a response gets its response's gradient.

    The three pairs are built from token log-probs and run through both functions."""
    toy = ran(toy)
    if toy["checks"]["token_gradients_match"] and toy["checks"]["token_loss_matches"]:
        return
    tokens, want = toy["tokens"], toy["expected"]
    for side in ("chosen", "rejected"):
        rows = zip(
            tokens[f"grad_{side}"], tokens[f"mask_{side}"], want[f"token_grad_{side}"], strict=True
        )
        for i, (row, m_row, want_row) in enumerate(rows):
            got = [g for g, m in zip(row, m_row, strict=True) if m]
            expected = [w for w, m in zip(want_row, m_row, strict=True) if m]
            if first_off(got, expected, experiment.close) is not None:
                fail(
                    f"the valid tokens of pair {i + 1}'s {side} response got gradients "
                    f"{numbers(got)}; expected {numbers(expected)}: the sequence log-prob is "
                    "a sum, so each of its tokens gets the response's d loss / d logp"
                )
    fail(
        f"the loss of the three pairs built from token log-probs came out "
        f"{number(tokens['loss'])}; expected {want['loss']:.6g}"
    )


def test_padding_gets_zero_gradient(toy):
    """Padded token positions (holding -inf, NaN, 1e30, +inf) get gradient exactly 0."""
    toy = ran(toy)
    if toy["checks"]["padding_zero_grad"]:
        return
    tokens = toy["tokens"]
    got = [
        g
        for side in ("chosen", "rejected")
        for row, m_row in zip(tokens[f"grad_{side}"], tokens[f"mask_{side}"], strict=True)
        for g, m in zip(row, m_row, strict=True)
        if not m
    ]
    fail(
        f"the gradient on the padded positions came out {numbers(got)}; expected exactly 0: "
        "keep padding out of the sum with torch.where or masked_fill"
    )
