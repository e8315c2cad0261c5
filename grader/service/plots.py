"""Plots of the toy experiment, rendered after the verdict and cached on disk.

The verdict never waits for matplotlib: grading returns the report with plot URLs already
filled in, and the PNGs are drawn on a single background thread (matplotlib is not
thread-safe) by `experiment.render_plots`, loaded by path from the exercise. Each report's
plots are written to a temporary folder and renamed into place, so a reader never sees a
half-written file; after a restart the files are still there, or are drawn again on demand.

Plots are cached by the content of the artifacts they show, so the many correct submissions
of a class, whose toy results are identical, share one set of files. Eager drawing after a
verdict is skipped while the renderer is busy (a burst of submissions); those plots are then
drawn when first requested.

The cache is bounded: past `max_sets` sets of files the oldest are deleted (a report keeps
its artifacts, so a deleted set is drawn again if anyone asks for it), and scratch folders
left by a crash are removed when the renderer starts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from grader.exercise import Exercise, load_module

log = logging.getLogger(__name__)

MAX_EAGER_PENDING = 4  # beyond this many renders in flight, draw only on request


class PlotError(Exception):
    """The plots of a report could not be drawn."""


def plot_url(report_id: str, name: str) -> str:
    return f"/api/reports/{report_id}/plots/{name}.png"


def artifacts_key(result: dict) -> str:
    """A digest of what the plots show."""
    text = json.dumps(result, sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class PlotRenderer:
    """Draws each distinct set of artifacts once, in the background."""

    def __init__(self, plots_dir: Path, exercise: Exercise, max_sets: int = 1000):
        self.plots_dir = plots_dir
        self.max_sets = max_sets
        self.names = tuple(plot.name for plot in exercise.plots)
        self._exercise = exercise
        self._experiment = None
        self._lock = threading.Lock()
        self._pending: dict[str, Future] = {}
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="plots")
        self._remove_scratch()

    @property
    def available(self) -> bool:
        return bool(self.names) and self._exercise.experiment.is_file()

    def path(self, result: dict, name: str) -> Path:
        return self.plots_dir / artifacts_key(result) / f"{name}.png"

    def schedule(self, result: dict, eager: bool = False) -> Future | None:
        """Start drawing `result` (a report's artifacts) unless it is being drawn already.
        An eager request is dropped (None) while the renderer is busy."""
        key = artifacts_key(result)
        if eager and self._drawn(key):
            return None
        with self._lock:
            future = self._pending.get(key)
            if future is not None:
                return future
            if eager and len(self._pending) >= MAX_EAGER_PENDING:
                return None
            future = self._executor.submit(self._render, key, result)
            self._pending[key] = future
        future.add_done_callback(lambda _: self._done(key, future))  # may run at once
        return future

    def close(self) -> None:
        """Drop renders not yet started; one in progress finishes on its own."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _done(self, key: str, future: Future) -> None:
        with self._lock:
            if self._pending.get(key) is future:
                del self._pending[key]

    def _drawn(self, key: str) -> bool:
        return all((self.plots_dir / key / f"{name}.png").is_file() for name in self.names)

    def _render(self, key: str, result: dict) -> Path:
        final = self.plots_dir / key
        if self._drawn(key):
            return final
        scratch = self.plots_dir / f".{key}.{uuid.uuid4().hex}.tmp"
        scratch.mkdir(parents=True)
        try:
            self._module().render_plots(result, scratch)
            missing = [n for n in self.names if not (scratch / f"{n}.png").is_file()]
            if missing:
                raise PlotError(f"render_plots did not write {', '.join(missing)}")
            shutil.rmtree(final, ignore_errors=True)
            scratch.rename(final)
            self._prune(keep=key)
        except Exception as exc:
            log.exception("plots %s could not be drawn", key)
            raise PlotError(f"the plots could not be drawn: {exc}") from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return final

    def _prune(self, keep: str) -> None:
        """Delete the oldest sets beyond `max_sets` (runs on the single render thread)."""
        sets = [entry for entry in self.plots_dir.iterdir() if _is_plot_set(entry)]
        if len(sets) <= self.max_sets:
            return
        sets.sort(key=_mtime)
        for entry in sets[: len(sets) - self.max_sets]:
            if entry.name != keep:
                shutil.rmtree(entry, ignore_errors=True)

    def _remove_scratch(self) -> None:
        if self.plots_dir.is_dir():
            for entry in self.plots_dir.glob(".*.tmp"):
                shutil.rmtree(entry, ignore_errors=True)

    def _module(self):
        if self._experiment is None:
            exercise = self._exercise
            self._experiment = load_module(exercise.experiment, f"{exercise.id}_experiment")
        return self._experiment


def _is_plot_set(entry: Path) -> bool:
    return entry.is_dir() and not entry.name.startswith(".")


def _mtime(entry: Path) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0
