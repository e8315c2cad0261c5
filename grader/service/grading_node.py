"""One queued grading, carried out: the part that both queues (in-process and
procrastinate) share, so that both keep the same promises.

    node = GradingNode(store, grader, metrics)
    outcome = node.run(Job("submission", submission_id))   # "finished", "retry" or "skipped"

A job is at-least-once: it may be run again after its grading node died, so `run` starts
by counting the attempt in the database and skips a job whose verdict is written already.
A grader fault (a report with `grader_error`, or the grader raising) is never the student's:
the first asks for another attempt ("retry"); once a job has had MAX_ATTEMPTS, it is
finished as *ungradable*, which keeps no score. The verdict is written once (Store.finish).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from grader.report import GraderError, Report
from grader.service.metrics import Metrics, outcome_of
from grader.service.store import Enqueue, RunRecord, Store, Submission, Verdict

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 2
UNGRADABLE = "ungradable: the grader failed on every attempt; this is not your code's fault"

Outcome = Literal["finished", "retry", "skipped"]


@dataclass(frozen=True)
class Job:
    """What a queue carries: which row to grade. Everything else is read from the database."""

    kind: Literal["submission", "run"]
    job_id: str  # the submission id, or a Run's report id

    @property
    def mode(self) -> str:
        return "submit" if self.kind == "submission" else "run"

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.job_id}"


def ungradable_report(mode: str, exercise: str, detail: str = "") -> Report:
    """The report of a job that no attempt could grade: built once, when it is given up."""
    error = GraderError(message=f"Grader error, {UNGRADABLE}.", detail=detail[-4000:])
    return Report(
        mode=mode, exercise=exercise, passed=False, score=0.0, max_score=0.0, grader_error=error
    )


def verdict_of(report: Report) -> Verdict:
    """Done with a score, or ungradable (no score) when the grader failed."""
    if report.grader_error is not None:
        return Verdict(report.model_dump_json())
    return Verdict(report.model_dump_json(), report.score, report.max_score, report.passed)


class GradingNode:
    """`after_verdict(job, report)` may return a job writer for the verdict's transaction
    (the distributed deployment queues the drawing of the plots that way); `retry_job(job)`
    one for the transaction that queues a job again after a grader fault."""

    def __init__(
        self,
        store: Store,
        grader,
        metrics: Metrics,
        after_verdict: Callable[[Job, Report], Enqueue | None] | None = None,
        retry_job: Callable[[Job], Enqueue] | None = None,
    ):
        self.store = store
        self.grader = grader
        self.metrics = metrics
        self.after_verdict = after_verdict
        self.retry_job = retry_job  # the queue's job for another attempt, if it keeps one

    def run(self, job: Job) -> Outcome:
        record = self.store.start_attempt(job.kind, job.job_id)
        if record is None:
            return "skipped"  # finished by an earlier attempt
        if record.attempts > MAX_ATTEMPTS:
            self.give_up(job, record.exercise, f"{record.attempts - 1} attempts were lost")
            return "finished"
        start = time.perf_counter()
        report = self._grade(job, record)
        seconds = time.perf_counter() - start
        if report.grader_error is not None and record.attempts < MAX_ATTEMPTS:
            log.warning(
                "grader fault on %s (attempt %d): %s",
                job.key,
                record.attempts,
                report.grader_error.message,
            )
            writer = self.retry_job(job) if self.retry_job else None
            self.store.requeue(job.kind, job.job_id, enqueue=writer)
            self.metrics.observe_retry()
            return "retry"
        writer = self.after_verdict(job, report) if self.after_verdict else None
        if self.store.finish(job.kind, job.job_id, verdict_of(report), enqueue=writer):
            self.metrics.observe_grading(job.mode, outcome_of(report), seconds)
        return "finished"

    def give_up(self, job: Job, exercise: str, detail: str) -> bool:
        """Finish a job as ungradable; False when a verdict was written before."""
        report = ungradable_report(job.mode, exercise, detail)
        written = self.store.finish(job.kind, job.job_id, verdict_of(report))
        if written:
            self.metrics.observe_grading(job.mode, "grader_error", 0.0)
        return written

    def _grade(self, job: Job, record: Submission | RunRecord) -> Report:
        name = record.submission_id if isinstance(record, Submission) else None
        try:
            return self.grader.grade(
                record.code, mode=job.mode, exercise=record.exercise, name=name
            )
        except Exception as error:  # the grader promises never to raise; if it does, it is ours
            log.exception("the grader raised on %s", job.key)
            report = ungradable_report(
                job.mode, record.exercise, f"{type(error).__name__}: {error}"
            )
            return report
