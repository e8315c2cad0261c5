"""A rehearsal: the exercise's reference graded in the judge while its first worker starts.

A judge sends each test's calls ahead from the test's forecast (grader/sandbox/remote/
forecast.py), the calls it made the last time it passed in this judge. A judge that has
graded nothing has no forecast: its first grading waits for the worker's reply to every
call, one round trip each (about 200 for GSPO's reference), and walks the judge's own code
paths for the first time. A cold CLI grading is always such a first grading, and its judge
is ready before the sandbox is: the zygote's imports (torch, then the lazy ones a meta
tensor pulls in, ~2 s) outlast the judge's (torch, pytest, collecting the tiers), which run
on the other core.

So, while no sandboxed worker is ready, the judge grades the exercise's reference (the file
the exercise names: trusted code, never the submission) with the same request's mode and
tiers, its calls served by a thread of this process (grader/sandbox/in_process.py). The tests
that pass leave their forecasts, as a first real grading would have; the report is thrown
away. The rehearsal stops before its next test once a worker waits (GradingRun.stop), so
it never holds up the grading it prepares for longer than one test. A forecast is only ever
used for a byte-equal call (forecast.py), so a rehearsal can cost time, never a verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from grader.judge.engine.pytest_session import CollectedSession
from grader.judge.engine.runtime import ExerciseRuntime
from grader.judge.link import GradingRequest
from grader.sandbox import Limits
from grader.sandbox.in_process import InProcessPool


def rehearse(
    runtime: ExerciseRuntime, limits: Limits, request: GradingRequest, stop: Callable[[], bool]
) -> int:
    """Grade the exercise's reference as `request` would be graded, until `stop()`; the
    number of tests that passed (each left its forecast). The caller holds no other pytest
    session: one at a time."""
    reference = runtime.exercise.reference
    rehearsal = dataclasses.replace(
        request, source=reference.read_text(encoding="utf-8"), filename=reference.name, name=None
    )
    prepared = CollectedSession.collect(runtime, limits, InProcessPool(limits), stop=stop)
    try:
        report, _ = prepared.grade(rehearsal)
    finally:
        prepared.discard()
    return sum(test.outcome == "passed" for tier in report.tiers for test in tier.tests)
