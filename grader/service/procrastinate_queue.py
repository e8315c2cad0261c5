"""The distributed grading queue: procrastinate jobs in the service's own PostgreSQL.

API nodes only write jobs, inside the transaction that writes the submission's row (no
dual write: both commit or neither does), through a procrastinate App that is never opened
(its jobs go onto the caller's connection). Grading nodes run the tasks (worker.py).
An API node learns that a verdict is written from PostgreSQL's NOTIFY (VerdictListener),
and checks the row every second as well, so a lost notification costs a second at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import procrastinate
import psycopg
from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from grader.service.grading_node import Job
from grader.service.grading_queue import FINISHED, Admit
from grader.service.store import VERDICT_CHANNEL, Enqueue, Store

log = logging.getLogger(__name__)

QUEUE = "grading"
PLOTS_QUEUE = "plots"  # drawn beside the gradings, never in their way
QUEUES = (QUEUE, PLOTS_QUEUE)  # a grading node runs one procrastinate worker for each
GRADE_TASK = "gspo_grader.grade"
PLOTS_TASK = "gspo_grader.draw_plots"


def libpq_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def deferring_app(url: str) -> procrastinate.App:
    """An App that only writes jobs on connections it is handed."""
    return procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=libpq_url(url)))


def job_writer(app: procrastinate.App, task: str, queue: str, **arguments) -> Enqueue:
    """Write a job for `task` on the transaction of a SQLAlchemy connection (psycopg 3)."""

    def write(connection: Connection) -> None:
        raw = connection.connection.driver_connection
        app.configure_task(task, queue=queue, connection=raw).defer(**arguments)

    return write


def grade_job_writer(app: procrastinate.App, job: Job) -> Enqueue:
    return job_writer(app, GRADE_TASK, QUEUE, kind=job.kind, job_id=job.job_id)


class ProcrastinateQueue:
    def __init__(self, url: str, store: Store, poll_s: float = 1.0):
        self.store = store
        self._app = deferring_app(url)
        self._listener = VerdictListener(url, store, poll_s)

    async def start(self) -> None:
        await self._listener.start()

    async def put(self, job: Job, admit: Admit) -> None:
        await asyncio.to_thread(admit, grade_job_writer(self._app, job))

    async def wait(self, job: Job, timeout_s: float) -> bool:
        return await self._listener.wait(job, timeout_s)

    def gauges(self) -> dict[str, tuple[str, float]]:
        try:
            waiting = self.store.waiting()
        except SQLAlchemyError:
            waiting = -1
        return {"gspo_grader_queue_depth": ("Gradings waiting in the whole cluster.", waiting)}

    async def close(self) -> None:
        await self._listener.close()


class VerdictListener:
    """Wakes the requests waiting for a verdict when a grading node NOTIFYs it."""

    def __init__(self, url: str, store: Store, poll_s: float = 1.0):
        self.url = libpq_url(url)
        self.store = store
        self.poll_s = poll_s
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="verdict-listener")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def wait(self, job: Job, timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        event = asyncio.Event()
        self._waiters.setdefault(job.key, set()).add(event)
        try:
            while not await self._finished(job):
                left = deadline - loop.time()
                if left <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(left, self.poll_s))
                event.clear()
            return True
        finally:
            waiters = self._waiters.get(job.key, set())
            waiters.discard(event)
            if not waiters:
                self._waiters.pop(job.key, None)

    async def _finished(self, job: Job) -> bool:
        try:
            record = await asyncio.to_thread(self.store.get, job.kind, job.job_id)
        except SQLAlchemyError:
            return False  # the database is away for a moment; keep waiting until the deadline
        return record is not None and record.status in FINISHED

    async def _listen(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {VERDICT_CHANNEL}")
                    async for note in conn.notifies():
                        for event in self._waiters.get(note.payload, ()):
                            event.set()
            except (psycopg.Error, OSError) as error:
                log.warning("verdict listener lost the database (%s); reconnecting", error)
                await asyncio.sleep(1.0)
