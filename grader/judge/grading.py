"""What one grading is: the request, the tier tests it runs, their verdicts, and its Report.

A Grading lives for one pytest session (pytest_run.PreparedRun). While pytest collects, it
binds each test to its tier (`bind`); once the request is known, it keeps the tests that
mode and tier list select (`select`); while the tests run, the plugin hands it each test's
verdict; at the end it builds the Report, once (`report`).

Scoring: a tier scores points * passed / graded, where graded counts the tier's selected
tests that were not skipped. A tier passes when none of its tests failed or errored. The
grading passes when every tier passed and there is neither a submission nor a grader error.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from grader.exercise import Exercise
from grader.judge.link import GradingRequest
from grader.judge.recording import RecordedCall, RecordingStudent
from grader.judge.reference_memo import RememberedReference
from grader.judge.registry import Tier, runs
from grader.judge.verdicts import (
    GraderFault,
    SubmissionNotLoaded,
    Verdict,
    hit_a_limit,
    shorten,
)
from grader.report import (
    Artifacts,
    GraderError,
    Report,
    SubmissionError,
    TestResult,
    TierResult,
    Timings,
)
from grader.sandbox import Limits, open_student
from grader.sandbox.forecast import Forecast

log = logging.getLogger(__name__)

FORECASTS_KEPT = 8  # selections of tests (mode, tiers) whose last calls a judge remembers


@dataclass
class TestRecord:
    """What the judge learnt about one tier test."""

    __test__ = False  # not a pytest test class

    tier: Tier
    id: str  # node id relative to the tiers folder
    name: str
    hidden: bool  # the test or its whole tier is Submit-only
    outcome: str = "passed"
    message: str = ""
    inputs: str | None = None
    duration_s: float = 0.0
    same_as: tuple | None = None  # the identity of the student error it failed with


@dataclass
class Trusted:
    """The exercise's trusted modules, loaded once per judge process."""

    reference: RememberedReference  # the module, its declared functions remembered
    experiment: ModuleType


@dataclass
class Grading:
    """One grading of one exercise; see the module docstring for its life."""

    exercise: Exercise
    tiers: list[Tier]
    trusted: Trusted
    limits: Limits
    pool: Any  # a grader.sandbox.WorkerPool
    records: dict[str, TestRecord] = field(default_factory=dict)  # pytest node id -> record
    problems: list[str] = field(default_factory=list)  # collection errors: the grader's
    request: GradingRequest | None = None
    collect_cpu_s: float = 0.0  # CPU the judge spent collecting the session ahead
    # the calls of the last fully passed grading of each selection of tests, shared by the
    # gradings of one exercise in this judge process (sandbox/forecast.py)
    forecasts: dict[tuple, Forecast] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._proxy: Any = None
        self._student: RecordingStudent | None = None
        self._open_error: str | None = None
        self._current: str | None = None
        self._started = self._deadline = self._cpu_started = 0.0
        self._sandbox_start_s = 0.0
        self._student_event: BaseException | None = None
        self._timed_out = False
        self._calls = 0
        self._last_call: dict[str, RecordedCall] = {}  # node id -> its last student call
        self._toy: dict | None = None
        self._grader_problems: list[str] = []

    # ---- collection --------------------------------------------------------------------
    def bind(self, items: list[pytest.Item]) -> None:
        """Bind every collected test to its declared tier; pytest.UsageError names a test
        without a tier marker or with an undeclared one (the instructor's mistake)."""
        declared = {tier.id: tier for tier in self.tiers}
        names = ", ".join(declared)
        for item in items:
            marker = item.get_closest_marker("tier")
            if marker is None or not marker.args:
                raise pytest.UsageError(
                    f"{item.nodeid}: no tier marker; add @pytest.mark.tier(...) with one of: "
                    f"{names}"
                )
            tier = declared.get(marker.args[0])
            if tier is None:
                raise pytest.UsageError(
                    f"{item.nodeid}: unknown tier {marker.args[0]!r} in @pytest.mark.tier; "
                    f"declared in tiers.toml: {names}"
                )
            hidden = tier.hidden or item.get_closest_marker("hidden") is not None
            test_id = _relative_id(item, self.exercise.tiers_dir)
            self.records[item.nodeid] = TestRecord(tier, test_id, _test_name(item), hidden)

    def unused_tiers(self) -> list[Tier]:
        used = {record.tier.id for record in self.records.values()}
        return [tier for tier in self.tiers if tier.id not in used]

    # ---- the request -------------------------------------------------------------------
    def select(
        self, request: GradingRequest, items: list[pytest.Item]
    ) -> tuple[list[pytest.Item], list[pytest.Item]]:
        """Start the grading of `request`: (tests it runs, tests it leaves out)."""
        self.request = request
        self._started, self._cpu_started = time.perf_counter(), time.process_time()
        self._deadline = self._started + self.limits.grading_wall_seconds
        keep, drop = [], []
        for item in items:
            record = self.records[item.nodeid]
            selected = runs(record.tier, record.hidden, request.mode, request.wanted)
            (keep if selected else drop).append(item)
        for item in drop:
            del self.records[item.nodeid]
        return keep, drop

    # ---- the tests ---------------------------------------------------------------------
    def begin(self, nodeid: str) -> bool:
        """A test starts; False when the grading is out of time (the test is not run)."""
        if time.perf_counter() <= self._deadline:
            self._current = nodeid
            return True
        self._timed_out = True
        limit = self.limits.grading_wall_seconds
        self.verdict(nodeid, Verdict("failed", f"Not run: the grading hit its {limit:g} s limit."))
        return False

    def verdict(self, nodeid: str, verdict: Verdict, duration_s: float = 0.0) -> None:
        """Record a phase's verdict; the first failure of a test is the one that counts."""
        record = self.records.get(nodeid)
        if record is None:
            return
        record.duration_s += duration_s
        if verdict.outcome == "passed" or record.outcome != "passed":
            return
        record.outcome, record.message = verdict.outcome, verdict.message
        record.same_as = verdict.same_as
        if verdict.blame == "grader":
            self._grader_problems.append(f"{record.id}: {verdict.message}")
        if hit_a_limit(verdict.student_error) and self._student_event is None:
            self._student_event = verdict.student_error
        call = self._last_call.get(nodeid)
        if verdict.outcome in ("failed", "error") and not record.hidden and call is not None:
            record.inputs = call.describe()

    def record_artifacts(self, result: dict) -> None:
        """T3 hands over the toy's result (run_toy through the student)."""
        self._toy = dict(result)

    # ---- the student -------------------------------------------------------------------
    def student(self) -> RecordingStudent:
        """The sandboxed submission, opened once per grading on first use."""
        if self._open_error is not None:
            raise GraderFault(self._open_error)
        if self._proxy is None:
            self._open()
        if self._proxy.load_error is not None:
            raise SubmissionNotLoaded(load_error_message(self._proxy.load_error))
        return self._student

    def _open(self) -> None:
        start = time.perf_counter()
        request = self.request
        try:
            self._proxy = self._stack.enter_context(
                open_student(
                    request.source,
                    functions=self.exercise.function_names,
                    filename=request.filename,
                    limits=self.limits,
                    pool=self.pool,
                    forecast=self.forecasts.get(self._selection()),
                )
            )
        except Exception as error:  # the sandbox failed to start: never the student's fault
            self._open_error = f"the sandbox could not start: {type(error).__name__}: {error}"
            raise GraderFault(self._open_error) from error
        finally:
            self._sandbox_start_s = time.perf_counter() - start
        names = self.exercise.function_names
        self._student = RecordingStudent(self._proxy, names, self._on_call, request.source)

    def _on_call(self, name: str, args: tuple, kwargs: dict) -> None:
        """Count the call; keep its inputs for a visible test (a hidden one never shows them)."""
        self._calls += 1
        record = self.records.get(self._current) if self._current is not None else None
        if record is not None and not record.hidden:
            self._last_call[self._current] = RecordedCall(name, args, kwargs)

    # ---- the report --------------------------------------------------------------------
    def report(self) -> Report:
        """Close the sandbox and fold everything into the Report."""
        with contextlib.suppress(Exception):
            self._stack.close()  # the worker ends; what it printed stays readable
        output, truncated, isolation, restarts, worker_cpu, trips = "", False, "", 0, 0.0, 0
        sent_ahead = answered_ahead = 0
        if self._proxy is not None:
            with contextlib.suppress(Exception):
                output, truncated = self._proxy.output()
            isolation, restarts = self._proxy.isolation, self._proxy.restarts
            worker_cpu, trips = self._proxy.worker_cpu_s, self._proxy.requests
            sent_ahead = self._proxy.calls_sent_ahead
            answered_ahead = self._proxy.calls_answered_ahead
        tiers = tier_results(self.tiers, list(self.records.values()))
        submission_error, grader_error = self._submission_error(), self._grader_error()
        records = list(self.records.values())
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
            metrics={
                "tests_total": float(len(records)),
                "tests_passed": float(sum(r.outcome == "passed" for r in records)),
                "student_calls": float(self._calls),
                "round_trips": float(trips),
                "calls_sent_ahead": float(sent_ahead),
                "calls_answered_ahead": float(answered_ahead),
                "sandbox_restarts": float(restarts),
                "judge_cpu_s": round(self._judge_cpu_s(), 4),
                "worker_cpu_s": round(worker_cpu, 4),
            },
            artifacts=self._artifacts(),
            output=output,
            output_truncated=truncated,
            isolation=isolation,
            timings=Timings(
                total_s=round(time.perf_counter() - self._started, 4),
                sandbox_start_s=round(self._sandbox_start_s, 4),
                tests_s=round(sum(r.duration_s for r in records), 4),
            ),
        )  # fmt: skip
        self._keep_forecast(report)
        return report

    def _selection(self) -> tuple:
        """Which tests this grading runs: gradings that run the same ones make the same calls."""
        return (self.request.mode, tuple(self.records))

    def _keep_forecast(self, report: Report) -> None:
        """After a grading that passed every test without a restart, its calls become the
        forecast of the next grading of the same tests (only passing gradings: the inputs a
        test derives from the student's results are then the reference's, near enough)."""
        if not report.passed or self._proxy is None or self._proxy.restarts:
            return
        forecast = self._proxy.script.forecast()
        if forecast is None:
            return
        key = self._selection()
        if key not in self.forecasts and len(self.forecasts) >= FORECASTS_KEPT:
            del self.forecasts[next(iter(self.forecasts))]
        self.forecasts[key] = forecast

    def _judge_cpu_s(self) -> float:
        """CPU this process spent on the grading, collecting its session ahead included."""
        return time.process_time() - self._cpu_started + self.collect_cpu_s

    def _submission_error(self) -> SubmissionError | None:
        if self._proxy is not None and self._proxy.load_error is not None:
            error = self._proxy.load_error
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
        event = self._student_event
        if event is None:
            return None
        return SubmissionError(kind=event.kind, message=shorten(str(event)), line=event.line)

    def _grader_error(self) -> GraderError | None:
        problems = self.problems + self._grader_problems
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


def tier_results(tiers: list[Tier], records: list[TestRecord]) -> list[TierResult]:
    """One scored result per tier that has selected tests, in the registry's order; a test
    that failed with the student error of an earlier one points to it (same_error_as)."""
    first_with: dict[tuple, str] = {}  # student error -> the first test that failed with it
    results = []
    for tier in tiers:
        mine = [record for record in records if record.tier.id == tier.id]
        if mine:
            tests = [_test_result(record, first_with) for record in mine]
            results.append(_tier_result(tier, mine, tests))
    return results


def _test_result(record: TestRecord, first_with: dict[tuple, str]) -> TestResult:
    same_as = None
    if record.outcome == "failed" and record.same_as is not None:
        same_as = first_with.setdefault(record.same_as, record.id)
        same_as = None if same_as == record.id else same_as
    visible_failure = not record.hidden and record.outcome in ("failed", "error")
    return TestResult(
        id=record.id,
        name=record.name,
        outcome=record.outcome,
        message="" if record.outcome == "passed" else record.message,
        hidden=record.hidden,
        inputs=record.inputs if visible_failure else None,
        duration_s=round(record.duration_s, 6),
        same_error_as=same_as,
    )


def _tier_result(tier: Tier, records: list[TestRecord], tests: list[TestResult]) -> TierResult:
    graded = [record for record in records if record.outcome != "skipped"]
    passed = [record for record in graded if record.outcome == "passed"]
    score = tier.points * len(passed) / len(graded) if graded else 0.0
    visibility = "hidden" if tier.hidden else "mixed" if any(r.hidden for r in records) else None
    return TierResult(
        id=tier.id,
        title=tier.title,
        description=tier.description,
        visibility=visibility or "visible",
        passed=len(passed) == len(graded),
        score=score,
        max_score=tier.points,
        tests=tests,
    )


def _relative_id(item: pytest.Item, tiers_dir: Path) -> str:
    """A node id that does not depend on where pytest's rootdir happens to be."""
    _, sep, rest = item.nodeid.partition("::")
    path = item.path
    where = path.relative_to(tiers_dir).as_posix() if path.is_relative_to(tiers_dir) else path.name
    return f"{where}{sep}{rest}"


def _test_name(item: pytest.Item) -> str:
    """The first docstring line of the test function, or its name; parameters in brackets."""
    function = getattr(item, "function", None)
    doc = (getattr(function, "__doc__", None) or "").strip()
    base = doc.splitlines()[0].strip() if doc else getattr(item, "originalname", item.name)
    callspec = getattr(item, "callspec", None)
    return f"{base} [{callspec.id}]" if callspec is not None else base


def load_error_message(error: Any) -> str:
    """The load error as the student should read it."""
    where = f" (line {error.line})" if getattr(error, "line", None) else ""
    message = str(error.message)
    return message if where.strip(" ()") in message else f"{message}{where}"
