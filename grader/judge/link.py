"""The link between a Grader and its judge processes: what a request is, and how it travels.

One JSON message per frame over a `multiprocessing.connection.Connection` on an inherited
socket (the judge's end is a plain fd, so pytest's output capture never touches it). Both
ends are trusted grader code; student data travels here only as source text and inside the
finished Report. Free of torch and pytest: the service imports it.

    judge -> grader   {"ready": true, "pid": N, "grading_wall_seconds": S}   once, warm
    grader -> judge   {"op": "grade", <GradingRequest fields>}
    judge -> grader   {"report": "<Report as JSON>", "stats": {GradingStats}}
                      | {"error": "<traceback>"}
    grader -> judge   {"op": "exit"} (or EOF)                                the judge exits

`start_linked` starts a process at the other end of such a link: a judge, and a grading
node's plotting process (grader/plots.py), which sends pickles over its own.
"""

from __future__ import annotations

import json
import socket
import subprocess
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import Any


class LinkClosed(ConnectionError):
    """The other end went away (a judge process died, or its Grader did)."""


@dataclass(frozen=True)
class GradingRequest:
    """What to grade and how: the one message a judge receives per grading."""

    source: str
    exercise: str | None = None  # a catalog id or an exercise folder; None: the root one
    mode: str = "submit"  # "run": visible tests only
    tiers: tuple[str, ...] | None = None  # None: every tier the mode allows
    filename: str = "submission.py"
    name: str | None = None  # shown as Report.submission

    def message(self) -> dict[str, Any]:
        fields = asdict(self) | {"tiers": None if self.tiers is None else list(self.tiers)}
        return {"op": "grade", **fields}

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> GradingRequest:
        tiers = message.get("tiers")
        return cls(
            source=message["source"],
            exercise=message.get("exercise"),
            mode=message.get("mode") or "submit",
            tiers=None if tiers is None else tuple(tiers),
            filename=message.get("filename") or "submission.py",
            name=message.get("name"),
        )

    @property
    def wanted(self) -> list[str] | None:
        return None if self.tiers is None else list(self.tiers)


def start_linked(argv: list[str], **popen_options) -> tuple[subprocess.Popen, Connection]:
    """Start `argv` in a session of its own, with `--fd N` appended: its end of a socketpair,
    inherited. The process, and this end as a Connection; `popen_options` go to Popen."""
    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            [*argv, "--fd", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
            **popen_options,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return process, Connection(ours.detach())


def send(link: Connection, message: dict[str, Any]) -> None:
    try:
        link.send_bytes(json.dumps(message).encode("utf-8"))
    except OSError as error:
        raise LinkClosed(f"cannot send: {error}") from error


def receive(link: Connection, timeout: float | None = None) -> dict[str, Any]:
    """The next message; TimeoutError after `timeout` seconds; LinkClosed on EOF."""
    try:
        arrived = timeout is None or link.poll(timeout)
        if arrived:
            return json.loads(link.recv_bytes())
    except (EOFError, OSError) as error:
        raise LinkClosed(f"the other end closed the link: {error}") from None
    raise TimeoutError(f"no message within {timeout:g} s")
