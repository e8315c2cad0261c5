"""An exercise's plots, drawn from a toy result, and the process that draws them for a node.

Each exercise draws its own plots with its own `experiment.render_plots(result, out_dir)`;
their names come from its manifest (`exercise.plots`). `draw_pngs` draws them in this
process, `toy_preview` runs the toy through the exercise's reference and draws that;
`serve_plots` is the loop of a node's plotting process (grader/node/drawing.py starts it),
which does either. This module imports none of the node's layers (its database, its
judges): a plotting process loads matplotlib, the exercises' experiment.py files (torch with
them) and, for a preview, the report's model and the reference, and nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from grader.exercise import Exercise, load_module

# A plotting process's niceness. The judges grade at 0 (regradings' at
# Settings.regrade_nice): at 10 a plot gets about a tenth of a busy core's share, so it still
# advances under a long burst of Submits, and takes whatever the judges leave idle.
PLOTS_NICE = 10


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


def toy_preview(exercise: Exercise, draw=draw_pngs) -> tuple[dict[str, bytes], str]:
    """The toy run through the exercise's reference solution, by the same experiment and
    artifact path a grading takes: its plots as PNG bytes by name (drawn by `draw`), and its
    Artifacts as JSON."""
    from grader.report.model import Artifacts  # pydantic: a preview's only, not a drawing's

    reference = load_module(exercise.reference, f"{exercise.id}_preview_reference")
    toy = experiment_module(exercise.experiment).run_toy(reference)
    artifacts = Artifacts.of_toy(exercise, toy)
    return draw(exercise, artifacts.data), artifacts.model_dump_json()


def _answer(request: tuple) -> tuple[bool, object]:
    """(True, what `request` asked for) or (False, why not). ("draw", exercise, result):
    draw_pngs; ("preview", exercise): toy_preview."""
    try:
        if request[0] == "preview":
            return True, toy_preview(request[1])
        return True, draw_pngs(request[1], request[2])
    except PlotError as exc:
        return False, str(exc)
    except Exception as exc:  # never the student's: the plots' own code or this machine
        return False, f"the plots could not be drawn: {type(exc).__name__}: {exc}"


def _preload(experiments: list[Path]) -> None:
    """Import matplotlib's drawing modules and the experiments now, not at the first
    drawing; one that fails to import is left to that drawing, which says why."""
    for path in experiments:
        with contextlib.suppress(Exception):
            experiment_module(path)
    with contextlib.suppress(ImportError):  # what a figure and its first savefig need
        import matplotlib.backends.backend_agg
        import matplotlib.figure  # noqa: F401


def serve_plots(argv: list[str]) -> int:
    """The plotting process: answer each request its node sends (`_answer`: plots to draw,
    or a reference preview), one at a time, with (True, the answer) or (False, why not),
    until the node closes the link. The node is trusted and so is what it sends (a report's
    artifacts it parsed itself)."""
    from grader.sandbox.worker.confine import session_follows_niceness

    parser = argparse.ArgumentParser(prog="gspo-plotter", description="a node's plotting process")
    parser.add_argument("--fd", type=int, required=True, help="this end of the node's link")
    parser.add_argument("--nice", type=int, default=PLOTS_NICE)
    parser.add_argument("--preload", type=Path, action="append", default=[],
                        help="an experiment.py to import before the first drawing")  # fmt: skip
    args = parser.parse_args(argv)
    os.nice(args.nice)
    session_follows_niceness()
    link = Connection(args.fd)
    _preload(args.preload)
    while True:
        try:
            request = link.recv()
        except (EOFError, OSError):  # the node closed the link, or is gone
            return 0
        with contextlib.suppress(OSError):
            link.send(_answer(request))
