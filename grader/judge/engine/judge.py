"""The judge's engine, run in a judge process: pytest sessions over the tier suites.

    judge = Judge(limits, pool)
    report, stats = judge.grade(request)   # a GradingRequest -> its Report and GradingStats
    judge.prepare(request.exercise)        # collect the next session ahead, while idle

Each grading is one pytest session (pytest_session.py). Every session imports the tier
modules afresh (nothing a module holds passes from one student's grading to the next); only
their compiled code is kept (tiercode.py), and the exercise's reference and toy modules,
which are trusted, are loaded once (runtime.py). Student code never runs here: the
`student` fixture talks to a sandboxed worker.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from grader.exercise import Exercise, find_exercise
from grader.judge.engine.ledger import TestRecord
from grader.judge.engine.pytest_session import PreparedRun
from grader.judge.engine.runtime import ExerciseRuntime
from grader.judge.failures import failed_report, grader_error
from grader.judge.link import GradingRequest
from grader.judge.registry import TierRegistryError
from grader.judge.stats import GradingStats
from grader.report import Report
from grader.sandbox import Limits


class Judge:
    """Grades requests in this (trusted) process, one at a time, for any exercise."""

    def __init__(self, limits: Limits, pool) -> None:
        self.limits, self.pool = limits, pool
        self._runtimes: dict[Path, ExerciseRuntime] = {}
        self._prepared: PreparedRun | None = None

    def grade(self, request: GradingRequest) -> tuple[Report, GradingStats]:
        """The Report of one request, and its stats (an unknown exercise: ExerciseError)."""
        exercise = find_exercise(request.exercise)
        try:
            self._prepare(exercise)
        except Exception as error:  # tiers.toml, the reference or the toy is broken
            problem = grader_error("the exercise could not be loaded", [f"{error}"])
            report = failed_report(exercise, request.mode, request.wanted, request.name,
                                   grader_error=problem)  # fmt: skip
            return report, GradingStats()
        prepared, self._prepared = self._prepared, None
        return prepared.grade(request)

    def prepare(self, exercise_id: str | None) -> None:
        """Collect the next session for this exercise now, while nobody waits."""
        with contextlib.suppress(Exception):  # grade() meets the same error and reports it
            self._prepare(find_exercise(exercise_id))

    def close(self) -> None:
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.discard()

    def _prepare(self, exercise: Exercise) -> None:
        if self._prepared is not None and self._prepared.runtime.exercise.root == exercise.root:
            return
        self.close()
        runtime = self._runtimes.get(exercise.root) or ExerciseRuntime.load(exercise)
        self._runtimes[exercise.root] = runtime
        self._prepared = PreparedRun.collect(runtime, self.limits, self.pool)


def inventory(exercise: Exercise) -> list[TestRecord]:
    """Collect the tier suites without running a test: every test, bound to its tier.
    TierRegistryError names a broken suite (a file that does not import, a test without a
    tier) before any student is graded against it."""
    runtime = ExerciseRuntime.load(exercise)
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        prepared = PreparedRun.collect(runtime, Limits(), pool=None)
        ledger = prepared.grading.tests
        problems, records = ledger.problems, list(ledger.records.values())
        prepared.discard()
    if problems:
        raise TierRegistryError("\n".join(problems))
    return records
