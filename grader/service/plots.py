"""Plots of the toy experiment, drawn after the verdict, served by report id.

The verdict never waits for matplotlib. Each exercise draws its own plots with its own
`experiment.render_plots(result, out_dir)`; their names come from its manifest
(`exercise.plots`). Plots are keyed by the exercise and the content of the artifacts they
show, so the many correct submissions of a class, whose toy results are identical, share
one set. Two homes, one per deployment:

  - PlotRenderer (embedded): PNG files in the data dir, drawn on one background thread
    (matplotlib is not thread-safe) eagerly after a verdict while the renderer is idle,
    else on first request. Each set is written to a scratch folder and renamed into
    place, so no reader sees half a file; past `max_sets` sets the oldest are deleted
    (a report keeps its artifacts, so a deleted set is drawn again on request).
  - DatabasePlots (distributed): PNG bytes in the database, drawn by a grading node (the
    API node imports no torch, and experiment.py does); until they are there a request
    answers 503 with Retry-After.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from grader.exercise import Exercise, load_module

log = logging.getLogger(__name__)

MAX_EAGER_PENDING = 4  # beyond this many renders in flight, draw only on request


class PlotError(Exception):
    """The plots of a report could not be drawn."""


class PlotPending(Exception):
    """The plots are not drawn yet; ask again in a few seconds."""


def plot_url(report_id: str, name: str) -> str:
    return f"/api/reports/{report_id}/plots/{name}.png"


def plot_names(exercise: Exercise) -> tuple[str, ...]:
    return tuple(plot.name for plot in exercise.plots)


def artifacts_key(exercise_id: str, result: dict) -> str:
    """A digest of the exercise and what its plots show."""
    text = json.dumps([exercise_id, result], sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_modules: dict[Path, object] = {}
_modules_lock = threading.Lock()


def experiment_module(path: Path):
    """The exercise's experiment.py, imported once per process (it is trusted code)."""
    with _modules_lock:
        if path not in _modules:
            _modules[path] = load_module(
                path, f"experiment_{hashlib.sha1(bytes(path)).hexdigest()[:8]}"
            )
        return _modules[path]


def draw(experiment: Path, result: dict, names: tuple[str, ...], out_dir: Path) -> None:
    """Draw every named plot of `result` into out_dir/NAME.png, or raise PlotError."""
    try:
        experiment_module(experiment).render_plots(result, out_dir)
    except Exception as exc:
        raise PlotError(f"the plots could not be drawn: {exc}") from exc
    missing = [n for n in names if not (out_dir / f"{n}.png").is_file()]
    if missing:
        raise PlotError(f"render_plots did not write {', '.join(missing)}")


def draw_pngs(exercise: Exercise, result: dict) -> dict[str, bytes]:
    """Draw the plots of `result` and return them as PNG bytes by name (grading nodes)."""
    names = plot_names(exercise)
    with tempfile.TemporaryDirectory(prefix="gspo-plots-") as scratch:
        draw(exercise.experiment, result, names, Path(scratch))
        return {n: (Path(scratch) / f"{n}.png").read_bytes() for n in names}


class DatabasePlots:
    """The distributed deployment's plots: stored by grading nodes, read by any API node."""

    def __init__(self, store):
        self.store = store

    async def png(self, exercise: Exercise, result: dict, name: str, wait_s: float) -> bytes:
        key = artifacts_key(exercise.id, result)
        data = await asyncio.to_thread(self.store.plot_png, key, name)
        if data is None:
            raise PlotPending
        return data

    def after_verdict(self, exercise: Exercise, result: dict) -> None:
        """Grading nodes draw these (a job queued with the verdict)."""

    def close(self) -> None:
        pass


class PlotRenderer:
    """The embedded deployment's plots: drawn in this process, cached as files."""

    def __init__(
        self,
        plots_dir: Path,
        max_sets: int = 1000,
        experiment_for: Callable[[Exercise], Path] | None = None,
    ):
        self.plots_dir = plots_dir
        self.max_sets = max_sets
        self._experiment_for = experiment_for or (lambda exercise: exercise.experiment)
        self._lock = threading.Lock()
        self._pending: dict[str, Future] = {}
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="plots")
        self._remove_scratch()

    async def png(self, exercise: Exercise, result: dict, name: str, wait_s: float) -> bytes:
        """The PNG, drawn now if needed (waiting up to wait_s; then PlotPending)."""
        path = self.plots_dir / artifacts_key(exercise.id, result) / f"{name}.png"
        if not path.is_file():
            future = self.schedule(exercise, result)
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), wait_s)
            except TimeoutError:
                raise PlotPending from None
        return await asyncio.to_thread(path.read_bytes)

    def after_verdict(self, exercise: Exercise, result: dict) -> None:
        self.schedule(exercise, result, eager=True)

    def schedule(self, exercise: Exercise, result: dict, eager: bool = False) -> Future | None:
        """Start drawing `result` unless it is being drawn already. An eager request is
        dropped (None) while the renderer is busy or the set is drawn already."""
        key = artifacts_key(exercise.id, result)
        names = plot_names(exercise)
        if eager and self._drawn(key, names):
            return None
        with self._lock:
            future = self._pending.get(key)
            if future is not None:
                return future
            if eager and len(self._pending) >= MAX_EAGER_PENDING:
                return None
            future = self._executor.submit(self._render, key, exercise, result)
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

    def _drawn(self, key: str, names: tuple[str, ...]) -> bool:
        return all((self.plots_dir / key / f"{name}.png").is_file() for name in names)

    def _render(self, key: str, exercise: Exercise, result: dict) -> Path:
        final = self.plots_dir / key
        names = plot_names(exercise)
        if self._drawn(key, names):
            return final
        scratch = self.plots_dir / f".{key}.{uuid.uuid4().hex}.tmp"
        scratch.mkdir(parents=True)
        try:
            draw(self._experiment_for(exercise), result, names, scratch)
            shutil.rmtree(final, ignore_errors=True)
            scratch.rename(final)
            self._prune(keep=key)
        except PlotError:
            log.exception("plots %s could not be drawn", key)
            raise
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


def _is_plot_set(entry: Path) -> bool:
    return entry.is_dir() and not entry.name.startswith(".")


def _mtime(entry: Path) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0
