"""A worker's stdout and stderr: drained on two threads, capped, marked when cut; and what
a grading's workers printed, put together."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import termios
import threading
import time


class OutputCapture:
    """Drains stdout and stderr on two threads; keeps the first `cap` bytes, drops the rest."""

    def __init__(self, fds: list[int], cap: int) -> None:
        self._cap, self._kept, self._truncated = cap, 0, False
        self._chunks: list[bytes] = []
        self._open = set(fds)  # pipes not yet at EOF
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._drain, args=(fd,), daemon=True) for fd in fds
        ]
        for thread in self._threads:
            thread.start()

    def _drain(self, fd: int) -> None:
        # Wait for data outside the lock, then read and keep it under the lock: bytes are
        # either still in the pipe or kept, never in between, so settle() cannot miss them.
        poller = select.poll()
        poller.register(fd, select.POLLIN)  # hang-up and errors are reported too
        try:
            while True:
                poller.poll()
                with self._lock:
                    chunk = os.read(fd, 65536)  # readable or at its end: never blocks
                    if not chunk:
                        return
                    room = self._cap - self._kept
                    self._truncated |= len(chunk) > room
                    if room > 0:
                        self._chunks.append(chunk[:room])
                        self._kept += min(room, len(chunk))
        finally:
            with self._lock:
                self._open.discard(fd)
                os.close(fd)

    def settle(self, timeout: float) -> None:
        """Wait (at most `timeout`) until the drain threads have kept what the pipes hold."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                pending = sum(_bytes_pending(fd) for fd in self._open)
            if not pending:
                return
            time.sleep(0.002)

    def take(self) -> tuple[str, bool]:
        with self._lock:
            data, self._chunks = b"".join(self._chunks), []
            return data.decode("utf-8", errors="replace"), self._truncated

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)


def _bytes_pending(fd: int) -> int:
    """Bytes waiting in a pipe (FIONREAD); 0 if the pipe cannot be asked."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


class StudentOutput:
    """What every worker of one grading printed, in order, within `cap` characters."""

    def __init__(self, cap: int) -> None:
        self._cap, self._chars, self._truncated = cap, 0, False
        self._parts: list[str] = []

    def collect(self, worker, settle_s: float = 0.0) -> None:
        """Take what `worker` (a WorkerHandle) printed since the last time."""
        text, truncated = worker.take_output(settle_s)
        room = max(self._cap - self._chars, 0)
        self._truncated |= truncated or len(text) > room
        if text[:room]:
            self._parts.append(text[:room])
            self._chars += len(text[:room])

    def text(self) -> tuple[str, bool]:
        return "".join(self._parts), self._truncated
