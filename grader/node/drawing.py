"""How a grading node draws the toy's plots, after the verdict, for the database to keep.

The drawing itself is grader/plots.py (each exercise's own `render_plots`). An API node
imports no torch (experiment.py does), so it only reads the stored PNGs.

A node draws in a child process of its own, the Plotter, at a lower CPU priority than its
judges: a plot costs about as much CPU as three gradings (0.7-1.1 s for the GSPO toy's
three, mostly matplotlib's layout and text), so under a class's load the verdicts come first
and the plots follow, and matplotlib never holds the GIL of the process that serves the API
(the embedded service's).

`Drawings` is what a node draws and when: each graded result's plots, the reference
previews, and plots that no node stored (their node stopped or died first), which a
finished grading names (`plots_key`) so they can be found later.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

from grader.exercise import Exercise, catalog
from grader.judge.link import start_linked
from grader.node.metrics import Metrics
from grader.plots import PLOTS_NICE, PlotError, draw_pngs, toy_preview
from grader.report import Artifacts, Report
from grader.store import PREVIEW_DATA, Store, ago, artifacts_key, preview_key

log = logging.getLogger(__name__)

# Plots that no node drew (it stopped or died first) are looked for among the gradings
# finished in the last day: a report is rarely opened again later, and a look stays short.
REDRAW_WITHIN_S = 24 * 3600.0
# ... finished at least this long ago, except when a node starts: a result graded a moment
# ago is most likely still waiting to be drawn on the node that graded it.
REDRAW_AFTER_S = 120.0
REDRAW_EVERY_S = 300.0  # a running node looks this often
REDRAW_BATCH = 100  # sets of plots one look draws at most (about a second of CPU each)


def plots_key(exercise_id: str, report: Report) -> str | None:
    """The key of the plots a graded report's toy needs, or None when it needs none."""
    exercise = catalog().get(exercise_id)
    if exercise is None or not exercise.plots or report.artifacts is None:
        return None
    return artifacts_key(exercise_id, report.artifacts.data)


def reference_preview(exercise: Exercise, draw=draw_pngs) -> dict[str, bytes]:
    """The reference preview as it is stored: `toy_preview`'s plots (drawn by `draw`), and
    its Artifacts as JSON under PREVIEW_DATA. `draw` may be a Plotter: then the toy's run
    is the plotting process's too."""
    if isinstance(draw, Plotter):
        pngs, data = draw.preview(exercise)
    else:
        pngs, data = toy_preview(exercise, draw)
    return pngs | {PREVIEW_DATA: data.encode()}


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
        pngs, data = plotter.preview(exercise)  # the reference's toy, run and drawn there
        plotter.interrupt()                # optional: kill it now, mid-drawing too
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
        self._interrupted = False

    def __call__(self, exercise: Exercise, result: dict) -> dict[str, bytes]:
        return self._ask(("draw", exercise, result))

    def preview(self, exercise: Exercise) -> tuple[dict[str, bytes], str]:
        """`toy_preview` in the plotting process: the toy's run through the reference
        (a second or two of torch) costs the node's own process nothing."""
        return self._ask(("preview", exercise))

    def _ask(self, request: tuple):
        with self._lock:
            if self._interrupted:
                raise PlotError("the plotter was stopped")
            self._start_unless_running()
            try:
                self._link.send(request)
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
            if not self._interrupted:
                self._start_unless_running()

    def interrupt(self) -> None:
        """Kill the process now, even mid-drawing (that drawing raises PlotError), and start
        none again: for a node that is stopping, whose unstored plots a later look draws."""
        self._interrupted = True
        process = self._process  # not under the lock, which a drawing holds
        if process is not None:
            process.kill()  # nothing, once it has been reaped

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


def _report_of(report_json: str) -> Report | None:
    try:
        return Report.model_validate_json(report_json)
    except ValueError:  # pydantic's ValidationError: a report stored by another version
        return None


def _experiments() -> list[Path]:
    """The catalog's experiment.py files, which a node's plotting process imports ahead."""
    return [e.experiment for e in catalog().values() if e.experiment.is_file()]


class Drawings:
    """What a grading node draws after its verdicts, each set stored once per key, on two
    threads: one draws graded results' plots, which someone is about to look at; the other,
    at lower precedence, the reference previews and plots that no node drew.

        drawings = Drawings(store, metrics)     # its Plotter starts (or pass `draw`)
        drawings.result("gspo", report, key)    # queued; drawn unless stored already
        drawings.preview("gspo", version)       # the reference preview of this version
        drawings.look_for_missing(after_s=0)    # queued: draw_missing, unless one waits
        drawings.close()                        # its own Plotter killed, threads ended

    A key whose drawing failed (PlotError) is not tried again by this node's looks."""

    def __init__(self, store: Store, metrics: Metrics, draw: Callable | None = None):
        self.store, self.metrics = store, metrics
        self._plotter = None if draw is not None else Plotter(preload=_experiments())
        self.draw = draw if draw is not None else self._plotter
        self._results = ThreadPoolExecutor(1, thread_name_prefix="plots")
        self._later = ThreadPoolExecutor(1, thread_name_prefix="previews")
        self._lock = threading.Lock()
        self._queued: set[str] = set()  # results' keys queued or drawing on `_results`
        self._failed: set[str] = set()
        self._looking = False  # a draw_missing is queued or under way
        self._closed = threading.Event()
        if self._plotter is not None:  # it imports matplotlib and the toys while judges start
            self._plotter.start()

    def result(self, exercise_id: str, report: Report, key: str | None) -> None:
        """Draw a graded report's plots, stored under `key` (its verdict's plots_key; None:
        there are none to draw)."""
        if key is None:
            return
        with self._lock:
            self._queued.add(key)
        self._results.submit(self._draw_result, catalog()[exercise_id], report.artifacts, key)

    def preview(self, exercise_id: str, version: str | None) -> None:
        self._later.submit(self._draw_preview, exercise_id, version)

    def look_for_missing(self, after_s: float = REDRAW_AFTER_S) -> None:
        with self._lock:
            if self._looking or self._closed.is_set():
                return
            self._looking = True
        self._later.submit(self._look, after_s)

    def draw_missing(self, after_s: float = REDRAW_AFTER_S) -> int:
        """Draw the plots of gradings finished in the last REDRAW_WITHIN_S, at least
        `after_s` ago, that are not stored, newest first; how many sets were drawn. It stops
        early when a graded result's plots wait (they come first; the next look goes on) or
        the node closes."""
        drawn = 0
        for wanted in self.store.plots_wanted(ago(REDRAW_WITHIN_S), ago(after_s), REDRAW_BATCH):
            with self._lock:
                if self._queued or self._closed.is_set():
                    break
                if wanted.key in self._failed:
                    continue
            exercise = catalog().get(wanted.exercise)
            report = _report_of(wanted.report_json)
            if exercise is None or report is None or plots_key(exercise.id, report) != wanted.key:
                with self._lock:  # an exercise gone or changed, a report this code cannot read
                    self._failed.add(wanted.key)
                continue
            drawn += self._draw(exercise, report.artifacts.data, wanted.key)
        return drawn

    def close(self) -> None:
        """Drawings not begun are dropped and the node's own plotting process is killed at
        once (a later look draws a result's plots again, the next start a preview); close
        returns once the threads are done, since they write to the store, which its owner
        closes next."""
        self._closed.set()
        executors = (self._results, self._later)
        for executor in executors:
            executor.shutdown(wait=False, cancel_futures=True)
        if self._plotter is not None:
            self._plotter.interrupt()
        for executor in executors:
            executor.shutdown()  # the drawing under way, if any, has ended
        if self._plotter is not None:
            self._plotter.close()

    def _draw_result(self, exercise: Exercise, artifacts: Artifacts, key: str) -> None:
        try:
            self._draw(exercise, artifacts.data, key)
        finally:
            with self._lock:
                self._queued.discard(key)

    def _draw(self, exercise: Exercise, result: dict, key: str) -> bool:
        """Draw and store one set of plots unless it is stored; True when this drew it."""
        try:
            drawn = not self.store.has_plots(key)
            if drawn:
                self.store.save_plots(key, self.draw(exercise, result))
            self.metrics.observe_plots(drawn)
            return drawn
        except PlotError:
            if self._closed.is_set():  # its plotting process was stopped with the node
                return False
            with self._lock:
                self._failed.add(key)
            log.exception("the plots of %s could not be drawn", key)
        except Exception:
            if not self._closed.is_set():  # a closed node's store is gone: nothing to say
                log.exception("the plots of %s could not be stored", key)
        return False

    def _look(self, after_s: float) -> None:
        try:
            drawn = self.draw_missing(after_s)
            if drawn:
                log.info("drew %d sets of plots that no node had drawn", drawn)
        except Exception:
            if not self._closed.is_set():
                log.exception("could not look for plots no node drew")
        finally:
            with self._lock:
                self._looking = False

    def _draw_preview(self, exercise_id: str, version: str | None) -> None:
        """The exercise's reference preview, once per exercise version (neither a grading
        nor a graded result's plots wait for it; Figures are thread-safe)."""
        exercise = catalog().get(exercise_id)
        key = preview_key(exercise_id, version)
        if self._closed.is_set() or exercise is None or not exercise.experiment.is_file():
            return
        try:
            if not self.store.has_plots(key):
                self.store.save_plots(key, reference_preview(exercise, self.draw))
        except Exception:
            if not self._closed.is_set():
                log.exception("the reference preview of %s could not be drawn", exercise_id)
