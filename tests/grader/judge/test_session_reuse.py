"""A judge keeps its collected pytest session from one grading to the next, and collects a
new one when a grading left state behind or the tiers were edited: no grading ever sees
another's."""

from __future__ import annotations

import time

import pytest
from judge_helpers import build_exercise

from grader.exercise import REPO_ROOT, find_exercise
from grader.judge import Grader
from grader.sandbox import Limits

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

TIERS = """
[[tier]]
id = "A"
title = "Contract"
description = "Shapes."
points = 10
visibility = "visible"
order = 1
"""

CONSTANT = """
import pytest
import torch

pytestmark = pytest.mark.tier("A")
SHAPES = ((2, 3), (1, 5))


def test_one_ratio_per_response(student):
    for b, n in SHAPES:
        logp = torch.zeros(b, n)
        assert student.sequence_ratio(logp, logp, torch.ones(b, n)).shape == (b,)
"""

STATEFUL = """
import pytest

pytestmark = pytest.mark.tier("A")
SEEN = []


def test_no_earlier_grading_is_seen():
    assert SEEN == [], f"a grading saw an earlier one's state: {SEEN}"
    SEEN.append("graded")
"""

REFERENCE = (REPO_ROOT / "reference" / "gspo.py").read_text(encoding="utf-8")
LIMITS = Limits(call_wall_seconds=30.0, grading_wall_seconds=120.0, cpu_seconds=120.0)


def test_a_session_is_kept_until_a_grading_changes_it_or_the_tiers_change(tmp_path, use_exercise):
    root = build_exercise(tmp_path / "exercise", TIERS, {"test_constant.py": CONSTANT})
    use_exercise(root)
    graded = []
    with Grader(pool_size=1, limits=LIMITS, warm=False, on_stats=lambda *g: graded.append(g)) as g:
        g.grade(REFERENCE)
        g.grade(REFERENCE)
        (root / "tests" / "tiers" / "test_stateful.py").write_text(STATEFUL, encoding="utf-8")
        g.grade(REFERENCE)
        g.grade(REFERENCE)
    for report, _ in graded:
        assert report.passed, [t.message for tier in report.tiers for t in tier.tests]
    tests = [sum(len(tier.tests) for tier in report.tiers) for report, _ in graded]
    assert tests == [1, 1, 2, 2]  # the edited tiers are graded at once
    # kept while only constants are read; new after the edit, and after SEEN grew
    assert [stats.sessions_collected for _, stats in graded] == [1, 0, 1, 1]


def test_a_grading_goes_to_the_judge_that_kept_its_exercises_session():
    """Two judges, two exercises: each grading finds the session of its exercise kept (taken
    in turn, the idle judges would collect again at almost every grading)."""
    sources = {"gspo": REFERENCE, "dpo": find_exercise("dpo").reference.read_text("utf-8")}
    order = ["gspo", "gspo", "dpo", "dpo", "gspo", "dpo", "gspo"]
    graded = []
    with Grader(pool_size=2, limits=LIMITS, warm=False, on_stats=lambda *g: graded.append(g)) as g:
        assert g.wait_ready(300), "the judges did not start"
        deadline = time.monotonic() + 300
        while g.stats()["ready"] < 2 and time.monotonic() < deadline:  # both, in a known order
            time.sleep(0.1)
        for exercise in order:
            g.grade(sources[exercise], exercise=exercise, tiers=["T0"])
    assert [report.exercise for report, _ in graded] == order
    assert all(report.passed for report, _ in graded)
    # one judge collected at start (the default exercise), the other for DPO; then never
    assert sum(stats.sessions_collected for _, stats in graded) == 2, [s for _, s in graded]
