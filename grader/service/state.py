"""What the service holds while it runs: the grader, the store, the queue, metrics and plots.

Built by the app's lifespan and reached by routers as `request.app.state.service`. The
grader is warmed up on a background thread, so the server answers /healthz (503) at once
and turns 200 when the sandbox pools are ready.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from grader.exercise import default_exercise
from grader.report import Report
from grader.service.grading_queue import GradingQueue
from grader.service.metrics import Metrics
from grader.service.plots import PlotRenderer
from grader.service.settings import Settings
from grader.service.store import Store, open_store

log = logging.getLogger(__name__)


class RunCache:
    """Run reports are not stored; the last few are kept so their plots can be fetched."""

    def __init__(self, size: int):
        self._size = size
        self._reports: OrderedDict[str, Report] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, report_id: str, report: Report) -> None:
        with self._lock:
            self._reports[report_id] = report
            while len(self._reports) > self._size:
                self._reports.popitem(last=False)

    def get(self, report_id: str) -> Report | None:
        with self._lock:
            return self._reports.get(report_id)


def build_grader(settings: Settings):
    """The real, warm grader: pre-started judge processes, each with a sandbox worker ready."""
    from grader.judge import Grader

    return Grader(pool_size=settings.pool_size, limits=settings.sandbox_limits())


class ServiceState:
    """Owns every long-lived part; `close()` releases them in reverse order of need."""

    def __init__(self, settings: Settings, grader=None):
        self.settings = settings
        self.owns_grader = grader is None
        self.grader = grader if grader is not None else build_grader(settings)
        self.store: Store = open_store(settings.resolved_database_url, migrate=True)
        self.metrics = Metrics()
        self.plots = PlotRenderer(
            settings.plots_dir, default_exercise().experiment, settings.plot_cache_sets
        )
        self.run_cache = RunCache(settings.run_cache_size)
        self.queue = GradingQueue(
            self.grader, settings.max_concurrent, settings.max_queue, settings.max_per_student
        )
        self.start_error: str | None = None
        self._warmed = False
        self._warmup = threading.Thread(target=self._start_grader, name="grader-warmup")
        self._warmup.start()

    @property
    def ready(self) -> bool:
        """True from the first moment the grader's pools are all warm. It then stays True:
        a judge being recycled or respawned briefly lowers the grader's own `ready`, but the
        others keep grading, so the service should neither refuse work nor look unhealthy."""
        if not self._warmed and self.start_error is None:
            self._warmed = bool(getattr(self.grader, "ready", False))
        return self._warmed

    def pool_size(self) -> int:
        try:
            return int(self.grader.stats().get("pool_size", self.settings.pool_size))
        except Exception:
            return self.settings.pool_size

    def close(self) -> None:
        self._warmup.join()
        self.queue.close()
        self.plots.close()
        if self.owns_grader:
            self.grader.close()
        self.store.close()
        grader = "grader" if self.owns_grader else "(caller's grader left open)"
        log.info("service closed: grading queue, plots, %s and store", grader)

    def _start_grader(self) -> None:
        if getattr(self.grader, "ready", False):
            return
        try:
            self.grader.start()
        except Exception as exc:
            log.exception("the grader failed to start")
            self.start_error = f"{type(exc).__name__}: {exc}"
