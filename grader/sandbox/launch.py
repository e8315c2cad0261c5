"""Start one sandboxed worker process and own its life: channel, output, kill, exit.

The judge talks to the worker over a socketpair whose far end is the worker's fd 3; the
worker's stdout and stderr are pipes drained by two threads and capped at
Limits.output_bytes. `kill()` is SIGKILL to the pid namespace's init (which takes every
process inside with it), to the launcher's process group, and, as root, to every process of
the worker's own uid: nothing the student does with signals, fork or setsid survives it.

Every worker is spawned from one long-lived thread: bwrap's --die-with-parent and setpriv's
--pdeathsig fire when the *thread* that forked them ends, so a worker spawned from a
short-lived thread would die with it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import json
import logging
import os
import select
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from grader.sandbox import isolation, uids
from grader.sandbox.isolation import Level
from grader.sandbox.limits import Limits
from grader.sandbox.output import OutputCapture

log = logging.getLogger(__name__)

WORKER_DIR = Path(__file__).resolve().parent / "worker"
WORKER_SCRIPT = "main.py"
MEMORY_EXIT_STATUS = 86  # the worker's "out of memory, could not report it" (sandbox-seam.md)
_CHANNEL_FD, _INFO_FD = 3, 4


# One long-lived thread performs every spawn (see the module docstring): an executor's
# worker thread never exits while the judge runs.
_spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gspo-sandbox-spawner")


def _spawn_in_spawner(job: Callable[[], int]) -> int:
    return _spawner.submit(job).result()


def _high_fd(fd: int) -> int:
    """A close-on-exec copy at fd >= 10, so dup2 onto 0..4 never clobbers a source."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def _describe_signal(signum: int, cpu_used: float, limits: Limits) -> str:
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_used >= limits.cpu_seconds):
        return "killed: CPU time limit"
    if signum == signal.SIGXFSZ:
        return "killed: file size limit"
    try:
        return f"killed by signal {signal.Signals(signum).name}"
    except ValueError:
        return f"killed by signal {signum}"


class WorkerProcess:
    """One sandboxed worker: `.sock` (the judge's end of fd 3), output, liveness, kill."""

    def __init__(self, pid: int, sock: socket.socket, output: OutputCapture, **meta) -> None:
        self.pid, self.sock, self._output = pid, sock, output
        self.limits: Limits = meta["limits"]
        self.level: Level = meta["level"]
        self.uid: int | None = meta["uid"]
        self.isolation: str = meta["isolation"]
        self._workdir: str | None = meta["workdir"]
        self._init_pidfd: int | None = meta["init_pidfd"]
        self.started_at = time.monotonic()
        self._lock = threading.RLock()
        self._status: int | None = None  # raw wait status once reaped
        self._cpu_used = 0.0
        self._kill_reason: str | None = None
        self._clock: threading.Timer | None = None
        self._cleaned = False
        # bwrap's init reports a child killed by signal n as exit status 128 + n
        self._signal_in_exit_code = self.level == Level.BWRAP

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
            if self._status is None and not self._reap(block=False):
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
            if self._clock is None and self._status is None:
                self._clock = threading.Timer(seconds, self.kill, kwargs={"reason": reason})
                self._clock.daemon = True
                self._clock.start()

    def kill(self, reason: str | None = None) -> None:
        """SIGKILL the whole tree, reap it, wait until no process of it is left. Idempotent."""
        with self._lock:
            if self._status is None:
                self._kill_reason = reason or "stopped by the judge"
                self._signal_all()
                self._reap(block=True)
            self._cleanup()

    def exit_description(self) -> str:
        """Plain words: 'exited with status 3', 'killed by signal SIGSEGV', 'killed: ...'."""
        with self._lock:
            if self._status is None and self.alive():
                return "running"
            if self._kill_reason is not None:
                return f"killed: {self._kill_reason}"
            status = self._status or 0
            if os.WIFSIGNALED(status):
                return _describe_signal(os.WTERMSIG(status), self._cpu_used, self.limits)
            code = os.WEXITSTATUS(status)
            if code == MEMORY_EXIT_STATUS:
                return "killed: memory limit reached"
            if self._signal_in_exit_code and 128 < code < 128 + signal.NSIG:
                return _describe_signal(code - 128, self._cpu_used, self.limits)
            return f"exited with status {code}"

    def _reap(self, block: bool) -> bool:
        """Collect the exit status if the worker has ended (waiting for it if `block`)."""
        pid, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return False
        self._record(status, usage.ru_utime + usage.ru_stime)
        return True

    def _record(self, status: int, cpu_used: float) -> None:
        self._status = status
        self._cpu_used = cpu_used

    def _signal_all(self) -> None:
        if self._init_pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._init_pidfd, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def _cleanup(self) -> None:
        """After the reap: no process of this worker left, uid slot and files given back."""
        if self._cleaned:
            return
        self._cleaned = True
        if self._clock is not None:
            self._clock.cancel()
        if self._init_pidfd is not None:
            select.select([self._init_pidfd], [], [], uids.SWEEP_DEADLINE_S)
            os.close(self._init_pidfd)
        if self.uid is not None:
            uids.sweep_uid(self.uid)
            uids.slots.give_back(self.uid)
        self._output.join(timeout=1.0)
        self.sock.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)


def start_worker(
    limits: Limits | None = None,
    *,
    worker_dir: str | Path = WORKER_DIR,
    script: str = WORKER_SCRIPT,
    args: list[str] | None = None,
    level: Level | None = None,
    require: Level | None = None,
    arm_clock: bool = True,
) -> WorkerProcess:
    """Start `python -I -B <worker_dir>/<script> --limits <json>` at the strongest level.

    level caps the level used (tests of the fallbacks); require raises IsolationError when
    the host offers less (default: GSPO_GRADER_SANDBOX_REQUIRE). arm_clock=False leaves the
    per-grading wall clock off until `arm_grading_clock()` (the pool arms it on acquire).
    """
    info = isolation.detect_isolation(cap=level)
    isolation.check_required(info, require)
    chosen = info.level
    if chosen < Level.BWRAP:
        log.warning("sandbox is weaker than bwrap: %s", info.details)
    root = isolation.running_as_root()
    limits = limits or Limits.from_env()
    if not root:  # RLIMIT_NPROC would count every process of the judge's own uid
        limits = limits.replace(processes=None)
    uid = uids.slots.take() if root and chosen >= Level.RLIMITS else None  # NONE: judge uid
    try:
        return _launch(limits, chosen, uid, Path(worker_dir), script, args, arm_clock)
    except BaseException:
        if uid is not None:
            uids.slots.give_back(uid)
        raise


def start_zygote(limits: Limits) -> WorkerProcess:
    """Start the zygote (worker/zygote.py): bwrap as root, its fd 3 a SOCK_SEQPACKET socket.

    Only as root at the bwrap level; the caller checks `zygote_possible()` first.
    """
    args = ["--zygote", "--limits", limits.to_json()]
    return _launch(limits, Level.BWRAP, None, WORKER_DIR, WORKER_SCRIPT, args, False, True)


def _launch(limits, level, uid, worker_dir, script, args, arm_clock, zygote=False):
    workdir = None if level == Level.BWRAP else _private_workdir(uid)
    python_args = isolation.worker_args(level, str(worker_dir), script, args or [])
    if args is None:
        python_args += ["--limits", limits.to_json()]
    argv = isolation.wrap_command(
        level,
        limits,
        worker_dir=str(worker_dir),
        python_args=python_args,
        uid=uid,
        workdir=workdir or "/",
        info_fd=_INFO_FD if level == Level.BWRAP else None,
        zygote=zygote,
    )
    kind = socket.SOCK_SEQPACKET if zygote else socket.SOCK_STREAM
    judge_end, worker_end = socket.socketpair(socket.AF_UNIX, kind)
    (out_r, out_w), (err_r, err_w), (info_r, info_w) = os.pipe(), os.pipe(), os.pipe()
    child_fds = [_high_fd(fd) for fd in (out_w, err_w, worker_end.detach(), info_w)]
    try:
        pid = _spawn_in_spawner(lambda: _posix_spawn(argv, child_fds, level))
    except BaseException:
        judge_end.close()
        for fd in (out_r, err_r, info_r):
            os.close(fd)
        raise
    finally:
        for fd in child_fds:
            os.close(fd)
    init_pidfd = _read_init_pidfd(info_r) if level == Level.BWRAP else os.close(info_r)
    output = OutputCapture([out_r, err_r], limits.output_bytes)
    worker = WorkerProcess(
        pid,
        judge_end,
        output,
        limits=limits,
        level=level,
        uid=uid,
        isolation=_isolation_text(level, uid),
        workdir=workdir,
        init_pidfd=init_pidfd,
    )
    if arm_clock:
        worker.arm_grading_clock()
    return worker


def _posix_spawn(argv: list[str], child_fds: list[int], level: Level) -> int:
    out_w, err_w, channel, info_w = child_fds
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
        (os.POSIX_SPAWN_DUP2, channel, _CHANNEL_FD),
    ]
    if level == Level.BWRAP:
        actions.append((os.POSIX_SPAWN_DUP2, info_w, _INFO_FD))
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds(5)]
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    return os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsid=True)


def _inheritable_fds(lowest: int) -> list[int]:
    """The judge's fds from `lowest` up that would leak into a child (opened without
    O_CLOEXEC, or inherited from whoever started the judge): the spawn closes them."""
    leaked = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        with contextlib.suppress(OSError):
            if fd >= lowest and os.get_inheritable(fd):
                leaked.append(fd)
    return leaked


def _read_init_pidfd(info_r: int) -> int | None:
    """bwrap writes {"child-pid": N} on the info fd: a pidfd on the pid namespace's init."""
    data = b""
    deadline = time.monotonic() + 10.0
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([info_r], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(info_r, 4096) if ready else b""
            data += chunk
            try:
                child = json.loads(data)["child-pid"]
                return os.pidfd_open(child)
            except (ValueError, KeyError):
                if not chunk:
                    return None
            except ProcessLookupError:
                return None
        return None
    finally:
        os.close(info_r)


def _private_workdir(uid: int | None) -> str:
    """An empty folder only the worker's uid may enter (levels without bwrap's /tmp)."""
    path = tempfile.mkdtemp(prefix="gspo-worker-")
    if uid is not None:
        os.chown(path, uid, uid)
    return path


def _isolation_text(level: Level, uid: int | None) -> str:
    who = f"uid {uid}, no capabilities" if uid is not None else f"uid {os.geteuid()} (judge's)"
    return {
        Level.BWRAP: f"bwrap: user+pid+net+ipc+uts+mount namespaces, {who}, uid 65534 inside, "
        "no nested user namespaces, read-only system, private /tmp",
        Level.UNSHARE: f"unshare: pid+net+ipc+uts+mount namespaces, {who}, "
        "host file system visible",
        Level.RLIMITS: f"rlimits only: {who}, network and file system visible",
        Level.NONE: f"NONE: no sandbox, {who}",
    }[level]
