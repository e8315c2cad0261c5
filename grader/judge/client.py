"""The Grader's handle on one judge process (`python -m grader.judge_process`).

Starts the process with its end of a socketpair as an inherited fd, waits for it to say it
is warm, sends it requests, and reads back reports; kills its whole process group (its
sandbox workers die with their parent) when it hangs, dies or is closed. What the judge
writes to stderr (its log) reaches the grader's stderr (stderr_relay.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

from grader.judge.link import GradingRequest, LinkClosed, receive, send, start_linked
from grader.judge.stats import GradingStats
from grader.judge.stderr_relay import StderrRelay
from grader.report import Report
from grader.sandbox import WAITS, Limits


class JudgeFailed(RuntimeError):
    """The judge process died or broke the protocol: the grader's fault."""


class JudgeTimeout(TimeoutError):
    """The judge did not answer within its grading's time limit and a margin."""


class JudgeClient:
    """One judge process and the link to it."""

    def __init__(
        self,
        limits: Limits | None,
        *,
        warm: bool,
        one_shot: bool,
        spare_workers: int,
        nice: int = 0,
    ) -> None:
        self.gradings = 0
        self.ready = False  # it said it is warm: from then on it reads requests
        self.grading_wall_seconds = (limits or Limits()).grading_wall_seconds
        argv = [sys.executable, "-m", "grader.judge_process"]
        argv += ["--limits", limits.to_json()] if limits is not None else []
        argv += ["--warm"] if warm else []
        argv += ["--one-shot"] if one_shot else ["--spare-workers", str(spare_workers)]
        argv += ["--nice", str(nice)] if nice else []
        self.process, self._link = start_linked(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self._stderr = StderrRelay(self.process.stderr, self.process.pid)
        # held while a thread reads the link: `kill` from another thread (a Grader closed
        # while this judge starts) wakes the reader and closes the fd only after it is done,
        # or the fd's number, free again, could be some other file's when the reader reads
        self._reading = threading.Lock()
        # held while the link's fd number is used or closed: two kills at once (the Grader's
        # close and the starting thread's) must not wake the reader through a number the
        # other has just closed (it may be a new pipe's by then, and its copy kept it open)
        self._closing = threading.Lock()

    def _receive(self, timeout: float) -> dict:
        with self._reading:
            return receive(self._link, timeout)

    def wait_ready(self, timeout: float = WAITS.judge_ready_s) -> None:
        try:
            message = self._receive(timeout)
        except (TimeoutError, LinkClosed, ValueError) as error:
            detail = f"{error}{self.log_tail()}"
            self.kill()
            raise JudgeFailed(f"the judge process did not start: {detail}") from None
        if not message.get("ready"):
            self.kill()
            raise JudgeFailed(f"the judge process sent {message!r} instead of ready")
        self.grading_wall_seconds = float(message["grading_wall_seconds"])
        self.ready = True

    def grade(self, request: GradingRequest) -> tuple[Report, GradingStats]:
        """The judge's Report for `request` and its stats, or JudgeTimeout / JudgeFailed."""
        self.gradings += 1
        timeout = 2 * self.grading_wall_seconds + WAITS.judge_margin_s
        try:
            send(self._link, request.message())
            message = self._receive(timeout)
        except TimeoutError:
            self.kill()
            raise JudgeTimeout(f"no answer within {timeout:g} s") from None
        except (LinkClosed, ValueError) as error:
            detail = f"{error}{self.log_tail()}"
            self.kill()
            raise JudgeFailed(f"the judge process died: {detail}") from None
        if "report" not in message:
            raise JudgeFailed(f"the judge process failed: {message.get('error', message)}")
        stats = GradingStats.from_dict(message.get("stats") or {})
        return Report.model_validate_json(message["report"]), stats

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """Ask the judge to exit; kill it if it does not. One still warming up is killed at
        once: it holds nothing yet, and would read the request only once warm."""
        if self.ready:
            with contextlib.suppress(LinkClosed):
                send(self._link, {"op": "exit"})
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(WAITS.judge_exit_s)
        self.kill()

    def kill(self) -> None:
        """SIGKILL the judge's process group (its sandbox workers die with their parent)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        with self._closing:
            if not self._link.closed:
                _shut_down(self._link.fileno())  # EOF for a thread reading the link now
        with self._reading, self._closing, contextlib.suppress(OSError):
            self._link.close()

    def log_tail(self, limit: int = 1500) -> str:
        """The end of the judge's stderr, for a grader error's detail (a judge that ended
        is given a moment to have its last lines read)."""
        ended = self.process.poll() is not None
        text = self._stderr.tail(limit, wait_s=WAITS.judge_exit_s if ended else 0.0)
        return f"\n{text}" if text else ""


def _shut_down(fd: int) -> None:
    """Shut a socket down in both directions through a copy of its fd (the copy is closed
    whatever happens; the original stays open for its owner to close)."""
    copy = os.dup(fd)
    try:
        end = socket.socket(fileno=copy)
    except OSError:
        os.close(copy)
        return
    with end, contextlib.suppress(OSError):
        end.shutdown(socket.SHUT_RDWR)
