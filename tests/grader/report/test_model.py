"""A report's toy artifacts keep the toy's numbers as shown, so that correct solutions share
one set of plots (the plots are keyed by those numbers and cost more CPU than a grading)."""

from __future__ import annotations

import json
import math

import pytest

from grader.exercise import catalog, load_module
from grader.plots import experiment_module
from grader.report import Artifacts
from grader.store import artifacts_key


def _toy_of(exercise, path):
    implementation = load_module(path, f"toy_impl_{exercise.id}_{path.stem}")
    return experiment_module(exercise.experiment).run_toy(implementation)


@pytest.mark.parametrize("exercise_id", ["gspo", "dpo"])
def test_correct_solutions_whose_sums_differ_in_the_last_bits_share_one_plots_key(exercise_id):
    exercise = catalog()[exercise_id]
    correct = sorted((exercise.corpus / "correct").glob("*.py"))
    toys = [_toy_of(exercise, path) for path in [exercise.reference, *correct]]
    raw = {json.dumps(toy, sort_keys=True) for toy in toys}
    assert len(raw) > 1, "the corpus no longer has correct solutions that differ in float bits"
    keys = {artifacts_key(exercise.id, Artifacts.of_toy(exercise, toy).data) for toy in toys}
    assert len(keys) == 1


def test_what_a_plot_or_the_page_would_show_is_kept():
    gspo = catalog()["gspo"]
    toy = {
        "leak": [0.0, -0.0, 1e-7, -3e-300],  # a gradient leaking into padding is not zero
        "values": [0.12344999, 0.12345001, 1234.5678, 1.0000000000000002, 2.5e30],
        "odd": [None, math.inf, -math.inf, 3, True, "x"],
    }
    data = Artifacts.of_toy(gspo, toy).data
    assert data["leak"] == [0.0, 0.0, 1e-7, -3e-300]
    assert [math.copysign(1, v) for v in data["leak"][:2]] == [1.0, 1.0]  # no signed zero
    assert data["values"] == [0.12344999, 0.12345001, 1234.5678, 1.0, 2.5e30]
    assert data["odd"] == [None, math.inf, -math.inf, 3, True, "x"]
    assert isinstance(data["odd"][4], bool)
    assert math.isnan(Artifacts.of_toy(gspo, {"n": math.nan}).data["n"])
    shifted = Artifacts.of_toy(gspo, toy | {"leak": [0.0, 0.0, 2e-7, -3e-300]}).data
    assert artifacts_key("gspo", shifted) != artifacts_key("gspo", data)
