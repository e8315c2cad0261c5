"""Failed attempts counted per client address over a sliding minute (one API node's memory).

failures = FailureLimit(per_minute=10)
failures.blocked(address)   # seconds until the address may try again, or 0
failures.record(address)    # a failed attempt (e.g. a wrong instructor token)
"""

from __future__ import annotations

import threading
import time
from collections import deque

WINDOW_S = 60.0
MAX_ADDRESSES = 10_000  # beyond this, addresses with no recent failure are forgotten


class FailureLimit:
    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def blocked(self, address: str) -> float:
        """0 while the address has had fewer than `per_minute` failures in the last minute;
        otherwise the seconds until its oldest one leaves the window."""
        with self._lock:
            now = time.monotonic()
            recent = self._prune(address, now)
            if len(recent) < self.per_minute:
                return 0.0
            return max(recent[0] + WINDOW_S - now, 1.0)

    def record(self, address: str) -> None:
        with self._lock:
            now = time.monotonic()
            if len(self._failures) >= MAX_ADDRESSES:
                for other in list(self._failures):
                    if not self._prune(other, now):
                        del self._failures[other]
            self._failures.setdefault(address, deque()).append(now)

    def _prune(self, address: str, now: float) -> deque[float]:
        recent = self._failures.get(address, deque())
        while recent and recent[0] <= now - WINDOW_S:
            recent.popleft()
        return recent
