"""A worker served by a thread of this process, for the exercise's own reference only.

This is no sandbox. The thread runs the worker's request loop (worker/serve.py) on one end
of a socketpair, so the judge's proxy, forecasts and wire work exactly as with a sandboxed
worker, but nothing isolates the code it loads from the judge: no namespaces, no limits, no
other uid. Its one caller is the judge's rehearsal (grader/judge/engine/rehearsal.py), which
loads the exercise's reference, trusted code that the judge imports anyway; a submission
never reaches it.

    pool = InProcessPool(limits)          # acquire() -> a WorkerHandle over a thread
"""

from __future__ import annotations

import contextlib
import linecache
import socket
import sys
import threading

from grader.sandbox.handle import WorkerHandle
from grader.sandbox.isolation import Level
from grader.sandbox.output import OutputCapture
from grader.sandbox.worker import serve, student
from grader.sandbox.worker.codec import Frame
from grader.sandbox.worker.contract import WAITS, Limits

ISOLATION = "none: a thread of the judge, for the exercise's reference only"
META_REFUSED = "calls on meta tensors are not served in the judge's process"


class ThreadEnd:
    """The end of a worker thread: `signal_kill` shuts its socket (its loop then ends at
    the next read), `reap` joins it. A thread cannot be killed; the code it runs is trusted."""

    def __init__(self, thread: threading.Thread, sock: socket.socket) -> None:
        self._thread, self._sock = thread, sock

    def signal_kill(self) -> None:
        with contextlib.suppress(OSError):  # closed already
            self._sock.shutdown(socket.SHUT_RDWR)

    def reap(self, block: bool) -> tuple[int, float] | None:
        self._thread.join(WAITS.status_after_kill_s if block else 0)
        return None if self._thread.is_alive() and not block else (0, 0.0)

    def close(self) -> None:
        self._sock.close()


class InProcessPool:
    """`acquire()` like a WorkerPool's: a fresh worker thread each time, nothing started
    ahead (a thread starts in microseconds: torch is imported already)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def acquire(self) -> WorkerHandle:
        judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        thread = threading.Thread(
            target=_serve, args=(worker_end, self.limits), name="in-process-worker", daemon=True
        )
        thread.start()
        return WorkerHandle(
            ThreadEnd(thread, worker_end),
            judge_end,
            OutputCapture([], self.limits.output_bytes),  # the reference prints nothing
            limits=self.limits,
            level=Level.NONE,
            uid=None,
            isolation=ISOLATION,
            pid=0,
        )


class ReferenceWorker(serve.Worker):
    """The worker's state, refusing calls on `meta` tensors: the first op on one imports
    torch._dynamo (~0.75 s), which a judge never needs otherwise. The test that makes such a
    call fails here and leaves no forecast; graded for real, it runs as ever."""

    registered = None  # the module this thread's load put in sys.modules, loaded or not

    def load(self, msg: dict) -> dict:
        reply = super().load(msg)
        self.registered = sys.modules.get(student.MODULE_NAME)
        return reply

    def call(self, msg: dict, frame: Frame) -> dict:
        if any(spec.device == "meta" for spec in frame.specs):
            error = {"type_name": "RuntimeError", "message": META_REFUSED, "line": None}
            return {"ok": False, "error": {**error, "traceback": ""}}
        return super().call(msg, frame)


def _serve(sock: socket.socket, limits: Limits) -> None:
    """The request loop, then the module and source lines it registered are dropped: the
    judge's own modules must not see a `submission` module once the thread is done. This
    ends in the background, maybe after the next rehearsal's thread loaded its own module:
    only the one this thread loaded is dropped."""
    worker = ReferenceWorker()
    try:
        with contextlib.suppress(OSError):  # the judge shut the socket during a reply
            serve.serve_requests(sock, limits.wire(), worker)
    finally:
        module = worker.registered
        if module is not None and sys.modules.get(student.MODULE_NAME) is module:
            sys.modules.pop(student.MODULE_NAME, None)
            linecache.cache.pop(getattr(module, "__file__", None), None)
