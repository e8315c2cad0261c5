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

import argparse
import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
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
# The longest a drawing may take before its process is killed: the GSPO toy's three plots
# take about 1 s of CPU, 10 s at niceness 10 on a busy machine; an experiment.py that loops
# must not hold every later drawing back.
DRAWING_LIMIT_S = 120.0
PLOTTER_EXIT_S = 10.0  # at close, a plotting process gets this long to end on its own


class Plotter:
    """Draws plots like `draw_pngs`, in a plotting process of the node's own, one drawing at
    a time (any thread may call it). The process is started at the first drawing, and again
    after it died or was killed for running past DRAWING_LIMIT_S; it has a session of its own
    (where the kernel shares CPU between sessions first, a niceness counts only within one:
    see `session_follows_niceness`) and ends when its link closes, so a node killed with
    SIGKILL leaves none behind.

        plotter = Plotter()
        pngs = plotter(exercise, result)   # PlotError when they cannot be drawn
        plotter.close()
    """

    def __init__(self, nice: int = PLOTS_NICE, limit_s: float = DRAWING_LIMIT_S):
        self.nice, self.limit_s = nice, limit_s
        self._lock = threading.Lock()  # a drawing, or the process's start and end
        self._process: subprocess.Popen | None = None
        self._link: Connection | None = None

    def __call__(self, exercise: Exercise, result: dict) -> dict[str, bytes]:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()  # never started, or died while idle
            try:
                self._link.send((exercise, result))
                if not self._link.poll(self.limit_s):
                    self._end(kill=True)
                    raise PlotError(f"the plots took more than {self.limit_s:g} s to draw")
                drawn, value = self._link.recv()
            except (EOFError, OSError) as exc:
                self._end()
                raise PlotError("the plotting process ended while drawing") from exc
        if not drawn:
            raise PlotError(value)
        return value

    def close(self) -> None:
        """End the process once a drawing under way has ended."""
        with self._lock:
            self._end()

    def _start(self) -> None:
        from grader.judge.link import start_linked

        self._end()
        main = (
            "import sys; from grader.node.drawing import serve_plots; "
            "sys.exit(serve_plots(sys.argv[1:]))"
        )
        argv = [sys.executable, "-c", main, "--nice", str(self.nice)]
        self._process, self._link = start_linked(argv, stdin=subprocess.DEVNULL)

    def _end(self, kill: bool = False) -> None:
        """Close the link (the process ends at its next read) and reap the process; `kill`
        it at once (a drawing past its limit)."""
        if self._link is not None:
            self._link.close()
            self._link = None
        if self._process is not None:
            if kill:
                self._process.kill()
            try:
                self._process.wait(PLOTTER_EXIT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


def serve_plots(argv: list[str]) -> int:
    """The plotting process: draw each (exercise, result) its node sends, one at a time, and
    send back (True, PNG bytes by name) or (False, why not), until the node closes the link.
    The node is trusted and so is what it sends (a report's artifacts it parsed itself)."""
    from grader.sandbox.worker.confine import session_follows_niceness

    parser = argparse.ArgumentParser(prog="gspo-plotter", description="a node's plotting process")
    parser.add_argument("--fd", type=int, required=True, help="this end of the node's link")
    parser.add_argument("--nice", type=int, default=PLOTS_NICE)
    args = parser.parse_args(argv)
    os.nice(args.nice)
    session_follows_niceness()
    link = Connection(args.fd)
    while True:
        try:
            exercise, result = link.recv()
        except (EOFError, OSError):  # the node closed the link, or is gone
            return 0
        try:
            answer = (True, draw_pngs(exercise, result))
        except PlotError as exc:
            answer = (False, str(exc))
        except Exception as exc:  # never the student's: the plots' own code or this machine
            answer = (False, f"the plots could not be drawn: {type(exc).__name__}: {exc}")
        with contextlib.suppress(OSError):
            link.send(answer)
