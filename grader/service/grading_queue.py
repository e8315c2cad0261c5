"""The grading queue: a bounded number of gradings in flight, a bounded number waiting.

When both are full the request is refused at once (QueueFull -> 503 + Retry-After) instead
of piling up without bound: a client that retries later is better served than one whose
request times out after minutes in a queue nobody can see.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from grader.report import Report


class QueueFull(Exception):
    """Every grading slot and every waiting place is taken."""


class OwnerBusy(Exception):
    """This owner (a student) already has as many gradings admitted as one may have."""


class GradingQueue:
    """Runs the blocking `grader.grade` on a thread pool, `max_concurrent` at a time."""

    def __init__(self, grader, max_concurrent: int, max_queue: int, per_owner: int = 1):
        self._grader = grader
        self._max_concurrent = max_concurrent
        self._capacity = max_concurrent + max_queue
        self._per_owner = per_owner
        self._admitted = 0  # in flight + waiting
        self._by_owner: dict[str, int] = {}  # owner -> admitted
        self._in_flight = 0
        self._lock = threading.Lock()
        self._slots = asyncio.Semaphore(max_concurrent)
        self._executor = ThreadPoolExecutor(max_concurrent, thread_name_prefix="grading")

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        return self._admitted - self._in_flight

    async def grade(
        self, code: str, mode: str, owner: str | None = None, name: str | None = None
    ) -> tuple[Report, float]:
        """Grade `code`; return the report and the seconds the grader spent on it.

        owner: who asks (a student); one owner may hold at most `per_owner` places, so a
        client that fires many requests at once cannot take the queue from everyone else.
        """
        self._admit(owner)
        try:
            async with self._slots:
                self._in_flight += 1
                try:
                    loop = asyncio.get_running_loop()
                    timed = self._timed
                    return await loop.run_in_executor(self._executor, timed, code, mode, name)
                finally:
                    self._in_flight -= 1
        finally:
            self._release(owner)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _admit(self, owner: str | None) -> None:
        with self._lock:
            if owner is not None and self._by_owner.get(owner, 0) >= self._per_owner:
                raise OwnerBusy
            if self._admitted >= self._capacity:
                raise QueueFull
            self._admitted += 1
            if owner is not None:
                self._by_owner[owner] = self._by_owner.get(owner, 0) + 1

    def _release(self, owner: str | None) -> None:
        with self._lock:
            self._admitted -= 1
            if owner is not None:
                left = self._by_owner.pop(owner) - 1
                if left:
                    self._by_owner[owner] = left

    def _timed(self, code: str, mode: str, name: str | None) -> tuple[Report, float]:
        start = time.perf_counter()
        report = self._grader.grade(code, mode=mode, name=name)
        return report, time.perf_counter() - start
