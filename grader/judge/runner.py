"""Grade submissions: `grade()` once (cold), or a warm `Grader` for the service and bulk runs.

Design: a Grader keeps `pool_size` long-lived judge processes. Each has imported torch,
pytest, the plugin and the tier suites once, graded the reference once to warm every code
path, and keeps one sandboxed worker pre-started; it then serves gradings one at a time by
running pytest.main in-process (see inline.py). A grading therefore pays neither the torch
import nor pytest's start-up, only collection and the tests. We chose this over a fork server
because the judge computes with torch (reference values, gradients): a fork server must never
compute before forking, or a child's first parallel op can hang, which would forbid warming
it; and a judge process is recycled after `recycle_after` gradings to bound any slow leak.

The judge processes are trusted: student code only ever runs in the sandboxed workers.
Whatever goes wrong (a judge dies, hangs past the time limit, fails to start), `grade`
returns a Report that says so; it never raises to its caller.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

from grader.exercise import default_exercise
from grader.judge.failures import grader_error_report, timeout_report, with_declared_tiers
from grader.judge.judge_handle import JudgeFailed, JudgeProcess, JudgeTimeout
from grader.report import Report

if TYPE_CHECKING:  # importing grader.sandbox loads torch, which this process does not need
    from grader.sandbox import Limits

# The judge stops a grading itself at Limits.grading_wall_seconds; this outer limit only
# catches a judge that hangs, so it is generous (a cold judge's first grading also imports
# the suites, which takes long on a loaded machine).
JUDGE_MARGIN_S = 30.0


class Grader:
    """Warm, thread-safe grading: up to `pool_size` gradings run in parallel."""

    def __init__(
        self,
        pool_size: int = 2,
        limits: Limits | None = None,
        *,
        recycle_after: int = 200,
        warm: bool = True,
        one_shot: bool = False,
        spare_workers: int = 1,
    ):
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1; got {pool_size}")
        self.pool_size = pool_size
        self.limits = limits  # None: the judges read GSPO_GRADER_SANDBOX_* themselves
        self.recycle_after = recycle_after
        self.warm = warm
        self.one_shot = one_shot  # for grade(): no warm-up, no spare sandbox worker
        # sandboxed workers each judge keeps started; 2 lets back-to-back gradings skip the
        # ~1.6 s torch import of a worker that is still starting, at ~200 MB each
        self.spare_workers = spare_workers
        self._idle: queue.Queue[JudgeProcess | JudgeFailed] = queue.Queue()
        self._lock = threading.Lock()
        self._judges: set[JudgeProcess] = set()
        self._ready = 0
        self._busy = 0
        self._graded = 0
        self._failures = 0
        self._closed = False
        self._started = False
        self.start_error: JudgeFailed | None = None  # why the last judge failed to start

    # ---- life cycle ----------------------------------------------------------------
    def start(self) -> Grader:
        """Start the judge processes in the background; `.ready` turns True when all are up."""
        with self._lock:
            if self._started:
                return self
            self._started = True
        for _ in range(self.pool_size):
            self._spawn()
        return self

    @property
    def ready(self) -> bool:
        return self._started and not self._closed and self._ready + self._busy >= self.pool_size

    def wait_ready(self, timeout: float = 180.0) -> bool:
        """Block until every judge is up; False at once if one failed to start."""
        deadline = time.monotonic() + timeout
        while not self.ready and time.monotonic() < deadline and not self._closed:
            if self.start_error is not None:
                return False
            time.sleep(0.05)
        return self.ready

    def close(self) -> None:
        with self._lock:
            self._closed = True
            judges = list(self._judges)
        for judge in judges:
            judge.close(timeout=2.0)

    def __enter__(self) -> Grader:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def stats(self) -> dict:
        with self._lock:
            return {
                "pool_size": self.pool_size,
                "ready": self._ready,
                "busy": self._busy,
                "graded": self._graded,
                "judge_failures": self._failures,
            }

    # ---- grading -------------------------------------------------------------------
    def grade(
        self,
        code: str,
        mode: str = "submit",
        filename: str = "submission.py",
        tiers: list[str] | None = None,
        *,
        exercise: str | None = None,
        name: str | None = None,
    ) -> Report:
        """Grade one submission; blocks until a judge is free. Never raises.

        exercise: a catalog id; until the judges load other exercises, only the root one.
        name: what the report calls the submission (default: `filename`)."""
        start = time.perf_counter()
        if exercise not in (None, default_exercise().id):
            report = grader_error_report(f"exercise {exercise!r} cannot be graded yet", [])
            return with_declared_tiers(report, mode, tiers)
        if not self._started:
            self.start()
        judge = self._take()
        if isinstance(judge, JudgeFailed):
            self._spawn()
            report = grader_error_report("the judge could not start", [str(judge)])
            return with_declared_tiers(report, mode, tiers)
        job = {"source": code, "filename": filename, "mode": mode, "tiers": tiers}
        job["name"] = name or filename
        try:
            report = judge.grade(job, 2 * judge.grading_wall_seconds + JUDGE_MARGIN_S)
        except JudgeTimeout:
            report = timeout_report(mode, judge.grading_wall_seconds)
        except JudgeFailed as error:
            report = grader_error_report("the judge process failed", [str(error)])
        finally:
            self._give_back(judge)
        report = with_declared_tiers(report, mode, tiers)
        report.timings.total_s = round(time.perf_counter() - start, 4)
        return report

    def _take(self) -> JudgeProcess | JudgeFailed:
        judge = self._idle.get()
        with self._lock:
            if isinstance(judge, JudgeProcess):
                self._ready -= 1
                self._busy += 1
        return judge

    def _give_back(self, judge: JudgeProcess) -> None:
        with self._lock:
            self._busy -= 1
            self._graded += 1
            closed = self._closed
        if closed:
            judge.close(timeout=2.0)
            return
        if not judge.alive() or judge.gradings >= self.recycle_after:
            with self._lock:
                self._failures += int(not judge.alive())
                self._judges.discard(judge)
            judge.close(timeout=2.0)
            self._spawn()
            return
        with self._lock:
            self._ready += 1
        self._idle.put(judge)

    def _spawn(self) -> None:
        """Start one judge process on a background thread; queue it once it is ready."""
        threading.Thread(target=self._start_one, name="judge-start", daemon=True).start()

    def _start_one(self) -> None:
        try:
            judge = JudgeProcess(
                self.limits,
                warm=self.warm,
                one_shot=self.one_shot,
                spare_workers=self.spare_workers,
            )
            with self._lock:
                self._judges.add(judge)
            judge.wait_ready()
        except (JudgeFailed, OSError) as error:
            failure = error if isinstance(error, JudgeFailed) else JudgeFailed(str(error))
            self.start_error = failure
            self._idle.put(failure)
            return
        with self._lock:
            if self._closed:
                judge.close(timeout=2.0)
                return
            self._ready += 1
            self.start_error = None
        self._idle.put(judge)


def grade(
    source: str,
    *,
    mode: str = "submit",
    tiers: list[str] | None = None,
    filename: str = "submission.py",
    limits: Limits | None = None,
) -> Report:
    """Grade one submission cold: start a judge, grade, stop it. Never raises."""
    grader = Grader(pool_size=1, limits=limits, warm=False, one_shot=True)
    try:
        return grader.start().grade(source, mode=mode, filename=filename, tiers=tiers)
    finally:
        grader.close()
