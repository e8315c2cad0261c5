"""Grade submissions: a warm `Grader` (the service, bulk runs), or `grade()` once (cold).

    with Grader(pool_size=2, on_stats=count) as grader:   # count(report, GradingStats)
        grader.wait_ready()
        report = grader.grade(source, mode="run", exercise="gspo")   # thread-safe

A Grader keeps `pool_size` judge processes (client.py); each has imported torch, pytest and
the tier suites once, graded every exercise's reference once to warm every code path, and
keeps a sandboxed worker started ahead. A grading then costs only its tests. A judge keeps
the pytest session of the exercise it graded last, so a grading goes to an idle judge that
last graded its exercise when there is one (IdleJudges). A judge is recycled after
`recycle_after` gradings to bound any slow leak, and replaced when it dies.
`nice` (0-19, added to this process's niceness) lowers the CPU priority of every judge process
and of the sandboxed workers it starts (a grading node's judges for regrade work: node/lanes.py).

Edits take effect: a grading whose exercise's version (exercise_version) differs from the one
the judges loaded restarts them all and waits for one that loaded the new version; gradings
already running finish on the old one.

The judges are trusted: student code only ever runs in their sandboxed workers. Whatever
goes wrong inside (a judge dies, hangs, fails to start), `grade` returns a Report that says
so; it raises only for a request that names no exercise (ExerciseError) or a bad mode.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TextIO

from grader.exercise import Exercise, catalog, exercise_version, find_exercise, refresh_catalog
from grader.judge.client import JudgeClient, JudgeFailed, JudgeTimeout
from grader.judge.failures import failed_report, grader_error, grading_timeout
from grader.judge.link import GradingRequest
from grader.judge.stats import GradingStats
from grader.report import Report
from grader.sandbox import WAITS, Limits

MODES = ("run", "submit")
log = logging.getLogger(__name__)


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
        on_stats: Callable[[Report, GradingStats], None] | None = None,
        nice: int = 0,
    ):
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1; got {pool_size}")
        if not 0 <= nice <= 19:
            raise ValueError(f"nice must be from 0 to 19; got {nice}")
        self.pool_size = pool_size
        self.limits = limits  # None: the judges read GSPO_GRADER_SANDBOX_* themselves
        self.recycle_after = recycle_after
        self.on_stats = on_stats  # called after each grading a judge ran (stats.py)
        self._judge_options = {"warm": warm, "one_shot": one_shot, "spare_workers": spare_workers}
        self._judge_options["nice"] = nice  # each judge, and the workers it starts, run at it
        self._idle = IdleJudges()
        self._lock = threading.Lock()
        self._judges: set[JudgeClient] = set()
        self._counts = {"ready": 0, "busy": 0, "graded": 0, "judge_failures": 0, "recycled": 0}
        self._closed = self._started = False
        self.start_error: JudgeFailed | None = None  # why the last judge failed to start
        self._versions: dict[Path, str] = {}  # each exercise's version as the judges loaded it
        self._generation = 0  # bumped by each edit seen: older judges are restarted
        self._born: dict[JudgeClient, int] = {}  # each judge's generation

    # ---- life cycle ----------------------------------------------------------------
    def start(self) -> Grader:
        """Start the judge processes in the background; `.ready` turns True when all are up."""
        with self._lock:
            if self._started:
                return self
            self._started = True
        for exercise in catalog().values():
            self._versions[exercise.root] = exercise_version(exercise)
        for _ in range(self.pool_size):
            self._spawn()
        return self

    @property
    def ready(self) -> bool:
        counts = self._counts
        return (
            self._started
            and not self._closed
            and counts["ready"] + counts["busy"] >= (self.pool_size)
        )

    def wait_ready(self, timeout: float = WAITS.judge_ready_s) -> bool:
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
            judge.close()

    def __enter__(self) -> Grader:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def stats(self) -> dict:
        with self._lock:
            return {"pool_size": self.pool_size, **self._counts}

    # ---- grading -------------------------------------------------------------------
    def grade(
        self,
        source: str,
        mode: str = "submit",
        *,
        exercise: str | None = None,
        filename: str = "submission.py",
        tiers: list[str] | None = None,
        name: str | None = None,
    ) -> Report:
        """Grade one submission; blocks until a judge is free. See the module docstring."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        folder = self._current(find_exercise(exercise), exercise)  # ExerciseError: unknown
        request = GradingRequest(
            source=source,
            exercise=str(folder.root) if exercise not in (None, folder.id) else folder.id,
            mode=mode,
            tiers=None if tiers is None else tuple(tiers),
            filename=filename,
            name=name,
        )
        if not self._started:
            self.start()
        judge = self._take(request.exercise)
        if isinstance(judge, JudgeFailed):
            self._spawn()
            error = grader_error("the judge could not start", [str(judge)])
            return failed_report(folder, mode, tiers, name, grader_error=error)
        try:
            report, stats = judge.grade(request)
        except JudgeTimeout:
            limit = judge.grading_wall_seconds
            return failed_report(folder, mode, tiers, name, submission_error=grading_timeout(limit))
        except JudgeFailed as error:
            problem = grader_error("the judge process failed", [str(error)])
            return failed_report(folder, mode, tiers, name, grader_error=problem)
        finally:
            self._give_back(judge, request.exercise)
        if self.on_stats is not None:
            self.on_stats(report, stats)
        return report

    def _current(self, folder: Exercise, asked: str | None) -> Exercise:
        """The exercise as its folder is now; an edit since the judges loaded it restarts them."""
        version = exercise_version(folder)
        with self._lock:
            before = self._versions.setdefault(folder.root, version)
            self._versions[folder.root] = version
            self._generation += before != version
        if before == version:
            return folder
        log.info("exercise %s changed (version %s -> %s): new gradings use the new version",
                 folder.id, before, version)  # fmt: skip
        refresh_catalog()
        return find_exercise(asked)

    def _count(self, **changes: int) -> None:
        with self._lock:
            for key, change in changes.items():
                self._counts[key] += change

    def _take(self, exercise: str) -> JudgeClient | JudgeFailed:
        """An idle judge that loaded the exercises as they are now (older ones restart)."""
        while isinstance(judge := self._idle.take(exercise), JudgeClient) and self._stale(judge):
            self._count(ready=-1)
            self._replace(judge, recycled=1)
        if isinstance(judge, JudgeClient):
            self._count(ready=-1, busy=1)
        return judge

    def _stale(self, judge: JudgeClient) -> bool:
        return self._born.get(judge, 0) < self._generation

    def _replace(self, judge: JudgeClient, **counts: int) -> None:
        self._count(**counts)
        with self._lock:
            self._judges.discard(judge)
            self._born.pop(judge, None)
        self._idle.forget(judge)
        judge.close()
        self._spawn()

    def _give_back(self, judge: JudgeClient, exercise: str) -> None:
        self._count(busy=-1, graded=1)
        if self._closed:
            judge.close()
            return
        if not judge.alive() or judge.gradings >= self.recycle_after or self._stale(judge):
            alive = judge.alive()
            self._replace(judge, judge_failures=int(not alive), recycled=int(alive))
            return
        self._count(ready=1)
        self._idle.put(judge, exercise)

    def _spawn(self) -> None:
        """Start one judge process on a background thread; queue it once it is ready."""
        threading.Thread(target=self._start_one, name="judge-start", daemon=True).start()

    def _start_one(self) -> None:
        generation = self._generation  # before the judge reads any exercise file
        try:
            judge = JudgeClient(self.limits, **self._judge_options)
            with self._lock:  # close() sees this judge, or this sees that it was closed
                closed = self._closed
                if not closed:
                    self._judges.add(judge)
                    self._born[judge] = generation
            if closed:
                judge.kill()
                return
            judge.wait_ready()
        except (JudgeFailed, OSError) as error:
            failure = error if isinstance(error, JudgeFailed) else JudgeFailed(str(error))
            self.start_error = failure
            self._idle.put(failure)
            return
        if self._closed:
            judge.close()
            return
        self.start_error = None
        self._count(ready=1)
        self._idle.put(judge)


class IdleJudges:
    """The judges waiting for a grading, and in their place the failures of judges that did
    not start, in the order they came. `take(exercise)` gives the judge that last graded
    `exercise` if one waits (it kept that exercise's pytest session: engine/pytest_session.py),
    else the one that has waited longest."""

    def __init__(self) -> None:
        self._waiting: list[JudgeClient | JudgeFailed] = []
        self._last: dict[JudgeClient, str] = {}  # the exercise each judge graded last
        self._changed = threading.Condition()

    def put(self, judge: JudgeClient | JudgeFailed, exercise: str | None = None) -> None:
        with self._changed:
            if exercise is not None:
                self._last[judge] = exercise
            self._waiting.append(judge)
            self._changed.notify()

    def take(self, exercise: str) -> JudgeClient | JudgeFailed:
        """Blocks until a judge (or a failure) waits."""
        with self._changed:
            self._changed.wait_for(lambda: self._waiting)
            same = (judge for judge in self._waiting if self._last.get(judge) == exercise)
            chosen = next(same, self._waiting[0])
            self._waiting.remove(chosen)
            return chosen

    def forget(self, judge: JudgeClient) -> None:
        """A judge that is closed for good."""
        with self._changed:
            self._last.pop(judge, None)


def grade(
    source: str,
    *,
    mode: str = "submit",
    exercise: str | None = None,
    tiers: list[str] | None = None,
    filename: str = "submission.py",
    name: str | None = None,
    limits: Limits | None = None,
) -> Report:
    """Grade one submission cold: start a judge, grade, stop it. Never raises for a
    grading that goes wrong (see Grader.grade)."""
    grader = Grader(pool_size=1, limits=limits, warm=False, one_shot=True)
    try:
        return grader.start().grade(
            source, mode, exercise=exercise, filename=filename, tiers=tiers, name=name
        )
    finally:
        grader.close()


def grade_files(
    paths: list[Path],
    *,
    mode: str = "submit",
    exercise: str | None = None,
    tiers: list[str] | None = None,
    jobs: int = 2,
    limits: Limits | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Report]:
    """One Report per path, in the order given; Report.submission is the path. Several
    files share `jobs` warm judges, which start once for the whole folder."""
    options = {"mode": mode, "exercise": exercise, "tiers": tiers}
    if len(paths) == 1:
        path = paths[0]
        return [grade(_read(path), filename=path.name, name=str(path), limits=limits, **options)]
    jobs = max(1, min(jobs, len(paths)))
    with Grader(pool_size=jobs, limits=limits, warm=False) as grader:

        def one(path: Path) -> Report:
            return grader.grade(_read(path), filename=path.name, name=str(path), **options)

        with ThreadPoolExecutor(jobs, thread_name_prefix="bulk-grade") as pool:
            futures = [pool.submit(one, path) for path in paths]
            for done, _ in enumerate(as_completed(futures), start=1):
                if progress is not None:
                    progress(done, len(paths))
            return [future.result() for future in futures]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


class ProgressBar:
    """`[#####.....] 12/50` on stderr, redrawn in place; silent when stderr is no terminal."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        filled = self.WIDTH * done // max(total, 1)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r[{bar}] {done}/{total}{end}")
        self.stream.flush()
