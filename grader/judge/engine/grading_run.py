"""One grading run: the request, its tests, its student, its clock, and its Report.

A GradingRun lives for one run of a collected pytest session (pytest_session.py). Its tests
are in a TestLedger (ledger.py: a fresh copy of the session's, bound while pytest collected;
selected once the request is known, given their verdicts while they run); its submission
is a StudentSession (student_session.py, opened on first use), told where each test begins
and ends: a test begins with its forecast, and a test that passed leaves its calls as the
forecast of its next run. The run adds the grading's wall clock and, at the end, folds
everything into the Report, once, and the GradingStats beside it.

The grading passes when every tier passed and there is neither a submission nor a grader
error.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from grader.exercise import Exercise
from grader.judge.engine.ledger import TestLedger
from grader.judge.engine.recording import RecordingStudent
from grader.judge.engine.reference_memo import RememberedReference
from grader.judge.engine.student_session import StudentSession, load_error_message
from grader.judge.engine.verdicts import TestVerdict, shorten
from grader.judge.link import GradingRequest
from grader.judge.stats import GradingStats
from grader.report import Artifacts, GraderError, Report, SubmissionError, Timings
from grader.sandbox import Limits
from grader.sandbox.remote import Forecasts

log = logging.getLogger(__name__)


@dataclass
class Trusted:
    """The exercise's trusted modules, loaded once per judge process."""

    reference: RememberedReference  # the module, its declared functions remembered
    experiment: ModuleType


class GradingRun:
    """One grading of one exercise; see the module docstring for its life."""

    def __init__(
        self,
        exercise: Exercise,
        tests: TestLedger,
        trusted: Trusted,
        limits: Limits,
        pool: Any,
        forecasts: Forecasts,
        stop: Callable[[], bool] | None = None,
        collect_cpu_s: float | None = None,
    ) -> None:
        self.exercise, self.trusted, self.limits = exercise, trusted, limits
        self.forecasts = forecasts  # shared by the gradings of one exercise in this judge
        self.stop = stop  # asked before each test: True leaves the rest not run (rehearsal.py)
        self.tests = tests
        self.sandbox = StudentSession(exercise, limits, pool)
        self.request: GradingRequest | None = None
        # CPU the judge spent collecting the session for this grading (None: it ran in a
        # session an earlier grading had collected)
        self.collect_cpu_s = collect_cpu_s
        self._started = self._deadline = self._cpu_started = 0.0
        self._timed_out = False
        self._toy: dict | None = None
        self._following: dict[str, str] = {}  # node id -> the selected test that runs next

    def select(self, request: GradingRequest, items: list) -> tuple[list, list]:
        """Start the grading of `request`: (tests it runs, tests it leaves out)."""
        self.request = request
        self._started, self._cpu_started = time.perf_counter(), time.process_time()
        self._deadline = self._started + self.limits.grading_wall_seconds
        keep, drop = self.tests.select(request, items)
        self._following = {item.nodeid: then.nodeid for item, then in itertools.pairwise(keep)}
        return keep, drop

    def begin(self, nodeid: str) -> bool:
        """A test starts; False when the grading is out of time, or told to stop (the test
        is not run)."""
        if self.stop is not None and self.stop():
            self.verdict(nodeid, TestVerdict("skipped", "Not run: the grading was stopped."))
            return False
        if time.perf_counter() <= self._deadline:
            record = self.tests.records.get(nodeid)
            self.sandbox.watch(nodeid if record is not None and not record.hidden else None)
            key, following = self._forecast_key(nodeid), self._following.get(nodeid)
            then = None  # the next test of this request (same mode), where this one leads
            if following is not None and self.forecasts.leads(key):
                then = self.forecasts.get(self._forecast_key(following))
            self.sandbox.begin_test(self.forecasts.get(key), then)
            return True
        self._timed_out = True
        limit = self.limits.grading_wall_seconds
        message = f"Not run: the grading hit its {limit:g} s limit."
        self.verdict(nodeid, TestVerdict("failed", message))
        return False

    def end(self, nodeid: str) -> None:
        """A test ran (setup, call, teardown): if it passed, its calls are its forecast."""
        calls = self.sandbox.end_test()
        record = self.tests.records.get(nodeid)
        if calls and record is not None and record.outcome == "passed":
            self.forecasts.keep(self._forecast_key(nodeid), calls, self.sandbox.test_round_trips)

    def _forecast_key(self, nodeid: str) -> tuple:
        """Whose forecast a test gets: the same test in the same mode (a hidden test runs on
        Submit only, and a Run's tests never receive calls recorded on a Submit)."""
        return (self.request.mode, nodeid)

    def verdict(self, nodeid: str, verdict: TestVerdict, duration_s: float = 0.0) -> None:
        self.tests.record(nodeid, verdict, duration_s, self.sandbox.last_call(nodeid))

    def student(self) -> RecordingStudent:
        """The sandboxed submission, opened once per grading on first use."""
        return self.sandbox.student(self.request)

    def record_artifacts(self, result: dict) -> None:
        """T3 hands over the toy's result (run_toy through the student)."""
        self._toy = dict(result)

    def report(self) -> tuple[Report, GradingStats]:
        """Close the sandbox and fold everything into the Report, and the stats beside it."""
        output, truncated = self.sandbox.close()
        proxy = self.sandbox.proxy
        tiers = self.tests.results()
        submission_error, grader_error = self._submission_error(), self._grader_error()
        records = list(self.tests.records.values())
        report = Report(
            exercise=self.exercise.id,
            mode=self.request.mode,
            submission=self.request.name,
            passed=bool(tiers) and all(t.passed for t in tiers) and not submission_error
            and not grader_error,
            score=sum(t.score for t in tiers),
            max_score=sum(t.max_score for t in tiers),
            tiers=tiers,
            submission_error=submission_error,
            grader_error=grader_error,
            artifacts=self._artifacts(),
            output=output,
            output_truncated=truncated,
            isolation=proxy.isolation if proxy is not None else "",
            timings=Timings(
                total_s=round(time.perf_counter() - self._started, 4),
                sandbox_start_s=round(self.sandbox.start_s, 4),
                tests_s=round(sum(r.duration_s for r in records), 4),
            ),
        )  # fmt: skip
        return report, self._stats(proxy, len(records))

    def _stats(self, proxy: Any, tests: int) -> GradingStats:
        judge_cpu = time.process_time() - self._cpu_started + (self.collect_cpu_s or 0.0)
        collected = int(self.collect_cpu_s is not None)
        if proxy is None:
            return GradingStats(judge_cpu_seconds=round(judge_cpu, 4), tier_tests=tests,
                                sessions_collected=collected)  # fmt: skip
        return GradingStats(
            judge_cpu_seconds=round(judge_cpu, 4),
            sessions_collected=collected,
            worker_cpu_seconds=round(proxy.worker_cpu_s, 4),
            student_calls=self.sandbox.calls,
            calls_sent_ahead=proxy.ahead.sent,
            calls_answered_ahead=proxy.ahead.answered,
            requests=proxy.requests,
            round_trips=proxy.round_trips,
            sandbox_restarts=proxy.restarts,
            tier_tests=tests,
        )

    def _submission_error(self) -> SubmissionError | None:
        proxy = self.sandbox.proxy
        if proxy is not None and proxy.load_error is not None:
            error = proxy.load_error
            message = load_error_message(error)
            return SubmissionError(kind=error.kind, message=message, line=error.line,
                                   detail=error.detail or "")  # fmt: skip
        if self._timed_out:
            limit = self.limits.grading_wall_seconds
            return SubmissionError(
                kind="timeout",
                message=f"The grading took longer than {limit:g} s; the remaining tests were "
                "not run. Look for a loop that never ends.",
            )
        event = self.tests.student_event
        if event is None:
            return None
        return SubmissionError(kind=event.kind, message=shorten(str(event)), line=event.line)

    def _grader_error(self) -> GraderError | None:
        problems = self.tests.problems + self.tests.grader_problems
        if not problems:
            return None
        return GraderError(
            message=f"{len(problems)} problem(s) in the grader, not in your code, kept tests "
            "from being judged. Please tell your instructor.",
            detail="\n".join(problems[:10])[-4000:],
        )

    def _artifacts(self) -> Artifacts | None:
        """The toy's result, with the tables and plots its exercise declares."""
        if self._toy is None:
            return None
        try:
            return Artifacts.of_toy(self.exercise, self._toy)
        except (TypeError, ValueError) as error:  # the exercise's toy broke its own contract
            log.warning("toy result of %s not stored: %s", self.exercise.id, error)
            return None
