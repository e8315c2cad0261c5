"""The judge's handle on one sandboxed worker: its channel, output, clock, kill and end.

A worker is started one of two ways, and only the way its processes are signalled and reaped
differs, so that part is a `ProcessEnd` of its own:

    spawned   (spawn.py) the judge's own child: SIGKILL to the pid namespace's init (a
              pidfd) and to the launcher's process group, reaped with wait4
    forked    (zygote_client.py) the zygote's grandchild: SIGKILL through a pidfd on its
              init, its end reported by the zygote on a status pipe

Whatever the way, `kill()` leaves nothing behind: after the reap, every process of the
worker's own uid is swept (as root) and its uid slot given back.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import select
import shutil
import signal
import socket
import threading
from typing import Protocol

from grader.sandbox import uids
from grader.sandbox.isolation import Level
from grader.sandbox.output import OutputCapture
from grader.sandbox.worker.contract import EXIT_OUT_OF_MEMORY, WAITS, Limits

# Ending a worker (kill, reap, sweep its uid) takes tens of milliseconds; once a grading
# has its verdict, nobody needs to wait for it: `end_soon` hands it to this thread.
_ender = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gspo-sandbox-ender")


class ProcessEnd(Protocol):
    """How one worker's processes are killed and reaped."""

    def signal_kill(self) -> None:
        """SIGKILL every process of the worker (idempotent; the worker may be gone)."""

    def reap(self, block: bool) -> tuple[int, float] | None:
        """(raw wait status, CPU seconds used) once the worker has ended, else None."""

    def close(self) -> None:
        """After the reap: wait for the pid namespace to empty, release descriptors."""


def describe_signal(signum: int, cpu_used: float, limits: Limits) -> str:
    """A worker's end by a signal, in plain words: the limit it hit, or the signal's name."""
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_used >= limits.cpu_seconds):
        return "killed: CPU time limit"
    if signum == signal.SIGXFSZ:
        return "killed: file size limit"
    try:
        return f"killed by signal {signal.Signals(signum).name}"
    except ValueError:
        return f"killed by signal {signum}"


class WorkerHandle:
    """One sandboxed worker: `.sock` (the judge's end of its fd 3), output, liveness, kill."""

    def __init__(
        self,
        end: ProcessEnd,
        sock: socket.socket,
        output: OutputCapture,
        *,
        limits: Limits,
        level: Level,
        uid: int | None,
        isolation: str,
        pid: int,
        forked: bool = False,
        workdir: str | None = None,
    ) -> None:
        self.sock, self.limits, self.level, self.uid = sock, limits, level, uid
        self.isolation = isolation  # isolation.describe() of this worker
        self.pid, self.forked = pid, forked  # the launcher's pid, or the forked worker's init
        self._end, self._output, self._workdir = end, output, workdir
        self._lock = threading.RLock()
        self._ended: tuple[int, float] | None = None  # (wait status, cpu seconds)
        self._kill_reason: str | None = None
        self._clock: threading.Timer | None = None
        self._cleaned = False

    def take_output(self, settle_s: float = 0.0) -> tuple[str, bool]:
        """stdout+stderr text captured since the last call, and whether any was ever dropped.

        settle_s: first wait up to that long for the drain threads to read what the pipes
        already hold (the student's prints before a reply are in the pipe, thanks to -u).
        """
        if settle_s > 0:
            self._output.settle(settle_s)
        return self._output.take()

    def alive(self) -> bool:
        with self._lock:
            if self._ended is None:
                self._ended = self._end.reap(block=False)
            if self._ended is None:
                return True
            self._cleanup()
            return False

    def has_spoken(self, timeout: float = 0.0) -> bool:
        """Whether the worker has sent something on fd 3 (its "ready" frame), unread."""
        with contextlib.suppress(OSError, ValueError):
            return bool(select.select([self.sock], [], [], timeout)[0])
        return False

    def arm_grading_clock(self) -> None:
        """Start the per-grading wall clock: past it, the worker is killed."""
        seconds = self.limits.grading_wall_seconds
        reason = f"wall-clock limit of {seconds:g} s per grading"
        with self._lock:
            if self._clock is None and self._ended is None:
                self._clock = threading.Timer(seconds, self.kill, kwargs={"reason": reason})
                self._clock.daemon = True
                self._clock.start()

    def kill(self, reason: str | None = None) -> None:
        """SIGKILL the whole tree, reap it, wait until no process of it is left. Idempotent."""
        with self._lock:
            if self._ended is None:
                self._kill_reason = reason or "stopped by the judge"
                self._end.signal_kill()
                self._ended = self._end.reap(block=True)
            self._cleanup()

    def end_soon(self, reason: str) -> concurrent.futures.Future:
        """`kill(reason)` on a background thread: for a worker whose grading is over."""
        return _ender.submit(self.kill, reason)

    def exit_description(self) -> str:
        """Plain words: 'exited with status 3', 'killed by signal SIGSEGV', 'killed: ...'."""
        with self._lock:
            if self._ended is None and self.alive():
                return "running"
            if self._kill_reason is not None:
                return f"killed: {self._kill_reason}"
            status, cpu_used = self._ended or (0, 0.0)
            if os.WIFSIGNALED(status):
                return describe_signal(os.WTERMSIG(status), cpu_used, self.limits)
            code = os.WEXITSTATUS(status)
            if code == EXIT_OUT_OF_MEMORY:
                return "killed: memory limit reached"
            if self.level == Level.BWRAP and 128 < code < 128 + signal.NSIG:
                # bwrap's init (and a forked worker's) reports death by signal n as 128 + n
                return describe_signal(code - 128, cpu_used, self.limits)
            return f"exited with status {code}"

    def _cleanup(self) -> None:
        """After the reap: no process of this worker left, uid slot and files given back."""
        if self._cleaned:
            return
        self._cleaned = True
        if self._clock is not None:
            self._clock.cancel()
        self._end.close()
        if self.uid is not None:
            uids.sweep_uid(self.uid)
            uids.slots.give_back(self.uid)
        self._output.join(timeout=1.0)
        self.sock.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)


def wait_then_close(pidfd: int | None) -> None:
    """Wait (bounded) until the pid namespace's init is gone, then close its pidfd."""
    if pidfd is not None:
        select.select([pidfd], [], [], WAITS.sweep_s)
        os.close(pidfd)


def kill_through(pidfd: int | None) -> None:
    if pidfd is not None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
