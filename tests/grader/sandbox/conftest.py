"""Shared fixtures for the sandbox tests: small limits, a time guard, workers that never leak.

The limits are small on purpose: the CI machine has two cores shared with other jobs, so a
hostile submission must be stopped in seconds, not minutes.
"""

from __future__ import annotations

import os
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import processes

from grader.sandbox import (
    GIB,
    KIB,
    MIB,
    UID_LOCK_DIR,
    Level,
    Limits,
    WorkerHandle,
    detect_isolation,
    pids_of,
    python_binds,
    read_only_view,
    spawn_worker,
)

REPO = Path(__file__).resolve().parents[3]


SMALL_LIMITS = Limits(
    cpu_seconds=10.0,
    call_wall_seconds=3.0,
    grading_wall_seconds=30.0,
    memory_bytes=1 * GIB,
    processes=32,
    open_files=64,
    file_size_bytes=1 * MIB,
    output_bytes=64 * KIB,
    tmpfs_bytes=16 * MIB,
    max_message_bytes=16 * MIB,
    max_tensor_elements=1024 * 1024,
)


@pytest.fixture(scope="session")
def small_limits() -> Limits:
    return SMALL_LIMITS


@pytest.fixture
def bwrap_level() -> Level:
    """Skip unless this host offers bubblewrap (the level the file-system tests assume)."""
    info = detect_isolation()
    if info.level < Level.BWRAP:
        pytest.skip(f"bubblewrap isolation not available here: {'; '.join(info.problems)}")
    return info.level


@pytest.fixture
def time_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that runs past its guard: SIGALRM interrupts even a blocking receive.
    60 s by default; a test module sets `GUARD_S` to change it."""
    seconds = getattr(request.module, "GUARD_S", 60)

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"test exceeded its time guard of {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def workers() -> Iterator[list[WorkerHandle]]:
    """Workers a test starts: killed at teardown, and none of their processes may survive."""
    started: list[WorkerHandle] = []
    yield started
    for worker in started:
        worker.kill()
    for worker in started:
        if worker.uid is not None:
            assert pids_of(worker.uid) == [], f"processes of uid {worker.uid} survived"


@pytest.fixture
def start(workers: list[WorkerHandle], small_limits: Limits):
    """start(**kwargs) -> WorkerHandle with the small limits, registered for teardown."""

    def _start(**kwargs) -> WorkerHandle:
        kwargs.setdefault("limits", small_limits)
        worker = spawn_worker(**kwargs)
        workers.append(worker)
        return worker

    return _start


def write_scripts(folder: Path, **scripts: str) -> Path:
    """Write scripts readable by the worker's unprivileged uid (tmp_path itself is 0700)."""
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    for name, text in scripts.items():
        path = folder / name
        path.write_text(text)
        path.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    return folder


def wait_until(predicate, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def read_all_output(worker: WorkerHandle, timeout: float = 5.0) -> tuple[str, bool]:
    """Output until the worker has exited (or the timeout), joined across take_output calls."""
    parts, truncated = [], False
    deadline = time.monotonic() + timeout
    while True:
        text, truncated = worker.take_output()
        parts.append(text)
        if not worker.alive() or time.monotonic() > deadline:
            text, truncated = worker.take_output()
            parts.append(text)
            return "".join(parts), truncated
        time.sleep(0.02)


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    return [p.pid for p in processes() if p.ppid == pid]


def pid_namespace(worker: WorkerHandle) -> str:
    """The pid namespace a live worker's processes run in (as root or not, forked or
    spawned): its init is the worker's pid (forked) or the first descendant of its launcher
    outside the judge's namespace (spawned)."""
    host = _pid_ns(os.getpid())
    todo = [worker.pid]
    while todo:
        pid = todo.pop(0)
        ns = _pid_ns(pid)
        if ns is not None and ns != host:
            return ns
        todo += _children(pid)
    raise AssertionError(f"no process of worker {worker.pid} runs in a namespace of its own")


def namespace_members(ns: str) -> list[int]:
    """Every process still in pid namespace `ns`: what a worker's kill must leave empty."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _pid_ns(int(p)) == ns]


def zygotes() -> set[int]:
    """The live zygote launchers this process started (a pool's zygote is its child, started
    by whichever of its threads first needed one)."""
    me = os.getpid()
    return {p.pid for p in processes() if p.ppid == me and p.state != "Z" and "--zygote" in p.argv}


def view_argv(uid: int | None, binds: list[Path], gid: int | None = None) -> list[str]:
    """bwrap arguments that run a command in a read-only view of the system, this
    interpreter, the repository and `binds`, with world-traversable parents (the interpreter
    may lie below a 0700 /root), a private /tmp, and the host's /proc and pids (an
    unprivileged bwrap inside may only mount a proc of its own where the host's is fully
    visible); as `uid` and `gid` (gid None: the uid's number; uid None: root, sharing the
    uid-slot locks of /run/gspo-grader with the host's judges)."""
    pairs = [*python_binds(), *[(str(p), str(p)) for p in (REPO, *binds)]]
    argv = ["bwrap", "--die-with-parent", "--ro-bind", "/etc", "/etc"]
    argv += [*read_only_view(pairs), "--dev", "/dev", "--chdir", str(REPO)]
    argv += ["--bind", "/proc", "/proc"]
    if uid is None:
        os.makedirs(UID_LOCK_DIR, exist_ok=True)
        return [*argv, "--bind", UID_LOCK_DIR, UID_LOCK_DIR]
    gid = uid if gid is None else gid
    return [*argv, "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]


class Kit:
    """Helpers the sandbox tests share (a fixture, so no test imports this conftest)."""

    repo = REPO
    small_limits = SMALL_LIMITS
    write_scripts = staticmethod(write_scripts)
    wait_until = staticmethod(wait_until)
    read_all_output = staticmethod(read_all_output)
    pids_of = staticmethod(pids_of)
    pid_namespace = staticmethod(pid_namespace)
    namespace_members = staticmethod(namespace_members)
    zygotes = staticmethod(zygotes)
    view_argv = staticmethod(view_argv)


@pytest.fixture(scope="session")
def kit() -> Kit:
    return Kit()
