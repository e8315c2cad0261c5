"""What the service holds while it runs: the store, the queue, metrics and plots, and in
the embedded deployment the grader itself.

Built by the app's lifespan and reached by routers as `request.app.state.service`.

  embedded (SQLite):       the store migrates itself; a warm Grader is started on a
                           background thread (/healthz is 503 until it is ready) and jobs
                           are graded in this process tree (InProcessQueue)
  distributed (PostgreSQL): an API node. The schema must be current already; no grader, no
                           sandbox, no torch: jobs go to procrastinate for `gspo-grader
                           worker` processes, and plots come from the database.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime, timedelta

from grader.service.grading_node import GradingNode
from grader.service.grading_queue import GradingQueue, InProcessQueue
from grader.service.metrics import Metrics
from grader.service.plots import DatabasePlots, PlotRenderer
from grader.service.settings import Settings
from grader.service.store import Admission, Store, open_store

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 600.0


def build_grader(settings: Settings, pool_size: int | None = None):
    """The real, warm grader: pre-started judge processes, each with a sandbox worker ready."""
    from grader.judge import Grader

    return Grader(pool_size=pool_size or settings.pool_size, limits=settings.sandbox_limits())


class ServiceState:
    """Owns every long-lived part; `close()` releases them in reverse order of need."""

    def __init__(self, settings: Settings, grader=None):
        self.settings = settings
        self.metrics = Metrics()
        if settings.distributed:  # what waits for any grading node of the cluster
            self.admission = Admission(settings.max_queue, settings.max_per_student)
        else:  # this process's grading slots and the places waiting for them
            capacity = settings.max_concurrent + settings.max_queue
            self.admission = Admission(capacity, settings.max_per_student, capacity)
        self.start_error: str | None = None
        self.grader = None
        self.owns_grader = False
        self._warmed = settings.distributed
        self._warmup: threading.Thread | None = None
        self._pruner: asyncio.Task | None = None
        url = settings.resolved_database_url
        self.store: Store = open_store(url, migrate=not settings.distributed)
        self.queue: GradingQueue
        if settings.distributed:
            from grader.service.procrastinate_queue import ProcrastinateQueue

            self.queue = ProcrastinateQueue(url, self.store)
            self.plots = DatabasePlots(self.store)
            return
        self.owns_grader = grader is None
        self.grader = grader if grader is not None else build_grader(settings)
        node = GradingNode(self.store, self.grader, self.metrics)
        self.queue = InProcessQueue(node, settings.max_concurrent)
        self.plots = PlotRenderer(settings.plots_dir, settings.plot_cache_sets)
        self._warmup = threading.Thread(target=self._start_grader, name="grader-warmup")
        self._warmup.start()

    async def start(self) -> None:
        await self.queue.start()
        self._pruner = asyncio.create_task(self._prune_runs(), name="prune-runs")

    @property
    def ready(self) -> bool:
        """True from the first moment the grader's pools are all warm (always, on an API
        node). It then stays True: a judge being recycled briefly lowers the grader's own
        `ready`, but the others keep grading, so the service should not refuse work."""
        if not self._warmed and self.start_error is None:
            self._warmed = bool(getattr(self.grader, "ready", False))
        return self._warmed

    def pool_size(self) -> int:
        try:
            return int(self.grader.stats().get("pool_size", self.settings.pool_size))
        except Exception:
            return self.settings.pool_size

    async def close(self) -> None:
        if self._pruner is not None:
            self._pruner.cancel()
        if self._warmup is not None:
            await asyncio.to_thread(self._warmup.join)
        await self.queue.close()
        self.plots.close()
        if self.owns_grader:
            self.grader.close()
        self.store.close()
        grader = "grader" if self.owns_grader else "(no grader of its own)"
        log.info("service closed: grading queue, plots, %s and store", grader)

    def _start_grader(self) -> None:
        if getattr(self.grader, "ready", False):
            return
        try:
            self.grader.start()
        except Exception as exc:
            log.exception("the grader failed to start")
            self.start_error = f"{type(exc).__name__}: {exc}"

    async def _prune_runs(self) -> None:
        """Run reports are kept `run_retention_hours` (for their plots), then deleted."""
        while True:
            cutoff = datetime.now(UTC) - timedelta(hours=self.settings.run_retention_hours)
            try:
                await asyncio.to_thread(self.store.prune_runs, cutoff.isoformat())
            except Exception:
                log.warning("could not prune old Run reports", exc_info=True)
            await asyncio.sleep(PRUNE_EVERY_S)
