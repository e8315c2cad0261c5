"""Spawn one sandboxed worker (or the zygote) as the judge's own child.

The judge talks to the worker over a socketpair whose far end is the worker's fd 3; the
worker's stdout and stderr are pipes drained by two threads and capped at
Limits.output_bytes. The worker is wrapped at the strongest isolation level the host offers
(isolation.py) and handed back as a WorkerHandle whose end is a `SpawnedEnd`.

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
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from grader.sandbox import isolation, uids
from grader.sandbox.doctor import check_required
from grader.sandbox.handle import WorkerHandle, kill_through, wait_then_close
from grader.sandbox.isolation import Level
from grader.sandbox.output import OutputCapture
from grader.sandbox.worker.contract import CHANNEL_FD, INFO_FD, WAITS, Limits

log = logging.getLogger(__name__)
_warned_levels: set[Level] = set()  # the weak levels this process has warned about

WORKER_DIR = Path(__file__).resolve().parent / "worker"
WORKER_SCRIPT = "main.py"

# One long-lived thread performs every spawn (see the module docstring): an executor's
# thread never exits while the judge runs.
_spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gspo-sandbox-spawner")


class SpawnedEnd:
    """A spawned worker's end: its launcher is our child, its init answers a pidfd."""

    def __init__(self, pid: int, init_pidfd: int | None) -> None:
        self.pid, self._init_pidfd = pid, init_pidfd

    def signal_kill(self) -> None:
        kill_through(self._init_pidfd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def reap(self, block: bool) -> tuple[int, float] | None:
        pid, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        return None if pid == 0 else (status, usage.ru_utime + usage.ru_stime)

    def close(self) -> None:
        wait_then_close(self._init_pidfd)
        self._init_pidfd = None


def spawn_worker(
    limits: Limits | None = None,
    *,
    worker_dir: str | Path = WORKER_DIR,
    script: str = WORKER_SCRIPT,
    args: list[str] | None = None,
    level: Level | None = None,
    require: Level | None = None,
    arm_clock: bool = True,
) -> WorkerHandle:
    """Start `python -I -B <worker_dir>/<script> --limits <json>` at the strongest level.

    level caps the level used (tests of the fallback); require raises IsolationError when
    the host offers less (default: GSPO_GRADER_SANDBOX_REQUIRE). arm_clock=False leaves the
    per-grading wall clock off until `arm_grading_clock()` (the pool arms it on acquire).
    """
    info = isolation.detect_isolation(cap=level)
    check_required(info, require)
    if info.weak and info.level not in _warned_levels:  # once per process, not per worker
        _warned_levels.add(info.level)
        log.warning("sandbox is weaker than bwrap: %s", info.details)
    root = isolation.running_as_root()
    limits = limits or Limits.from_env()
    if not root and info.level < Level.BWRAP:
        # without a user namespace of its own, the worker's RLIMIT_NPROC would count every
        # process of the judge's uid; with one (bwrap), the kernel counts them apart
        limits = limits.replace(processes=None)
    uid = uids.slots.take() if root and info.level >= Level.RLIMITS else None  # NONE: judge's
    python_args = isolation.worker_args(info.level, str(worker_dir), script, args or [])
    if args is None:
        python_args += ["--limits", limits.to_json()]
    try:
        return _spawn(limits, info.level, uid, str(worker_dir), python_args, zygote=False)
    except BaseException:
        if uid is not None:
            uids.slots.give_back(uid)
        raise


def start_zygote(limits: Limits) -> WorkerHandle:
    """Start the zygote (worker/zygote.py) at the bwrap level, its fd 3 a SOCK_SEQPACKET
    socket; the caller checks that the host offers bwrap first."""
    python_args = isolation.worker_args(Level.BWRAP, str(WORKER_DIR), WORKER_SCRIPT, [])
    python_args += ["--zygote", "--limits", limits.to_json()]
    return _spawn(limits, Level.BWRAP, None, str(WORKER_DIR), python_args, zygote=True)


def _spawn(limits, level, uid, worker_dir: str, python_args, zygote: bool) -> WorkerHandle:
    workdir = None if level == Level.BWRAP else _private_workdir(uid)
    argv = isolation.wrap_command(
        level,
        limits,
        worker_dir=worker_dir,
        python_args=python_args,
        uid=uid,
        workdir=workdir or "/",
        info_fd=INFO_FD if level == Level.BWRAP else None,
        zygote=zygote,
    )
    kind = socket.SOCK_SEQPACKET if zygote else socket.SOCK_STREAM
    judge_end, worker_end = socket.socketpair(socket.AF_UNIX, kind)
    (out_r, out_w), (err_r, err_w), (info_r, info_w) = os.pipe(), os.pipe(), os.pipe()
    child_fds = [_high_fd(fd) for fd in (out_w, err_w, worker_end.detach(), info_w)]
    try:
        pid = _in_spawner(lambda: _posix_spawn(argv, child_fds, level))
    except BaseException:
        judge_end.close()
        for fd in (out_r, err_r, info_r):
            os.close(fd)
        raise
    finally:
        for fd in child_fds:
            os.close(fd)
    init_pidfd = _read_init_pidfd(info_r) if level == Level.BWRAP else os.close(info_r)
    return WorkerHandle(
        SpawnedEnd(pid, init_pidfd),
        judge_end,
        OutputCapture([out_r, err_r], limits.output_bytes),
        limits=limits,
        level=level,
        uid=uid,
        isolation=isolation.describe(level, uid),
        pid=pid,
        workdir=workdir,
    )


def _in_spawner(job: Callable[[], int]) -> int:
    return _spawner.submit(job).result()


def _high_fd(fd: int) -> int:
    """A close-on-exec copy at fd >= 10, so dup2 onto 0..4 never clobbers a source."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def _posix_spawn(argv: list[str], child_fds: list[int], level: Level) -> int:
    out_w, err_w, channel, info_w = child_fds
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
        (os.POSIX_SPAWN_DUP2, channel, CHANNEL_FD),
    ]
    if level == Level.BWRAP:
        actions.append((os.POSIX_SPAWN_DUP2, info_w, INFO_FD))
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds(INFO_FD + 1)]
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
    deadline = time.monotonic() + WAITS.pidfd_info_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([info_r], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(info_r, 4096) if ready else b""
            data += chunk
            try:
                return os.pidfd_open(json.loads(data)["child-pid"])
            except (ValueError, KeyError):
                if not chunk:
                    return None
            except ProcessLookupError:
                return None
        return None
    finally:
        os.close(info_r)


def _private_workdir(uid: int | None) -> str:
    """An empty folder only the worker's uid may enter (the levels without bwrap's /tmp)."""
    path = tempfile.mkdtemp(prefix="gspo-worker-")
    if uid is not None:
        os.chown(path, uid, uid)
    return path
