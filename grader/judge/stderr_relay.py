"""A judge process's stderr, passed on line by line to the grader's own, and its end kept.

The judge logs what an operator must see (a sandbox weaker than bwrap, a zygote that could
not fork, a toy result not stored) on its stderr; the service's log is the grader's stderr.
A thread reads the judge's pipe until it closes, writes every line to the grader's stderr
prefixed with `judge <pid>: `, and keeps the last lines for a JudgeFailed's detail.
It never stops reading while the pipe is open, even if the grader's stderr fails: a full
pipe would block the judge.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import threading
from typing import IO

TAIL_LINES = 40  # kept for a failure's detail (log_tail cuts to its own limit)


class StderrRelay:
    """Drain `pipe` (a judge's stderr, binary) on a daemon thread; see the module text."""

    def __init__(self, pipe: IO[bytes], pid: int, target: IO[str] | None = None) -> None:
        self._pipe = pipe
        self._prefix = f"judge {pid}: "
        self._target = target
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"judge-{pid}-stderr", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # the pipe closed under us
            for raw in iter(self._pipe.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                with self._lock:
                    self._tail.append(line)
                target = self._target or sys.stderr  # looked up late: tests swap sys.stderr
                with contextlib.suppress(OSError, ValueError):
                    target.write(f"{self._prefix}{line}\n")
                    target.flush()
        with contextlib.suppress(OSError):
            self._pipe.close()

    def tail(self, limit: int, wait_s: float = 0.0) -> str:
        """The last `limit` characters read, stripped; wait up to `wait_s` for the pipe to
        close first (a judge that died may still have lines in it)."""
        if wait_s > 0:
            self.join(wait_s)
        with self._lock:
            text = "\n".join(self._tail)
        return text[-limit:].strip()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
