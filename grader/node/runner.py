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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader.exercise import catalog, exercise_version
from grader.node.drawing import Plotter, reference_preview
from grader.node.lanes import lanes_of
from grader.node.metrics import Metrics, outcome_label
from grader.report import Report
from grader.store import GradingResult, Job, Store, ago, artifacts_key, preview_key

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


def verdict_of(report: Report, version: str | None = None) -> GradingResult:
    """Done with a score, or ungradable (no score) when the grader failed."""
    if report.grader_error is not None:
        return GradingResult(report.model_dump_json(), exercise_version=version)
    return GradingResult(
        report.model_dump_json(), report.score, report.max_score, report.passed, version
    )


def version_of(exercise_id: str) -> str | None:
    """The exercise's version now, read just before grading: the Grader grades with judges
    that loaded this version (an edit of the folder restarts them)."""
    exercise = catalog().get(exercise_id)
    return exercise_version(exercise) if exercise is not None else None


def _experiments() -> list[Path]:
    """The catalog's experiment.py files, which a node's plotting process imports ahead."""
    return [e.experiment for e in catalog().values() if e.experiment.is_file()]


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
    default a Plotter of the node's own, closed with it)."""

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
    ):
        self.store, self.grader, self.metrics = store, grader, metrics
        self.shared_grader = shared_grader if shared_grader is not None else grader
        self.name = name
        self.concurrency = concurrency
        self.lanes = lanes_of(concurrency, live_judges, 0)
        self.heartbeat_s, self.stalled_s = heartbeat_s, stalled_s
        self.on_finished = on_finished
        self._plotter = None if draw is not None else Plotter(preload=_experiments())
        self.draw = draw if draw is not None else self._plotter  # closed with the node
        self.in_flight = 0
        self.regrade_lull_s = regrade_lull_s
        self._live = 0  # live gradings in flight; with _live_at, under _claims
        self._live_at = float("-inf")  # monotonic time live work was last claimed or ended
        self._wake = threading.Condition()
        self._pending = 0  # wake-ups not yet taken by a claim loop
        self._stop = threading.Event()
        self._running: set[str] = set()  # grading ids claimed by this node's threads
        self._claims = threading.Lock()  # a claim and its entry in _running, as one step
        self._threads: list[threading.Thread] = []
        self._plots = ThreadPoolExecutor(1, thread_name_prefix="plots")  # matplotlib: one
        self._previews = ThreadPoolExecutor(1, thread_name_prefix="previews")  # never before plots
        if self._plotter is not None:  # it imports matplotlib and the toys while judges start
            self._plotter.start()

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
            self._previews.submit(self._draw_preview, exercise_id, version_of(exercise_id))

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
        # Drawings not begun are dropped; one under way ends before close returns, since it
        # writes to the store, which its owner closes next.
        self._plots.shutdown(wait=True, cancel_futures=True)
        self._previews.shutdown(wait=True, cancel_futures=True)
        if self._plotter is not None:
            self._plotter.close()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
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
        report = self._grade(job, grader or self.grader)
        seconds = time.perf_counter() - start
        if report.grader_error is not None and job.attempts < MAX_ATTEMPTS:
            log.warning("grader fault on %s (attempt %d): %s", job.grading_id, job.attempts,
                        report.grader_error.message)  # fmt: skip
            if self.store.requeue(job.grading_id, node=self.name):
                self.metrics.observe_retry()
                self.wake()
            return
        verdict = verdict_of(report, version)
        if self.store.finish(job.grading_id, verdict):
            self.metrics.observe_grading(job.kind, outcome_label(report), seconds)
            self.on_finished(job.grading_id)
            self._plots.submit(self._draw_plots, job.exercise, report)
            self._previews.submit(self._draw_preview, job.exercise, version)  # an edited exercise

    def _grade(self, job: Job, grader) -> Report:
        name = job.submission_id if job.kind == "submit" else None
        try:
            return grader.grade(job.code, mode=job.kind, exercise=job.exercise, name=name)
        except Exception as error:  # the grader promises never to raise; if it does, it is ours
            log.exception("the grader raised on %s", job.grading_id)
            return ungradable_report(job.kind, job.exercise, f"{type(error).__name__}: {error}")

    def _draw_preview(self, exercise_id: str, version: str | None) -> None:
        """The exercise's reference preview, once per exercise version, on a thread of its
        own (neither a grading nor a graded plot waits for it; Figures are thread-safe)."""
        exercise = catalog().get(exercise_id)
        key = preview_key(exercise_id, version)
        if self._stop.is_set() or exercise is None or not exercise.experiment.is_file():
            return
        try:
            if not self.store.has_plots(key):
                self.store.save_plots(key, reference_preview(exercise, self.draw))
        except Exception:
            if not self._stop.is_set():  # a closed node's store is gone: nothing to say
                log.exception("the reference preview of %s could not be drawn", exercise_id)

    def _draw_plots(self, exercise_id: str, report: Report) -> None:
        """Draw the toy's plots after the verdict (it never waits for matplotlib) and store
        them once per distinct result."""
        exercise = catalog().get(exercise_id)
        result = None if report.artifacts is None else report.artifacts.data
        if exercise is None or result is None or not exercise.plots:
            return
        key = artifacts_key(exercise.id, result)
        try:
            drawn = not self.store.has_plots(key)
            if drawn:
                self.store.save_plots(key, self.draw(exercise, result))
            self.metrics.observe_plots(drawn)
        except Exception:
            log.exception("the plots of %s could not be drawn", key)
