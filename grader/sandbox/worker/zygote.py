"""The zygote: a process that has paid `import torch` once and forks a confined worker per
grading in a few milliseconds, instead of a fresh interpreter that spends seconds on it.

It runs as root inside a privileged bwrap with four capabilities (see confine.py) and never
runs student code itself. Its control socket (fd 3, SOCK_SEQPACKET) carries one request per
message, with the new worker's descriptors attached (SCM_RIGHTS):

    judge -> zygote  {"op": "fork", "uid": int | null, "limits": {...}}
                     fds: [stdout, stderr, channel, status]
    zygote -> judge  {"ok": true, "pid": N} fds: [pidfd of the worker]  |  {"ok": false, "error"}

Each fork makes two processes. The monitor enters new namespaces and waits for the worker;
when the worker ends it writes "<wait status> <cpu seconds>" on the status pipe, so the judge
learns how the worker ended although the worker is not its child. The worker is pid 1 of its
own pid namespace, drops to `uid`, and forks the process that serves the judge on fd 3
exactly like a spawned worker.
The first message the zygote sends is {"op": "ready"}; EOF on fd 3 ends it.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys

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


def run(control_fd: int = CHANNEL_FD) -> int:
    """Serve fork requests until the judge closes the control socket."""
    control = socket.socket(fileno=control_fd)
    gc.freeze()  # keep the collector from touching (and so copying) the shared pages
    control.sendall(json.dumps({"op": Op.READY, "pid": os.getpid()}).encode())
    while True:
        _reap_monitors()
        try:
            data, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST_BYTES, 8)
        except ConnectionError:
            return 0
        if not data:
            return 0
        reply, reply_fds = _answer(data, fds, control)
        for fd in fds:
            os.close(fd)
        socket.send_fds(control, [json.dumps(reply).encode()], reply_fds)
        for fd in reply_fds:
            os.close(fd)


def _answer(data: bytes, fds: list[int], control: socket.socket) -> tuple[dict, list[int]]:
    try:
        request = json.loads(data)
        if request.get("op") != Op.FORK or len(fds) != 4:
            raise ValueError(f"bad request {request.get('op')!r} with {len(fds)} descriptors")
        pid = _fork_worker(request, fds, control)
        return {"ok": True, "pid": pid}, [os.pidfd_open(pid)]
    except Exception as exc:  # the judge falls back to a spawned worker and logs this
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, []


def _reap_monitors() -> None:
    """Collect monitors that have ended (their report went to the judge, not to us)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _fork_worker(request: dict, fds: list[int], control: socket.socket) -> int:
    """Fork the monitor; return the worker's pid once it is confined, or raise."""
    report_r, report_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    zygote = os.getpid()
    monitor = os.fork()
    if monitor == 0:
        os.close(report_r)
        confine.die_with_parent(zygote)
        _exit_after(lambda: _monitor(request, fds, report_w, control))
    os.close(report_w)
    try:
        text = _read_report(report_r)
    finally:
        os.close(report_r)
    if not text.isdigit():
        os.kill(monitor, signal.SIGKILL)
        raise OSError(text or "the monitor ended before the worker was confined")
    return int(text)


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


def _monitor(request: dict, fds: list[int], report_w: int, control: socket.socket) -> int:
    """First fork: new namespaces, fork the worker, relay its pid, then its exit status."""
    control.detach()  # never closed here: fd 3 will be the worker's channel
    status_w = fds[3]
    try:
        tmpfs_bytes = int(request["limits"].get("tmpfs_bytes") or 64 << 20)
        confine.enter_namespaces(tmpfs_bytes, _python_below_tmp())
        confirm_r, confirm_w = os.pipe()
        worker = os.fork()
        if worker == 0:
            os.close(confirm_r)
            confine.die_with_parent(None)
            _exit_after(lambda: _worker(request, fds, confirm_w))
        os.close(confirm_w)
        confirmed = _read_report(confirm_r)
        os.write(report_w, (str(worker) if confirmed == "ok" else confirmed).encode())
    except OSError as exc:
        os.write(report_w, f"confinement failed: {exc}".encode())
        return EXIT_CONFINE_FAILED
    os.close(report_w)
    for fd in fds[:3]:  # the channel must reach EOF when the worker dies
        os.close(fd)
    _, status, usage = os.wait4(worker, 0)
    os.write(status_w, f"{status} {usage.ru_utime + usage.ru_stime:.3f}\n".encode())
    return 0


def _python_below_tmp() -> tuple[str, ...]:
    """The interpreter's and venv's folders that lie below /tmp (bwrap bound them on top of
    the zygote's /tmp; a worker's fresh /tmp must not hide them), outermost only."""
    prefixes = sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})
    kept: list[str] = []
    for prefix in (os.path.abspath(p) for p in prefixes):
        if prefix.startswith("/tmp/") and not any(prefix.startswith(k + "/") for k in kept):
            kept.append(prefix)
    return tuple(kept)


def _worker(request: dict, fds: list[int], confirm_w: int) -> int:
    """Second fork, pid 1 of the new pid namespace: confine, fork the serving process, and
    stay its init (pid 1 ignores the signals its namespace sends it, so the student's code
    must not run as pid 1: `os.kill(os.getppid(), SIGKILL)` would then do nothing)."""
    stdout, stderr, channel, _ = fds
    null = os.open("/dev/null", os.O_RDONLY)
    for source, target in ((null, 0), (stdout, 1), (stderr, 2), (channel, 3)):
        os.dup2(source, target)
    confirm = os.dup2(confirm_w, 4)
    os.closerange(5, os.sysconf("SC_OPEN_MAX"))
    try:
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
