"""One grading as the judge sees it: the submission, the selected tests, their verdicts.

The plugin creates one JudgeSession per pytest session and feeds it pytest's events; the
session opens the sandboxed student lazily (the first test that asks for it), remembers each
test's verdict and last student call, and folds everything into a Report at the end.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from grader.exercise import Exercise, default_exercise
from grader.judge.binding import Binding
from grader.judge.recording import RecordedCall, RecordingStudent
from grader.judge.registry import Tier, load_tiers
from grader.judge.summary import TestRecord, tier_results
from grader.judge.verdicts import (
    GraderFault,
    SubmissionNotLoaded,
    Verdict,
    is_time_or_crash,
    shorten,
)
from grader.report import Artifacts, GraderError, Report, SubmissionError, Timings
from grader.sandbox import Limits, open_student


@dataclass
class Submission:
    """What to grade and how."""

    source: str
    filename: str = "submission.py"
    mode: str = "submit"
    tiers: list[str] | None = None  # None: every tier the mode allows
    limits: Limits | None = None
    pool: Any = None  # a grader.sandbox.WorkerPool, or None for a worker started on demand
    name: str | None = None  # shown as Report.submission


@dataclass
class JudgeSession:
    submission: Submission
    exercise: Exercise = field(default_factory=default_exercise)
    tiers: list[Tier] = field(default_factory=list)
    records: dict[str, TestRecord] = field(default_factory=dict)
    artifacts: dict | None = None
    warnings: list[str] = field(default_factory=list)
    grader_problems: list[str] = field(default_factory=list)
    calls: int = 0

    def __post_init__(self) -> None:
        self.started = time.perf_counter()
        limits = self.submission.limits or Limits()
        self.deadline = self.started + limits.grading_wall_seconds
        self.tiers = self.tiers or load_tiers(self.exercise.tiers_file)
        self._stack = contextlib.ExitStack()
        self._proxy: Any = None
        self._student: RecordingStudent | None = None
        self._open_error: str | None = None
        self._current: str | None = None
        self._sandbox_start_s = 0.0
        self._student_event: BaseException | None = None
        self._timed_out = False
        self._last_call: dict[str, RecordedCall] = {}  # node id -> its last student call

    # ---- tests -------------------------------------------------------------------------
    def add(self, nodeid: str, binding: Binding) -> None:
        self.records[nodeid] = TestRecord(
            tier_id=binding.tier.id, id=binding.id, name=binding.name, hidden=binding.hidden
        )

    def begin(self, nodeid: str) -> None:
        self._current = nodeid

    def out_of_time(self) -> bool:
        return time.perf_counter() > self.deadline

    def mark_not_run(self, nodeid: str) -> None:
        """The grading ran out of time before this test started."""
        self._timed_out = True
        limit = (self.submission.limits or Limits()).grading_wall_seconds
        self.verdict(nodeid, Verdict("failed", f"Not run: the grading hit its {limit:g} s limit."))

    def verdict(self, nodeid: str, verdict: Verdict, duration_s: float = 0.0) -> None:
        """Record a phase's verdict; the first failure of a test is the one that counts."""
        record = self.records.get(nodeid)
        if record is None:
            return
        record.duration_s += duration_s
        if verdict.outcome == "passed" or record.outcome != "passed":
            return
        record.outcome, record.message = verdict.outcome, verdict.message
        if verdict.blame == "grader":
            self.grader_problems.append(f"{record.id}: {verdict.message}")
        if is_time_or_crash(verdict.student_error) and self._student_event is None:
            self._student_event = verdict.student_error
        call = self._last_call.get(nodeid)
        if verdict.outcome in ("failed", "error") and not record.hidden and call is not None:
            record.inputs = call.describe()

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
        try:
            self._proxy = self._stack.enter_context(
                open_student(
                    self.submission.source,
                    filename=self.submission.filename,
                    functions=self.exercise.function_names,
                    limits=self.submission.limits,
                    pool=self.submission.pool,
                )
            )
        except Exception as error:  # the sandbox failed to start: never the student's fault
            self._open_error = f"the sandbox could not start: {type(error).__name__}: {error}"
            raise GraderFault(self._open_error) from error
        finally:
            self._sandbox_start_s = time.perf_counter() - start
        self._student = RecordingStudent(
            self._proxy, self.exercise.function_names, self._on_call, self.submission.source
        )

    def _on_call(self, name: str, args: tuple, kwargs: dict) -> None:
        """Count the call; keep its inputs for a visible test (a hidden one never shows them)."""
        self.calls += 1
        record = self.records.get(self._current) if self._current is not None else None
        if record is not None and not record.hidden:
            self._last_call[self._current] = RecordedCall(name, args, kwargs)

    # ---- the report --------------------------------------------------------------------
    def finish(self) -> Report:
        """Close the sandbox and fold everything into the Report."""
        output, truncated, isolation, restarts = "", False, "", 0
        if self._proxy is not None:
            with contextlib.suppress(Exception):
                output, truncated = self._proxy.output()
            isolation = str(getattr(self._proxy, "isolation", ""))
            restarts = int(getattr(self._proxy, "restarts", 0) or 0)
        with contextlib.suppress(Exception):
            self._stack.close()
        return self._report(output, truncated, isolation, restarts)

    def _report(self, output: str, truncated: bool, isolation: str, restarts: int) -> Report:
        records = list(self.records.values())
        tiers = tier_results(self.tiers, records)
        submission_error = self._submission_error()
        grader_error = self._grader_error()
        return Report(
            mode=self.submission.mode,
            submission=self.submission.name,
            passed=bool(tiers)
            and all(t.passed for t in tiers)
            and submission_error is None
            and grader_error is None,
            score=round(sum(t.score for t in tiers), 4),
            max_score=sum(t.max_score for t in tiers),
            tiers=tiers,
            submission_error=submission_error,
            grader_error=grader_error,
            metrics=self._metrics(records, restarts),
            artifacts=self._artifacts(),
            output=output,
            output_truncated=truncated,
            isolation=isolation,
            timings=Timings(
                total_s=round(time.perf_counter() - self.started, 4),
                sandbox_start_s=round(self._sandbox_start_s, 4),
                tests_s=round(sum(r.duration_s for r in records), 4),
            ),
        )

    def _submission_error(self) -> SubmissionError | None:
        if self._proxy is not None and self._proxy.load_error is not None:
            error = self._proxy.load_error
            return SubmissionError(
                kind=error.kind,
                message=load_error_message(error),
                line=error.line,
                detail=error.detail or "",
            )
        if self._timed_out:
            limit = (self.submission.limits or Limits()).grading_wall_seconds
            return SubmissionError(
                kind="timeout",
                message=f"The grading took longer than {limit:g} s; the "
                "remaining tests were not run. Look for a loop that never ends.",
            )
        event = self._student_event
        if event is not None:
            kind = getattr(event, "kind", "crash")
            kind = kind if kind in ("timeout", "crash", "memory_limit") else "crash"
            return SubmissionError(kind=kind, message=shorten(str(event)), line=event.line)
        return None

    def _grader_error(self) -> GraderError | None:
        if not self.grader_problems:
            return None
        count = len(self.grader_problems)
        return GraderError(
            message=f"{count} test(s) could not be judged because of a problem in the grader, "
            "not in your code. Please tell your instructor.",
            detail="\n".join(self.grader_problems[:10]),
        )

    def _metrics(self, records: list[TestRecord], restarts: int) -> dict[str, float]:
        return {
            "tests_total": float(len(records)),
            "tests_passed": float(sum(r.outcome == "passed" for r in records)),
            "student_calls": float(self.calls),
            "sandbox_restarts": float(restarts),
        }

    def _artifacts(self) -> Artifacts | None:
        if self.artifacts is None:
            return None
        known = set(Artifacts.model_fields)
        try:
            return Artifacts.model_validate({k: v for k, v in self.artifacts.items() if k in known})
        except ValueError as error:
            self.warnings.append(f"toy result not stored: {error}")
            return None


def load_error_message(error: Any) -> str:
    """The load error as the student should read it."""
    where = f" (line {error.line})" if getattr(error, "line", None) else ""
    message = str(error.message)
    return message if where.strip(" ()") in message else f"{message}{where}"
