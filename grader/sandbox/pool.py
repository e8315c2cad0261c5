"""Pre-started sandboxed workers, so a grading does not wait for `import torch`.

A worker is handed out once and never reused: the submission it ran may have changed
anything inside it. The pool keeps `size` idle workers started in the background, replaces
any that die while waiting, and starts one on the spot when none is idle.

Where the host offers the bwrap level, workers are forked from a zygote that has imported
torch once (zygote_client.py): milliseconds per worker instead of seconds of CPU. The zygote
is started when the pool is made, on the caller's thread, and its first fork waits for its
imports. When the zygote cannot answer, it is restarted, and after three failures in a row
the pool spawns workers.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from grader.sandbox.handle import WorkerHandle
from grader.sandbox.spawn import WORKER_DIR, WORKER_SCRIPT, spawn_worker
from grader.sandbox.worker.contract import WAITS, Limits
from grader.sandbox.zygote_client import (
    ZygoteClient,
    ZygoteError,
    new_zygote,
    zygote_possible,
)

log = logging.getLogger(__name__)
_ZYGOTE_FAILURES_TOLERATED = 3


class WorkerPool:
    """`size` idle workers kept started; `acquire()` hands out a fresh one. Thread-safe."""

    def __init__(
        self,
        size: int,
        limits: Limits | None = None,
        *,
        worker_dir: str | Path = WORKER_DIR,
        script: str = WORKER_SCRIPT,
        zygote: bool | None = None,
        refill: bool = True,
    ) -> None:
        """zygote: fork workers from a zygote (None: wherever the host allows it; never for
        a worker other than the standard one). refill=False: start `size` workers once and
        no replacement (a one-shot grading); a worker asked for later starts on the spot."""
        if size < 0:
            raise ValueError(f"pool size must be >= 0, got {size}")
        self.size = size
        self.limits = limits or Limits.from_env()
        self._start_args = {"worker_dir": worker_dir, "script": script}
        standard = Path(worker_dir) == WORKER_DIR and script == WORKER_SCRIPT
        self._want_zygote = standard and (zygote_possible() if zygote is None else zygote)
        self._zygote: ZygoteClient | None = None
        self._zygote_failures = 0
        self._zygote_lock = threading.Lock()
        self._idle: list[WorkerHandle] = []
        self._starting = 0
        self._to_start = size if not refill else None  # None: keep `size` idle forever
        self._closed = False
        self.last_error: BaseException | None = None  # why the last background start failed
        self._cond = threading.Condition()
        if size > 0 and self._want_zygote:  # its process starts here, on the caller's thread:
            self._start_zygote()  # its imports (seconds) run beside the caller's own
        self._filler = threading.Thread(target=self._fill, name="gspo-pool-filler", daemon=True)
        self._filler.start()

    def acquire(self) -> WorkerHandle:
        """A live worker nobody has used, its grading clock running; a replacement starts."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            worker = self._take_live()
            self._cond.notify_all()
        if worker is None:  # none idle: start one now (cold)
            worker = self._start(arm_clock=False)
        worker.arm_grading_clock()
        return worker

    def has_idle(self) -> bool:
        """Whether a started worker waits now: `acquire` would not wait for one."""
        with self._cond:
            return bool(self._idle)

    def wait_filled(self, timeout: float) -> bool:
        """Block until `size` workers are idle (tests and warm-up); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._idle) >= self.size, timeout)

    def wait_ready(self, timeout: float) -> bool:
        """Block until `size` workers are idle and each has sent its first frame (torch
        imported); False on timeout. For warm-up and measurements."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.wait_filled(max(0.0, deadline - time.monotonic())):
                with self._cond:
                    idle = list(self._idle)
                if all(w.has_spoken(timeout=0.05) for w in idle):
                    return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        """Stop refilling and kill every idle worker and the zygote. Handed-out workers are
        the caller's, but a forked one ends with its zygote: close the pool after them."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        self._filler.join(timeout=30.0)
        for worker in idle:
            worker.kill()
        with self._zygote_lock:
            self._want_zygote = False
            if self._zygote is not None:
                self._zygote.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _take_live(self) -> WorkerHandle | None:
        """Pop idle workers until a live one; dead ones are cleaned up, never handed out."""
        while self._idle:
            worker = self._idle.pop(0)
            if worker.alive():
                return worker
            worker.kill()
        return None

    def _start(self, arm_clock: bool) -> WorkerHandle:
        zygote = self._live_zygote()
        if zygote is not None:
            try:
                worker = zygote.fork_worker(self.limits, arm_clock)
            except ZygoteError as exc:
                log.warning("%s; spawning this worker instead", exc)
                self.last_error = exc
                with self._zygote_lock:
                    self._zygote_failures += 1
                    self._want_zygote &= self._zygote_failures < _ZYGOTE_FAILURES_TOLERATED
            else:
                self._zygote_failures = 0
                return worker
        return spawn_worker(self.limits, arm_clock=arm_clock, **self._start_args)

    def _live_zygote(self) -> ZygoteClient | None:
        """The zygote once it is ready, (re)started if it died; None once it failed too
        often or is off."""
        with self._zygote_lock:
            if not self._want_zygote:
                return None
            if self._zygote is not None and self._zygote.alive():
                return self._ready_zygote()
            if self._zygote is not None:
                self._zygote.close()
                self._zygote, self._zygote_failures = None, self._zygote_failures + 1
            if self._zygote_failures >= _ZYGOTE_FAILURES_TOLERATED:
                log.warning("sandbox zygote failed %d times; workers are spawned from now on",
                            self._zygote_failures)  # fmt: skip
                self._want_zygote = False
                return None
            return self._ready_zygote() if self._start_zygote() else None

    def _start_zygote(self) -> bool:
        """Start the zygote's process, not waiting for its imports; a failure is counted."""
        self._zygote = new_zygote(self.limits)
        if self._zygote is None:
            self._zygote_failures += 1
        return self._zygote is not None

    def _ready_zygote(self) -> ZygoteClient | None:
        """The zygote once it has said ready; None when it cannot (counted once, logged,
        closed: the next start makes a new one)."""
        try:
            self._zygote.wait_ready()
        except ZygoteError as exc:
            log.warning("no sandbox zygote, workers will be spawned: %s", exc)
            self._zygote.close()
            self._zygote, self._zygote_failures = None, self._zygote_failures + 1
            return None
        return self._zygote

    def _fill(self) -> None:
        """Background loop: drop dead idle workers, start new ones up to `size`."""
        while True:
            with self._cond:
                self._drop_dead()
                while not self._closed and not self._wants_more():
                    self._cond.wait(WAITS.pool_health_check_s)
                    self._drop_dead()
                if self._closed:
                    return
                self._starting += 1
                if self._to_start is not None:
                    self._to_start -= 1
            self._start_one()

    def _wants_more(self) -> bool:
        if self._to_start is not None and self._to_start <= 0:
            return False
        return len(self._idle) + self._starting < self.size

    def _start_one(self) -> None:
        worker, failed = None, False
        try:
            worker = self._start(arm_clock=False)
        except Exception as exc:  # kept for acquire's caller; the loop retries later
            self.last_error, failed = exc, True
        with self._cond:
            self._starting -= 1
            if worker is not None and not self._closed:
                self._idle.append(worker)
                worker = None
            self._cond.notify_all()
        if worker is not None:  # closed while it started
            worker.kill()
        if failed:
            with self._cond:
                self._cond.wait_for(lambda: self._closed, WAITS.pool_retry_s)

    def _drop_dead(self) -> None:
        dead = [w for w in self._idle if not w.alive()]
        for worker in dead:
            self._idle.remove(worker)
            worker.kill()
