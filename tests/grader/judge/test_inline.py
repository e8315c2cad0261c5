"""One in-process grading run: a run may start before its submission is known."""

from __future__ import annotations

import sys

from grader.exercise import default_exercise
from grader.judge.inline import run_grading
from grader.judge.tiercode import TierCode


def test_a_waiting_run_collects_first_and_a_stop_leaves_nothing_behind():
    """The function is asked once the tier modules are collected; None stops the run."""
    seen = []

    def next_submission():
        seen.append("test_t0_contract" in sys.modules)
        return None

    assert run_grading(next_submission, default_exercise()) is None
    assert seen == [True]
    assert "test_t0_contract" not in sys.modules and "_checks" not in sys.modules
    assert not any(isinstance(finder, TierCode) for finder in sys.meta_path)
