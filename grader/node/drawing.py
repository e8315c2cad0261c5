"""The toy's plots, drawn by a grading node after the verdict and stored in the database.

Each exercise draws its own plots with its own `experiment.render_plots(result, out_dir)`;
their names come from its manifest (`exercise.plots`). An API node imports no torch (and
experiment.py does), so it only reads the stored PNGs.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
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


def warm_plots(exercises) -> None:
    """Import matplotlib and every exercise's experiment before the first job, so the first
    plots are not seconds late."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401

    for exercise in exercises:
        if exercise.experiment.is_file():
            experiment_module(exercise.experiment)
