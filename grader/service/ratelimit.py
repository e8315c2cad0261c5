"""Failed attempts counted per client address over one-minute windows (in one API node's
memory): `blocked(address)` is the seconds until it may try again (0: now), `record`
counts a failure."""

from __future__ import annotations

import threading
import time

WINDOW_S = 60.0


class FailureLimit:
    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._windows: dict[str, tuple[float, int]] = {}  # address -> (window start, failures)
        self._lock = threading.Lock()

    def blocked(self, address: str) -> float:
        start, failures = self._windows.get(address, (0.0, 0))
        left = start + WINDOW_S - time.monotonic()
        return max(left, 1.0) if failures >= self.per_minute and left > 0 else 0.0

    def record(self, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._windows = {a: w for a, w in self._windows.items() if w[0] > now - WINDOW_S}
            start, failures = self._windows.get(address, (now, 0))
            self._windows[address] = (start, failures + 1)
