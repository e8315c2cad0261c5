"""The grading queue: where admitted jobs wait for a grading node. One interface, two
implementations, one per deployment:

    InProcessQueue       embedded: the judges live in this process tree; jobs wait in memory
                         and `max_concurrent` of them are graded at once on threads
    ProcrastinateQueue   distributed (procrastinate_queue.py): jobs wait in PostgreSQL and
                         `gspo-grader worker` processes take them

    await queue.put(job, admit)       # admit(enqueue): the store's transaction for the row;
                                      # a queue in the same database writes its job in it
    finished = await queue.wait(job, timeout_s)   # True once the verdict is written

Admission (a full queue, one Submit in flight per student) is decided by the database in
`admit`, so it holds across API nodes; the queues only carry jobs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from grader.service.grading_node import GradingNode, Job
from grader.service.store import Enqueue, Store

log = logging.getLogger(__name__)

FINISHED = ("done", "ungradable")

Admit = Callable[[Enqueue | None], None]


class GradingQueue(Protocol):
    async def start(self) -> None: ...
    async def put(self, job: Job, admit: Admit) -> None: ...
    async def wait(self, job: Job, timeout_s: float) -> bool: ...
    def gauges(self) -> dict[str, tuple[str, float]]: ...
    async def close(self) -> None: ...


class InProcessQueue:
    """Jobs in an asyncio queue, graded by `concurrency` consumers on their own threads.

    Jobs left unfinished by a previous run of the service (killed while grading) are
    queued again at start: at-least-once, as in the distributed deployment."""

    def __init__(self, node: GradingNode, concurrency: int):
        self.node = node
        self.store: Store = node.store
        self.concurrency = concurrency
        self.in_flight = 0
        self._jobs: asyncio.Queue[Job] = asyncio.Queue()
        self._events: dict[str, asyncio.Event] = {}
        self._consumers: list[asyncio.Task] = []
        self._executor = ThreadPoolExecutor(concurrency, thread_name_prefix="grading")

    @property
    def waiting(self) -> int:
        return self._jobs.qsize()

    async def start(self) -> None:
        for kind, job_id in await asyncio.to_thread(self.store.unfinished):
            self._jobs.put_nowait(Job(kind, job_id))
        self._consumers = [asyncio.create_task(self._consume()) for _ in range(self.concurrency)]

    async def put(self, job: Job, admit: Admit) -> None:
        await asyncio.to_thread(admit, None)
        self._events[job.key] = asyncio.Event()  # set when its verdict is written
        self._jobs.put_nowait(job)

    async def wait(self, job: Job, timeout_s: float) -> bool:
        event = self._events.get(job.key)
        if event is None:  # finished already, or queued by an earlier run of the service
            event = self._events[job.key] = asyncio.Event()
            record = await asyncio.to_thread(self.store.get, job.kind, job.job_id)
            if record is not None and record.status in FINISHED:
                self._events.pop(job.key, None)
                return True
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def gauges(self) -> dict[str, tuple[str, float]]:
        return {
            "gspo_grader_queue_depth": ("Gradings waiting for a slot.", self.waiting),
            "gspo_grader_in_flight": ("Gradings running now.", self.in_flight),
        }

    async def close(self) -> None:
        for task in self._consumers:
            task.cancel()
        await asyncio.gather(*self._consumers, return_exceptions=True)
        self._executor.shutdown(wait=True, cancel_futures=True)

    async def _consume(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = await self._jobs.get()
            self.in_flight += 1
            try:
                outcome = await loop.run_in_executor(self._executor, self.node.run, job)
            except Exception:
                log.exception("grading %s failed outside the grader", job.key)
                outcome = "finished"  # its row stays in flight; a restart takes it again
            finally:
                self.in_flight -= 1
            if outcome == "retry":
                self._jobs.put_nowait(job)
                continue
            event = self._events.pop(job.key, None)
            if event is not None:
                event.set()
