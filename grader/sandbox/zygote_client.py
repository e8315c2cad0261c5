"""The judge's side of the zygote: start it once, ask it for a confined worker per grading.

Starting a worker from scratch costs seconds of CPU (`import torch` and its lazy imports);
forking one from the zygote costs milliseconds (worker/zygote.py). A forked worker is as
isolated as a spawned one: its own mount, pid, net, ipc and uts namespaces, its own /tmp,
its own host uid from the same slot table, no capabilities, no nested user namespaces
(worker/confine.py). It is not the judge's child, so its `ForkedEnd`:

    kills    with pidfd_send_signal(SIGKILL) on the worker, which is pid 1 of its pid
             namespace (the whole namespace dies with it); then the usual sweep of its uid
    reaps    through the zygote, the init's parent, which writes "<wait status> <cpu
             seconds>" on a pipe once the init ends (the init exits with the server's
             status, 128 + signal if killed)

A judge at the bwrap level uses a zygote (as root, or through unprivileged user namespaces,
where workers keep the judge's uid as spawned ones do); below that level, and whenever the
zygote cannot answer, the pool spawns workers instead. GSPO_GRADER_SANDBOX_ZYGOTE=off
turns it off.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import threading
import time

from grader.sandbox import isolation, spawn, uids
from grader.sandbox.handle import WorkerHandle, kill_through, wait_then_close
from grader.sandbox.isolation import Level
from grader.sandbox.output import OutputCapture
from grader.sandbox.worker.contract import WAITS, Limits, Op

log = logging.getLogger(__name__)

ZYGOTE_ENV = "GSPO_GRADER_SANDBOX_ZYGOTE"


class ZygoteError(RuntimeError):
    """The zygote could not give a worker (the pool then spawns one)."""


def zygote_possible() -> bool:
    """A zygote needs the bwrap level (as root, or with unprivileged user namespaces), and
    GSPO_GRADER_SANDBOX_ZYGOTE not set to off."""
    if os.environ.get(ZYGOTE_ENV, "").strip().lower() in ("0", "off", "false", "no"):
        return False
    return isolation.detect_isolation().level == Level.BWRAP


class ForkedEnd:
    """A forked worker's end: killed through the pidfd on its init, reaped through the
    status pipe the zygote writes to (its pid means nothing in the judge's namespace)."""

    def __init__(self, pidfd: int, status_fd: int) -> None:
        self._pidfd, self._status_fd = pidfd, status_fd

    def signal_kill(self) -> None:
        kill_through(self._pidfd)

    def reap(self, block: bool) -> tuple[int, float] | None:
        wait = WAITS.status_after_kill_s if block else 0
        if not select.select([self._status_fd], [], [], wait)[0]:
            # no report: the zygote itself is gone; the sweep still runs
            return (signal.SIGKILL, 0.0) if block else None
        return _parse_status(os.read(self._status_fd, 256))

    def close(self) -> None:
        wait_then_close(self._pidfd)
        os.close(self._status_fd)


def _parse_status(data: bytes) -> tuple[int, float]:
    """'<wait status> <cpu seconds>' from the zygote; EOF alone means it died (SIGKILL)."""
    try:
        status, cpu = data.decode().split()
        return int(status), float(cpu)
    except ValueError:
        return signal.SIGKILL, 0.0


class ZygoteClient:
    """One zygote process per judge. `fork_worker()` is thread-safe; `close()` ends it."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._began = time.monotonic()
        self._handle = spawn.start_zygote(limits)
        self._ready = False

    def alive(self) -> bool:
        return self._handle.alive()

    def wait_ready(self, timeout: float = WAITS.worker_ready_s) -> None:
        """Block until the zygote has imported torch and said so; ZygoteError if it can't."""
        with self._lock:
            self._wait_ready_locked(timeout)

    def fork_worker(self, limits: Limits, arm_clock: bool = True) -> WorkerHandle:
        """A fresh confined worker with `limits`, its grading clock armed if asked.

        As root it gets its own host uid; otherwise it keeps the judge's, in a user namespace
        of its own, where the kernel counts its processes (RLIMIT_NPROC) apart from the judge's.
        """
        uid = uids.slots.take() if isolation.running_as_root() else None
        try:
            with self._lock:
                self._wait_ready_locked(WAITS.worker_ready_s)
                worker = self._request(limits, uid)
        except BaseException:
            if uid is not None:
                uids.slots.give_back(uid)
            raise
        if arm_clock:
            worker.arm_grading_clock()
        return worker

    def close(self) -> None:
        self._handle.kill(reason="zygote closed")

    def _wait_ready_locked(self, timeout: float) -> None:
        if self._ready:
            return
        message = self._receive(timeout, "start")[0]
        if message.get("op") != Op.READY:
            raise self._fail(f"unexpected first message {message!r}")
        self._ready = True
        took = time.monotonic() - self._began
        log.info("sandbox zygote ready (pid %s) after %.1f s", message.get("pid"), took)

    def _request(self, limits: Limits, uid: int | None) -> WorkerHandle:
        judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        (out_r, out_w), (err_r, err_w), (status_r, status_w) = os.pipe(), os.pipe(), os.pipe()
        given = [out_w, err_w, worker_end.fileno(), status_w]
        request = {"op": Op.FORK, "uid": uid, "limits": limits.as_dict()}
        try:
            socket.send_fds(self._handle.sock, [json.dumps(request).encode()], given)
        except OSError as exc:
            raise self._fail(f"cannot reach the zygote: {exc}") from exc
        finally:
            worker_end.close()
            for fd in (out_w, err_w, status_w):
                os.close(fd)
        try:
            reply, fds = self._receive(WAITS.fork_s, "fork")
        except ZygoteError:
            _close_all(judge_end, out_r, err_r, status_r)
            raise
        if not reply.get("ok") or len(fds) != 1:
            _close_all(judge_end, out_r, err_r, status_r, *fds)
            raise ZygoteError(f"the zygote could not fork a worker: {reply.get('error')}")
        return WorkerHandle(
            ForkedEnd(fds[0], status_r),
            judge_end,
            OutputCapture([out_r, err_r], limits.output_bytes),
            limits=limits,
            level=Level.BWRAP,
            uid=uid,
            isolation=isolation.describe(Level.BWRAP, uid, forked=True),
            pid=_pid_of(fds[0]),
            forked=True,
        )

    def _receive(self, timeout: float, what: str) -> tuple[dict, list[int]]:
        """One message from the zygote within `timeout`; the zygote is killed if none comes."""
        sock = self._handle.sock
        if not select.select([sock], [], [], timeout)[0]:
            raise self._fail(f"no answer to {what} within {timeout:g} s")
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 4)
        except OSError as exc:
            raise self._fail(f"the control socket failed: {exc}") from exc
        if not data:
            raise self._fail(f"it ended ({self._handle.exit_description()})")
        try:
            return json.loads(data), fds
        except ValueError:
            _close_all(*fds)
            raise self._fail(f"unreadable message {data[:200]!r}") from None

    def _fail(self, why: str) -> ZygoteError:
        """Kill the zygote (a later fork gets a new one) and word the error with its output."""
        self._handle.kill(reason=why)
        text, _ = self._handle.take_output(settle_s=0.2)
        tail = text.strip().splitlines()[-3:]
        return ZygoteError(f"sandbox zygote: {why}" + (f" ({' | '.join(tail)})" if tail else ""))


def _pid_of(pidfd: int) -> int:
    """The pid, in the judge's namespace, of the process a pidfd refers to (the zygote
    reports pids of its own namespace)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as info:
        for line in info:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise ZygoteError("the zygote sent a descriptor that is not a pidfd")


def _close_all(*items) -> None:
    for item in items:
        with contextlib.suppress(OSError):
            item.close() if isinstance(item, socket.socket) else os.close(item)


def new_zygote(limits: Limits) -> ZygoteClient | None:
    """A zygote process just started, its imports still running (`wait_ready` waits for
    them), or None (logged) when this host cannot start one."""
    try:
        return ZygoteClient(limits)
    except (ZygoteError, OSError, isolation.IsolationError) as exc:
        log.warning("no sandbox zygote, workers will be spawned: %s", exc)
        return None
