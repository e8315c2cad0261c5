"""How a grading node draws the toy's plots, after the verdict, for the database to keep.

The drawing itself is grader/plots.py (each exercise's own `render_plots`). An API node
imports no torch (experiment.py does), so it only reads the stored PNGs.

A node draws in a child process of its own, the Plotter, at a lower CPU priority than its
judges: a plot costs about as much CPU as three gradings (0.7-1.1 s for the GSPO toy's
three, mostly matplotlib's layout and text), so under a class's load the verdicts come first
and the plots follow, and matplotlib never holds the GIL of the process that serves the API
(the embedded service's).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from grader.exercise import Exercise, load_module
from grader.judge.link import start_linked
from grader.plots import PLOTS_NICE, PlotError, draw_pngs, experiment_module
from grader.report import Artifacts
from grader.store import PREVIEW_DATA


def reference_preview(exercise: Exercise, draw=draw_pngs) -> dict[str, bytes]:
    """The reference preview: the toy run through the reference solution, by the same
    experiment and artifact path a grading takes; its plots as PNG bytes by name, and its
    Artifacts as JSON under PREVIEW_DATA."""
    reference = load_module(exercise.reference, f"{exercise.id}_preview_reference")
    toy = experiment_module(exercise.experiment).run_toy(reference)
    artifacts = Artifacts.of_toy(exercise, toy)
    return draw(exercise, artifacts.data) | {PREVIEW_DATA: artifacts.model_dump_json().encode()}


# The longest a drawing may take before its process is killed: the GSPO toy's three plots
# take about 1 s of CPU, 10 s at niceness 10 on a busy machine; an experiment.py that loops
# must not hold every later drawing back.
DRAWING_LIMIT_S = 120.0


class Plotter:
    """Draws plots like `draw_pngs`, in a plotting process of the node's own, one drawing at
    a time (any thread may call it). The process is started at the first drawing, and again
    after it died or was killed for running past DRAWING_LIMIT_S; it has a session of its own
    (where the kernel shares CPU between sessions first, a niceness counts only within one:
    see `session_follows_niceness`) and ends when its link closes, so a node killed with
    SIGKILL leaves none behind.

        plotter = Plotter(preload=[exercise.experiment])
        plotter.start()                    # optional: the process starts and imports now
        pngs = plotter(exercise, result)   # PlotError when they cannot be drawn
        plotter.close()

    `preload`: experiment.py files the process imports as it starts, with matplotlib, before
    its first drawing (a plotting process is a new interpreter: torch, matplotlib and the
    toy take it about 2 s of CPU, which a node started ahead pays before its first Submit).
    """

    def __init__(
        self,
        nice: int = PLOTS_NICE,
        limit_s: float = DRAWING_LIMIT_S,
        preload: Sequence[Path] = (),
    ):
        self.nice, self.limit_s, self.preload = nice, limit_s, tuple(preload)
        self._lock = threading.Lock()  # a drawing, or the process's start and end
        self._process: subprocess.Popen | None = None
        self._link: Connection | None = None

    def __call__(self, exercise: Exercise, result: dict) -> dict[str, bytes]:
        with self._lock:
            self._start_unless_running()
            try:
                self._link.send((exercise, result))
                if not self._link.poll(self.limit_s):
                    self._end()
                    raise PlotError(f"the plots took more than {self.limit_s:g} s to draw")
                drawn, value = self._link.recv()
            except (EOFError, OSError) as exc:
                self._end()
                raise PlotError("the plotting process ended while drawing") from exc
        if not drawn:
            raise PlotError(value)
        return value

    def start(self) -> None:
        """Start the plotting process now, unless it runs already (it imports what it
        preloads while the caller goes on)."""
        with self._lock:
            self._start_unless_running()

    def close(self) -> None:
        """Kill the process once a drawing under way has ended: between drawings it holds
        nothing to lose, and one still importing what it preloads would notice its link
        closed only seconds later."""
        with self._lock:
            self._end()

    def _start_unless_running(self) -> None:
        """The process, started if it never was or died while idle (the OOM killer)."""
        if self._process is not None and self._process.poll() is None:
            return
        self._end()
        main = (
            "import sys; from grader.plots import serve_plots; sys.exit(serve_plots(sys.argv[1:]))"
        )
        argv = [sys.executable, "-c", main, "--nice", str(self.nice)]
        argv += [arg for path in self.preload for arg in ("--preload", str(path))]
        self._process, self._link = start_linked(argv, stdin=subprocess.DEVNULL)

    def _end(self) -> None:
        """Close the link and kill and reap the process: it is idle, ended, or drawing past
        its limit, so it holds nothing to lose."""
        if self._link is not None:
            self._link.close()
            self._link = None
        if self._process is not None:
            self._process.kill()  # nothing, once it has ended on its own
            self._process.wait()
            self._process = None
