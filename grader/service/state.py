"""What the service holds while it runs: the store, metrics, the waiters for verdicts, and
in the embedded deployment a grading node of its own.

Built by the app's lifespan and reached by routers as `request.app.state.service`.

  embedded (SQLite):       the store migrates itself; a warm Grader is started on a
                           background thread (/healthz is 503 until it is ready) and a
                           GradingNode in this process claims the gradings
  distributed (PostgreSQL): an API node. The schema must be current already; no grader, no
                           sandbox, no torch: `gspo-grader worker` processes claim the
                           gradings, and a verdict's NOTIFY wakes the request waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from datetime import UTC, datetime, timedelta

from grader.mistakes import Signatures, cold_grade_all
from grader.node import GradingNode, Metrics, build_graders, node_name, recover_lost
from grader.service.background import end_tasks
from grader.settings import Settings
from grader.store import VERDICT_CHANNEL, Admission, Store, open_store
from grader.store.listener import Listener

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 600.0
PRUNE_CLOSE_WAIT_S = 10.0  # at close, a prune under way (one DELETE) gets this long to end
POLL_S = 1.0  # a waiting request also reads its grading this often


def admission_of(settings: Settings) -> Admission:
    """Distributed: what waits for any grading node of the cluster. Embedded: this process's
    grading slots and the places waiting for them. Runs fill at most half of the queue (on
    a cluster at least one place, or no Run could ever wait)."""
    if settings.distributed:
        capacity, count_grading = settings.max_queue, False
        runs = max(1, settings.max_queue // 2)
    else:
        capacity, count_grading = settings.max_concurrent + settings.max_queue, True
        runs = settings.max_concurrent + settings.max_queue // 2
    return Admission(capacity, min(runs, capacity), settings.max_per_student,
                     names_per_hour=settings.names_per_hour,
                     count_grading=count_grading)  # fmt: skip


class ServiceState:
    """Owns every long-lived part; `close()` releases them in reverse order of need."""

    def __init__(self, settings: Settings, grader=None, draw=None):
        self.settings = settings
        self.metrics = Metrics()
        self.admission = admission_of(settings)
        self.start_error: str | None = None
        self.grader = None
        self.shared_grader = None  # the judges that may take regrade work (node/lanes.py)
        self.owns_grader = False
        self.node: GradingNode | None = None
        self.listener: Listener | None = None
        self._warmed = settings.distributed
        self._warmup: threading.Thread | None = None
        self._pruner: asyncio.Task | None = None
        self._closing = asyncio.Event()  # set by close: the pruner stops between rounds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: dict[str, set[asyncio.Event]] = {}
        url = settings.resolved_database_url
        self.store: Store = open_store(url, migrate=not settings.distributed)
        grade_all = cold_grade_all if settings.distributed else self._grade_all
        self.signatures = Signatures(settings.data_dir / "mistakes", grade_all)
        if settings.distributed:
            self.listener = Listener(url, VERDICT_CHANNEL, self.finished)
            return
        self.owns_grader = grader is None
        if grader is None:
            sizes = (settings.max_concurrent, settings.pool_size)
            grader, self.shared_grader = build_graders(settings, self.metrics, *sizes)
        self.grader = grader
        recover_lost(self.store, 0.0)  # gradings of an earlier run of this process
        self.node = GradingNode(self.store, self.grader, self.metrics, node_name(),
                                settings.max_concurrent, settings.heartbeat_seconds,
                                settings.stalled_seconds, on_finished=self.finished,
                                live_judges=settings.live_judges,
                                shared_grader=self.shared_grader,
                                regrade_lull_s=settings.regrade_lull_seconds,
                                reuse=settings.verdict_reuse(), draw=draw)  # fmt: skip
        self._warmup = threading.Thread(target=self._start_grader, name="grader-warmup")
        self._warmup.start()

    def _grade_all(self, paths, exercise_id: str):
        """The known mistakes' reports, graded by this process's warm grader."""
        grade = self.grader.grade
        return [grade(p.read_text(), "submit", exercise=exercise_id, name=p.name) for p in paths]

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.listener is not None:
            self.listener.start()
        self._pruner = asyncio.create_task(self._prune_runs(), name="prune-runs")

    @property
    def ready(self) -> bool:
        """True from the first moment the grader's pools are all warm (always, on an API
        node). It then stays True: a judge being recycled briefly lowers the grader's own
        `ready`, but the others keep grading, so the service should not refuse work."""
        if not self._warmed and self.start_error is None:
            self._warmed = all(getattr(g, "ready", False) for g in self._graders())
        return self._warmed

    def pool_size(self) -> int:
        try:
            return sum(int(g.stats()["pool_size"]) for g in self._graders())
        except Exception:
            return self.settings.pool_size

    def _graders(self) -> list:
        return [g for g in (self.grader, self.shared_grader) if g is not None]

    def queued(self) -> None:
        """A grading was queued: the embedded node looks at once (nodes of the cluster are
        woken by the database's NOTIFY)."""
        if self.node is not None:
            self.node.wake()

    def finished(self, grading_id: str) -> None:
        """A grading's report is written (called from any thread): wake its waiters."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake, grading_id)

    async def wait(self, grading_id: str, timeout_s: float) -> bool:
        """True once the grading is finished, False after `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        event = asyncio.Event()
        self._waiters.setdefault(grading_id, set()).add(event)
        try:
            while not await self._is_finished(grading_id):
                left = deadline - loop.time()
                if left <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(left, POLL_S))
                event.clear()
            return True
        finally:
            waiters = self._waiters.get(grading_id, set())
            waiters.discard(event)
            if not waiters:
                self._waiters.pop(grading_id, None)

    def gauges(self) -> dict[str, tuple[str, float]]:
        try:
            waiting = float(self.store.waiting())
        except Exception:
            waiting = -1.0
        gauges = {"gspo_grader_queue_depth": ("Gradings waiting in the queue.", waiting)}
        if self.node is not None:
            gauges["gspo_grader_in_flight"] = ("Gradings running now.", self.node.in_flight)
        return gauges

    async def close(self) -> None:
        self._closing.set()
        if self._pruner is not None:  # a prune under way ends before the store closes
            await end_tasks([self._pruner], PRUNE_CLOSE_WAIT_S)
        if self._warmup is not None:
            await asyncio.to_thread(self._warmup.join)
        if self.node is not None:
            await asyncio.to_thread(self.node.close)
        if self.listener is not None:
            await asyncio.to_thread(self.listener.close)
        if self.owns_grader:
            for grader in self._graders():
                grader.close()
        self.store.close()
        grader = "grader" if self.owns_grader else "(no grader of its own)"
        log.info("service closed: grading node, %s and store", grader)

    def _wake(self, grading_id: str) -> None:
        for event in self._waiters.get(grading_id, ()):
            event.set()

    async def _is_finished(self, grading_id: str) -> bool:
        try:
            grading = await asyncio.to_thread(self.store.grading, grading_id)
        except Exception:
            return False  # the database is away for a moment; keep waiting until the deadline
        return grading is not None and grading.status in ("done", "ungradable")

    def _start_grader(self) -> None:
        for grader in self._graders():
            if getattr(grader, "ready", False):
                continue
            try:
                grader.start()
            except Exception as exc:
                log.exception("the grader failed to start")
                self.start_error = f"{type(exc).__name__}: {exc}"
                return
        self.node.start()

    async def _prune_runs(self) -> None:
        """Runs are kept `run_retention_hours` (for their plots), then deleted."""
        while not self._closing.is_set():
            cutoff = datetime.now(UTC) - timedelta(hours=self.settings.run_retention_hours)
            try:
                await asyncio.to_thread(self.store.prune_runs, cutoff.isoformat())
            except Exception:
                log.warning("could not prune old Runs", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), PRUNE_EVERY_S)
