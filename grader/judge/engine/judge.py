"""The judge's engine, run in a judge process: pytest sessions over the tier suites.

    judge = Judge(limits, pool)
    judge.rehearse(request)                # a first grading: its forecasts, while the pool starts
    report, stats = judge.grade(request)   # a GradingRequest -> its Report and GradingStats
    judge.prepare(request.exercise)        # keep the session, or collect the next one, while idle

Gradings run in a collected pytest session (pytest_session.py), kept from one grading to the
next of the same exercise while no grading changes what the next could see (tier_state.py);
a new session imports the tier modules afresh, only their compiled code is kept
(tiercode.py), and the exercise's reference and toy modules, which are trusted, are loaded
once (runtime.py). Student code never runs here: the `student` fixture talks to a sandboxed
worker (a rehearsal's, to a thread serving the exercise's reference: rehearsal.py).
"""

from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path

from grader.exercise import Exercise, find_exercise
from grader.judge.engine import rehearsal
from grader.judge.engine.ledger import TestRecord
from grader.judge.engine.pytest_session import CollectedSession
from grader.judge.engine.runtime import ExerciseRuntime
from grader.judge.failures import failed_report, grader_error
from grader.judge.link import GradingRequest
from grader.judge.registry import TierRegistryError
from grader.judge.stats import GradingStats
from grader.report import Report
from grader.sandbox import Limits

log = logging.getLogger(__name__)


class Judge:
    """Grades requests in this (trusted) process, one at a time, for any exercise."""

    def __init__(self, limits: Limits, pool) -> None:
        self.limits, self.pool = limits, pool
        self._runtimes: dict[Path, ExerciseRuntime] = {}
        self._prepared: CollectedSession | None = None
        self._seen: set[tuple[Path, str]] = set()  # (exercise root, mode) graded or rehearsed

    def grade(self, request: GradingRequest) -> tuple[Report, GradingStats]:
        """The Report of one request, and its stats (an unknown exercise: ExerciseError)."""
        exercise = find_exercise(request.exercise)
        self._seen.add((exercise.root, request.mode))
        try:
            self._prepare(exercise)
        except Exception as error:  # tiers.toml, the reference or the toy is broken
            problem = grader_error("the exercise could not be loaded", [f"{error}"])
            report = failed_report(exercise, request.mode, request.wanted, request.name,
                                   grader_error=problem)  # fmt: skip
            return report, GradingStats()
        prepared = self._prepared
        try:
            return prepared.grade(request)
        finally:
            if not prepared.reusable:  # the next grading collects a new session
                self.close()

    def rehearse(self, request: GradingRequest) -> int:
        """Before this judge's first grading of an exercise in a mode, and only while no
        sandboxed worker is ready: grade the exercise's reference in this process, so that
        `request`'s tests have forecasts (rehearsal.py). The number of tests that passed (0:
        no rehearsal)."""
        exercise = find_exercise(request.exercise)
        key = (exercise.root, request.mode)
        if key in self._seen or self.pool is None or self.pool.has_idle():
            return 0
        self._seen.add(key)
        self.close()  # the session collected ahead: one pytest session at a time
        try:
            runtime = self._runtime(exercise)
            return rehearsal.rehearse(runtime, self.limits, request, stop=self.pool.has_idle)
        except Exception:  # grade() meets a broken exercise again and reports it
            log.exception("the rehearsal of %s failed; grading without it", exercise.id)
            return 0

    def prepare(self, exercise_id: str | None) -> None:
        """Have a session for this exercise's next grading, collected now (while nobody
        waits) unless the last grading left one to reuse."""
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
        self._prepared = CollectedSession.collect(self._runtime(exercise), self.limits, self.pool)

    def _runtime(self, exercise: Exercise) -> ExerciseRuntime:
        runtime = self._runtimes.get(exercise.root) or ExerciseRuntime.load(exercise)
        self._runtimes[exercise.root] = runtime
        return runtime


def inventory(exercise: Exercise) -> list[TestRecord]:
    """Collect the tier suites without running a test: every test, bound to its tier.
    TierRegistryError names a broken suite (a file that does not import, a test without a
    tier) before any student is graded against it."""
    runtime = ExerciseRuntime.load(exercise)
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        prepared = CollectedSession.collect(runtime, Limits(), pool=None)
        ledger = prepared.tests
        problems, records = ledger.problems, list(ledger.records.values())
        prepared.discard()
    if problems:
        raise TierRegistryError("\n".join(problems))
    return records
