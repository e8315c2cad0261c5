"""The line protocol between the Grader and its judge processes.

One JSON object per line over a socketpair (the judge's end is passed as an inherited fd, so
pytest's output capture of fd 1/2 never touches it). Both ends are trusted grader code; the
student's data never travels here except inside the finished Report.

    judge -> grader   {"ready": true, "pid": N}           once torch, pytest and the suites are in
    grader -> judge   {"op": "grade", "source": ..., "filename": ..., "mode": ..., "tiers": ...}
    judge -> grader   {"report": {...}}                   the Report as JSON
    grader -> judge   {"op": "exit"}  (or EOF)            the judge exits
"""

from __future__ import annotations

import json
import socket
from typing import Any


class ChannelClosed(ConnectionError):
    """The other end went away (the judge process died or closed the socket)."""


class Channel:
    """JSON lines over a connected stream socket."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._reader = sock.makefile("rb")

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.sendall(json.dumps(message).encode("utf-8") + b"\n")
        except OSError as error:
            raise ChannelClosed(f"cannot send: {error}") from error

    def receive(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message; TimeoutError after `timeout` seconds; ChannelClosed on EOF."""
        self.sock.settimeout(timeout)
        try:
            line = self._reader.readline()
        except TimeoutError:
            raise
        except OSError as error:
            raise ChannelClosed(f"cannot receive: {error}") from error
        if not line:
            raise ChannelClosed("the other end closed the channel")
        return json.loads(line)

    def close(self) -> None:
        self._reader.close()
        self.sock.close()
