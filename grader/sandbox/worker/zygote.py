"""The zygote: a process that has paid `import torch` once and forks a confined worker per
grading in a few milliseconds, instead of a fresh interpreter that spends seconds on it.

It runs as root inside a privileged bwrap with four capabilities (see confine.py) and never
runs student code itself. Its control socket (fd 3, SOCK_SEQPACKET) carries one request per
message, with the new worker's descriptors attached (SCM_RIGHTS):

    judge -> zygote  {"op": "fork", "uid": int | null, "limits": {...}}
                     fds: [stdout, stderr, channel, status]
    zygote -> judge  {"ok": true, "pid": N} fds: [pidfd of the worker]  |  {"ok": false, "error"}

Each fork makes two processes, each a copy of the zygote's memory (a copy costs the kernel
about 10 ms of CPU for torch's pages, so there is no third). The worker's init is forked
into a new pid namespace (the zygote enters one for its next child only, then returns to
its own) and is pid 1 there; it enters new mount, net, ipc and uts namespaces, drops to
`uid`, and forks the process that serves the judge on fd 3 exactly like a spawned worker.
The zygote is the init's parent: when the init ends, the zygote writes "<wait status> <cpu
seconds>" on the worker's status pipe, so the judge learns how the worker ended although
the worker is not its child.
The first message the zygote sends is {"op": "ready"}; EOF on fd 3 ends it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
from dataclasses import dataclass

from . import confine, rlimits, serve
from .contract import (
    CHANNEL_FD,
    EXIT_CHILD_FAILED,
    EXIT_CONFINE_FAILED,
    WAITS,
    Limits,
    Op,
)

_MAX_REQUEST_BYTES = 64 * 1024


@dataclass
class Running:
    """A forked worker's init, whose end the zygote reports on the worker's status pipe."""

    pid: int
    pidfd: int  # readable once the init has ended
    status_w: int

    def report_end(self) -> None:
        _, status, usage = os.wait4(self.pid, 0)
        line = f"{status} {usage.ru_utime + usage.ru_stime:.3f}\n"
        with contextlib.suppress(OSError):  # the judge may have closed its end already
            os.write(self.status_w, line.encode())
        os.close(self.status_w)
        os.close(self.pidfd)


def run_zygote(control_fd: int = CHANNEL_FD) -> int:
    """Serve fork requests, and report the ends of the workers' inits, until the judge
    closes the control socket.

    The zygote first moves into a pid namespace of its own making, as its pid 1 (this
    process stays outside as its parent). Returning there after each worker's init is
    forked (enter_pid_namespace) needs CAP_SYS_ADMIN in the user namespace that owns it: a
    zygote without root holds that in its own user namespace, not in the one that owns
    bwrap's pid namespace."""
    confine.new_pid_namespace()
    zygote = os.fork()
    if zygote != 0:
        os.close(control_fd)  # the judge sees EOF when the zygote itself ends
        _, status = os.waitpid(zygote, 0)
        return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    confine.die_with_parent(None)
    return _serve_forks(control_fd)


def _serve_forks(control_fd: int) -> int:
    control = socket.socket(fileno=control_fd)
    own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    running: dict[int, Running] = {}  # by pidfd
    gc.freeze()  # keep the collector from touching (and so copying) the shared pages
    control.sendall(json.dumps({"op": Op.READY, "pid": os.getpid()}).encode())
    while True:
        ready = select.select([control, *running], [], [])[0]
        for pidfd in ready:
            if pidfd in running:
                running.pop(pidfd).report_end()
        if control not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST_BYTES, 8)
        except ConnectionError:
            return 0
        if not data:
            return 0
        reply, started = _answer(data, fds, own_pid_namespace)
        for fd in fds if started is None else fds[:3]:  # a started worker's status pipe
            os.close(fd)  # stays open here until its init ends
        reply_fds = [] if started is None else [os.pidfd_open(started.pid)]
        if started is not None:
            running[started.pidfd] = started
        socket.send_fds(control, [json.dumps(reply).encode()], reply_fds)
        for fd in reply_fds:
            os.close(fd)


def _answer(data: bytes, fds: list[int], own_pid_namespace: int) -> tuple[dict, Running | None]:
    try:
        request = json.loads(data)
        if request.get("op") != Op.FORK or len(fds) != 4:
            raise ValueError(f"bad request {request.get('op')!r} with {len(fds)} descriptors")
        pid = _fork_worker(request, fds, own_pid_namespace)
        return {"ok": True, "pid": pid}, Running(pid, os.pidfd_open(pid), fds[3])
    except Exception as exc:  # the judge falls back to a spawned worker and logs this
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, None


def _fork_worker(request: dict, fds: list[int], own_pid_namespace: int) -> int:
    """Fork the worker's init into a new pid namespace; its pid once it is confined."""
    confirm_r, confirm_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    confine.new_pid_namespace()  # for the next child only
    try:
        init = os.fork()
    except BaseException:
        confine.enter_pid_namespace(own_pid_namespace)
        raise
    if init == 0:
        os.close(confirm_r)
        confine.die_with_parent(None)
        _exit_after(lambda: _init(request, fds, confirm_w))
    confine.enter_pid_namespace(own_pid_namespace)  # our own again, for the next fork
    os.close(confirm_w)
    try:
        text = _read_report(confirm_r)
    finally:
        os.close(confirm_r)
    if text != "ok":
        os.kill(init, signal.SIGKILL)
        os.waitpid(init, 0)
        raise OSError(text or "the worker ended before it was confined")
    return init


def _read_report(fd: int) -> str:
    """Everything written on `fd` until EOF or the confinement deadline."""
    chunks = []
    while select.select([fd], [], [], WAITS.confine_s)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace").strip()


def _exit_after(body) -> None:
    """Run `body` in a forked child and leave with os._exit: never return into the loop."""
    status = EXIT_CHILD_FAILED
    try:
        status = body()
    except BaseException as exc:  # reported, then the child ends
        os.write(2, f"zygote child: {type(exc).__name__}: {exc}\n".encode())
    finally:
        os._exit(status if isinstance(status, int) else EXIT_CHILD_FAILED)


def _python_below_tmp() -> tuple[str, ...]:
    """The interpreter's and venv's folders that lie below /tmp (bwrap bound them on top of
    the zygote's /tmp; a worker's fresh /tmp must not hide them), outermost only."""
    prefixes = sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})
    kept: list[str] = []
    for prefix in (os.path.abspath(p) for p in prefixes):
        if prefix.startswith("/tmp/") and not any(prefix.startswith(k + "/") for k in kept):
            kept.append(prefix)
    return tuple(kept)


def _init(request: dict, fds: list[int], confirm_w: int) -> int:
    """The worker's init, pid 1 of its new pid namespace: confine, fork the serving process,
    and stay its init (pid 1 ignores the signals its namespace sends it, so the student's
    code must not run as pid 1: `os.kill(os.getppid(), SIGKILL)` would then do nothing)."""
    stdout, stderr, channel, status_w = fds
    os.close(status_w)  # the zygote reports this init's end
    null = os.open("/dev/null", os.O_RDONLY)
    for source, target in ((null, 0), (stdout, 1), (stderr, 2), (channel, 3)):
        os.dup2(source, target)
    confirm = os.dup2(confirm_w, 4)
    os.closerange(5, os.sysconf("SC_OPEN_MAX"))  # the zygote's, other workers' included
    try:
        tmpfs_bytes = int(request["limits"].get("tmpfs_bytes") or 64 << 20)
        confine.enter_namespaces(tmpfs_bytes, _python_below_tmp())
        confine.become_worker(request.get("uid"))
    except OSError as exc:
        os.write(confirm, f"confinement failed: {exc}".encode())
        return EXIT_CONFINE_FAILED
    os.write(confirm, b"ok")
    os.close(confirm)
    server = os.fork()
    if server == 0:
        _exit_after(lambda: _serve(request["limits"]))
    for fd in (0, 1, 2, 3):  # the channel and pipes must reach EOF when the server ends
        os.close(fd)
    confine.set_dumpable(False)  # the student's code (same uid) cannot ptrace its init
    return _reap_until(server)


def _serve(limits: dict) -> int:
    """The serving process (pid 2): limits on, then the same loop as a spawned worker."""
    confine.set_dumpable(True)
    rlimits.apply(limits)
    wire = Limits.from_mapping(limits).wire()
    return serve.serve_guarded(socket.socket(fileno=CHANNEL_FD), wire)


def _reap_until(server: int) -> int:
    """Reap every orphan of the namespace until the server ends; its status, bwrap-style
    (128 + signal when killed), becomes this init's exit status."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return EXIT_CHILD_FAILED
        if pid == server:
            if os.WIFSIGNALED(status):
                return 128 + os.WTERMSIG(status)
            return os.WEXITSTATUS(status)
