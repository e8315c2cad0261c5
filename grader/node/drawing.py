"""The toy's plots, drawn by a grading node after the verdict and stored in the database.

Each exercise draws its own plots with its own `experiment.render_plots(result, out_dir)`;
their names come from its manifest (`exercise.plots`). An API node imports no torch (and
experiment.py does), so it only reads the stored PNGs.

A node draws in a child process of its own, the Plotter, at a lower CPU priority than its
judges: a plot costs about as much CPU as three gradings (0.7-1.1 s for the GSPO toy's
three, mostly matplotlib's layout and text), so under a class's load the verdicts come first
and the plots follow, and matplotlib never holds the GIL of the process that serves the API
(the embedded service's).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from grader.exercise import Exercise, load_module
from grader.report import Artifacts
from grader.store import PREVIEW_DATA


class PlotError(Exception):
    """The plots of a report could not be drawn."""


_modules: dict[Path, object] = {}
_modules_lock = threading.Lock()


def experiment_module(path: Path):
    """The exercise's experiment.py, imported once per process (it is trusted code)."""
    with _modules_lock:
        if path not in _modules:
            digest = hashlib.sha1(bytes(path)).hexdigest()[:8]
            _modules[path] = load_module(path, f"experiment_{digest}")
        return _modules[path]


def draw_pngs(exercise: Exercise, result: dict) -> dict[str, bytes]:
    """Draw every plot of `result` and return them as PNG bytes by name, or raise PlotError."""
    names = [plot.name for plot in exercise.plots]
    with tempfile.TemporaryDirectory(prefix="gspo-plots-") as scratch:
        out_dir = Path(scratch)
        try:
            experiment_module(exercise.experiment).render_plots(result, out_dir)
        except Exception as exc:
            raise PlotError(f"the plots could not be drawn: {exc}") from exc
        missing = [n for n in names if not (out_dir / f"{n}.png").is_file()]
        if missing:
            raise PlotError(f"render_plots did not write {', '.join(missing)}")
        return {n: (out_dir / f"{n}.png").read_bytes() for n in names}


def reference_preview(exercise: Exercise, draw=draw_pngs) -> dict[str, bytes]:
    """The reference preview: the toy run through the reference solution, by the same
    experiment and artifact path a grading takes; its plots as PNG bytes by name, and its
    Artifacts as JSON under PREVIEW_DATA."""
    reference = load_module(exercise.reference, f"{exercise.id}_preview_reference")
    toy = experiment_module(exercise.experiment).run_toy(reference)
    artifacts = Artifacts.of_toy(exercise, toy)
    return draw(exercise, artifacts.data) | {PREVIEW_DATA: artifacts.model_dump_json().encode()}


# The Plotter's niceness. The judges grade at 0 (regradings' at Settings.regrade_nice): at
# 10 a plot gets about a tenth of a busy core's share, so it still advances under a long
# burst of Submits, and takes whatever the judges leave idle.
PLOTS_NICE = 10
PARENT_POLL_S = 0.5  # how often the Plotter looks whether its node is still there


def _begin_plotting(nice: int, parent_pid: int) -> None:
    """The Plotter's first step: a session of its own at its lower priority (where the
    kernel shares CPU between sessions first, a niceness counts only within one: see
    `session_follows_niceness`), and its own end once its node has gone, even by SIGKILL."""
    from grader.sandbox.worker.confine import session_follows_niceness

    os.setsid()  # also leaves the terminal's Ctrl-C to the node, which ends it in order
    os.nice(nice)
    session_follows_niceness()

    def end_with_parent() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=end_with_parent, name="end-with-node", daemon=True).start()


class Plotter:
    """Draws plots like `draw_pngs`, in one child process (started at the first drawing,
    and again after it died). Any thread may call it; drawings are made one at a time.

        plotter = Plotter()
        pngs = plotter(exercise, result)   # PlotError when they cannot be drawn
        plotter.close()
    """

    def __init__(self, nice: int = PLOTS_NICE):
        self.nice = nice
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def __call__(self, exercise: Exercise, result: dict) -> dict[str, bytes]:
        for _ in range(2):
            pool = self._process()
            try:
                future = pool.submit(draw_pngs, exercise, result)
            except BrokenProcessPool:  # it died while idle (killed): start it again
                self._forget(pool)
                continue
            try:
                return future.result()
            except BrokenProcessPool as exc:  # it died while drawing: not again for these
                self._forget(pool)
                raise PlotError("the plotting process ended while drawing") from exc
        raise PlotError("the plotting process could not be started")

    def _forget(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None  # the next drawing starts a new process
        pool.shutdown(wait=False, cancel_futures=True)

    def _process(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    1,
                    mp_context=multiprocessing.get_context("spawn"),  # forks no node threads
                    initializer=_begin_plotting,
                    initargs=(self.nice, os.getpid()),
                )
            return self._pool

    def close(self) -> None:
        """End the process once a drawing under way has ended (those not begun are dropped)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
