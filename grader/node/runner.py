"""A grading node: threads that claim queued gradings from the database, grade them with a
warm Grader, and write their reports; the embedded service runs one in its own process,
`gspo-grader worker` runs one per machine (start.py).

    node = GradingNode(store, grader, metrics, name="host-1234", concurrency=2)  # plotter starts
    node.start()       # heartbeat and claim loops on threads; node.wake() after queueing
    node.close()

Of its claim loops, `live_judges` (at most all but one) take live work only, and the others
grade on `shared_grader` when given (judges at a lower CPU priority): lanes.py.

A grading is at-least-once: `claim` counts the attempt. A grader fault (a report with
`grader_error`, or the grader raising) is never the student's: the grading is queued
again, and after MAX_ATTEMPTS it is finished *ungradable* (no score). `recover_lost` is the
one rule for gradings whose node died: queued again, or ungradable after MAX_ATTEMPTS.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from grader.exercise import catalog, exercise_version
from grader.node.drawing import REDRAW_EVERY_S, Drawings, plots_key
from grader.node.lanes import lanes_of
from grader.node.metrics import Metrics, outcome_label
from grader.node.reuse import VerdictReuse
from grader.report import Report
from grader.store import GradingResult, Job, Store, ago

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 2
POLL_S = 0.5  # a node with nothing to do looks again this often (PostgreSQL also NOTIFYs)


def ungradable_report(mode: str, exercise_id: str, detail: str) -> Report:
    """The one report of a grading the grader could not finish: its declared tiers at zero,
    and a grader error that says it is not the student's fault."""
    from grader.judge import failed_report, grader_error

    error = grader_error("the grader failed on every attempt; it was not graded", [detail])
    exercise = catalog().get(exercise_id)
    if exercise is None:
        return Report(mode=mode, exercise=exercise_id, passed=False, score=0.0, max_score=0.0,
                      grader_error=error)  # fmt: skip
    return failed_report(exercise, mode, None, None, grader_error=error)


def verdict_of(
    report: Report, version: str | None = None, plots: str | None = None, key: str | None = None
) -> GradingResult:
    """Done with a score, or ungradable (no score) when the grader failed; `plots`: the key
    of the plots its toy needs (drawing.plots_key); `key`: what a later grading may reuse it
    by (reuse.py), kept only when the report may be reused."""
    if report.grader_error is not None:
        return GradingResult(report.model_dump_json(), exercise_version=version)
    key = key if VerdictReuse.reusable(report) else None
    return GradingResult(report.model_dump_json(), report.score, report.max_score, report.passed,
                         version, plots, key)  # fmt: skip


def version_of(exercise_id: str) -> str | None:
    """The exercise's version now, read just before grading: the Grader grades with judges
    that loaded this version (an edit of the folder restarts them)."""
    exercise = catalog().get(exercise_id)
    return exercise_version(exercise) if exercise is not None else None


def recover_lost(
    store: Store, stalled_s: float, metrics: Metrics | None = None, node=None, running=()
) -> int:
    """Queue again the gradings of nodes silent for `stalled_s`, and those `node` (the
    caller) holds but is not `running` (or finish them ungradable after MAX_ATTEMPTS); how
    many were recovered."""
    count = 0
    for grading in store.lost(ago(stalled_s), node, running):
        found = store.by_grading(grading.grading_id)
        if found is None:
            continue
        if grading.attempts >= MAX_ATTEMPTS:
            detail = f"its grading node stopped answering on attempt {grading.attempts}"
            report = ungradable_report(found.submission.kind, found.submission.exercise, detail)
            written = store.finish(grading.grading_id, verdict_of(report))
        else:
            written = store.requeue(grading.grading_id, node=grading.node)
        if written:
            log.warning(
                "grading %s was lost with node %s; recovered", grading.grading_id, grading.node
            )
            count += 1
            if metrics is not None:
                metrics.observe_retry()
    return count


class GradingNode:
    """`on_finished(grading_id)` is called after a report is written (the embedded service
    wakes the request waiting for it); `draw` draws a toy result's plots as PNG bytes (by
    default a Plotter of the node's own; `drawings` uses it and is closed with the node);
    `reuse`: live gradings of code graded before take the earlier report (reuse.py)."""

    def __init__(
        self,
        store: Store,
        grader,
        metrics: Metrics,
        name: str,
        concurrency: int,
        heartbeat_s: float = 2.0,
        stalled_s: float = 10.0,
        on_finished: Callable[[str], None] = lambda grading_id: None,
        draw: Callable | None = None,
        live_judges: int = 1,
        shared_grader=None,
        regrade_lull_s: float = 0.0,
        reuse: VerdictReuse | None = None,
    ):
        self.store, self.grader, self.metrics = store, grader, metrics
        self.shared_grader = shared_grader if shared_grader is not None else grader
        self.name = name
        self.concurrency = concurrency
        self.lanes = lanes_of(concurrency, live_judges, 0)
        self.heartbeat_s, self.stalled_s = heartbeat_s, stalled_s
        self.on_finished = on_finished
        self.drawings = Drawings(store, metrics, draw)  # closed with the node
        self.in_flight = 0
        self.regrade_lull_s = regrade_lull_s
        self.reuse = reuse
        self._live = 0  # live gradings in flight; with _live_at, under _claims
        self._live_at = float("-inf")  # monotonic time live work was last claimed or ended
        self._wake = threading.Condition()
        self._pending = 0  # wake-ups not yet taken by a claim loop
        self._stop = threading.Event()
        self._running: set[str] = set()  # grading ids claimed by this node's threads
        self._claims = threading.Lock()  # a claim and its entry in _running, as one step
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self.store.beat(self.name)
        loops = [("heartbeat", self._heartbeat)]
        for i, live_only in enumerate(self.lanes.loops):
            lane = "live" if live_only else "shared"
            loops.append((f"grading-{i}-{lane}", lambda live=live_only: self._claim_loop(live)))
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        for exercise_id in catalog():
            self.drawings.preview(exercise_id, version_of(exercise_id))
        self.drawings.look_for_missing(after_s=0)  # what this node left undrawn when it stopped

    def wake(self) -> None:
        """A grading was queued: a waiting claim loop looks at once."""
        with self._wake:
            self._pending += 1
            self._wake.notify()

    def close(self) -> None:
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        for thread in self._threads:
            thread.join(timeout=60)
        self.drawings.close()

    def _heartbeat(self) -> None:
        looked = time.monotonic()
        while not self._stop.wait(self.heartbeat_s):
            if time.monotonic() - looked >= REDRAW_EVERY_S:
                looked = time.monotonic()
                self.drawings.look_for_missing()  # plots a node stopped or died before drawing
            try:
                self.store.beat(self.name)
                with self._claims:
                    running = set(self._running)
                recover_lost(self.store, self.stalled_s, self.metrics, self.name, running)
            except Exception:
                log.warning("heartbeat failed; trying again", exc_info=True)

    def _claim_loop(self, live_only: bool) -> None:
        """Claim and grade until closed: live work only (a reserved loop), or any work,
        graded on the shared grader (lanes.py)."""
        grader = self.grader if live_only else self.shared_grader
        while not self._stop.is_set():
            try:
                with self._claims:
                    job = self.store.claim(self.name, live_only=live_only or self._live_lately())
                    if job is not None:  # claimed and counted as one step
                        self._running.add(job.grading_id)
                        self.in_flight += 1
                        self._count_live(job, +1)
            except Exception:
                log.warning("could not claim a grading; trying again", exc_info=True)
                job = None
            if job is None:
                with self._wake:
                    if self._pending == 0:
                        self._wake.wait(POLL_S)
                    self._pending = max(0, self._pending - 1)
                continue
            try:
                self.run(job, grader)
            except Exception:  # the database went away: the heartbeat's rule requeues it
                log.exception("grading %s failed outside the grader", job.grading_id)
            finally:
                with self._claims:
                    self._running.discard(job.grading_id)
                    self.in_flight -= 1
                    self._count_live(job, -1)

    def _live_lately(self) -> bool:
        """Live work in flight on this node, or ended less than `regrade_lull_s` ago: then
        no loop starts a regrading (a regrading beside a live one slows it, whatever the
        CPU priority: measured in bench/regrade_phase.py)."""
        return self._live > 0 or time.monotonic() - self._live_at < self.regrade_lull_s

    def _count_live(self, job: Job, step: int) -> None:
        if job.live:
            self._live += step
            self._live_at = time.monotonic()

    def run(self, job: Job, grader=None) -> None:
        """Grade a claimed grading (on `grader`, else the node's) and write its report (or
        queue it again after a fault)."""
        start = time.perf_counter()
        version = version_of(job.exercise)
        key = self.reuse.key(job, version) if self.reuse is not None else None
        report = self._reused(key, job) if key is not None else None
        reused = report is not None
        if not reused:  # the tiers run
            report = self._grade(job, grader or self.grader)
        seconds = time.perf_counter() - start
        if report.grader_error is not None and job.attempts < MAX_ATTEMPTS:
            log.warning("grader fault on %s (attempt %d): %s", job.grading_id, job.attempts,
                        report.grader_error.message)  # fmt: skip
            if self.store.requeue(job.grading_id, node=self.name):
                self.metrics.observe_retry()
                self.wake()
            return
        verdict = verdict_of(report, version, plots_key(job.exercise, report), key)
        if self.store.finish(job.grading_id, verdict):
            self.metrics.observe_grading(job.kind, outcome_label(report), seconds)
            if reused:
                self.metrics.observe_reuse()
            self.on_finished(job.grading_id)
            self.drawings.result(job.exercise, report, verdict.plots_key)
            self.drawings.preview(job.exercise, version)  # an edited exercise: a new preview

    def _reused(self, key: str, job: Job) -> Report | None:
        """The report of a finished grading under `key`, as this submission's, made now;
        None when there is none, or it does not read back (the tiers run instead)."""
        earlier = self.store.reusable(key)
        if earlier is None:
            return None
        try:
            report = Report.from_json(earlier.report_json)
        except ValueError:  # pydantic's ValidationError, or JSON that does not parse
            log.warning("the report reused by %s does not read back; grading it", job.grading_id)
            return None
        return report.model_copy(update={"submission": _name(job), "created_at": datetime.now(UTC)})

    def _grade(self, job: Job, grader) -> Report:
        try:
            return grader.grade(job.code, mode=job.kind, exercise=job.exercise, name=_name(job))
        except Exception as error:  # the grader promises never to raise; if it does, it is ours
            log.exception("the grader raised on %s", job.grading_id)
            return ungradable_report(job.kind, job.exercise, f"{type(error).__name__}: {error}")


def _name(job: Job) -> str | None:
    """Report.submission: a Submit's id (a Run's report names none)."""
    return job.submission_id if job.kind == "submit" else None
