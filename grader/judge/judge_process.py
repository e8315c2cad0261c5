"""A long-lived judge process: `python -m grader.judge.judge_process --fd N --limits JSON`.

It imports torch, pytest, the plugin and (with --warm) runs one grading of the reference, so
each later grading costs only pytest's collection and the tests themselves. It keeps one
sandboxed worker pre-started (a WorkerPool of one) so a grading never waits for a worker's
torch import. Gradings are served one at a time over the channel on fd N; see channel.py.

This process is the trusted judge: it never imports or executes student code.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import socket
import sys
import threading
import traceback

from grader.exercise import default_exercise
from grader.judge.channel import Channel, ChannelClosed
from grader.sandbox import Limits, WorkerPool
from grader.sandbox.launch import start_worker

STARTUP_TIMEOUT_S = 120.0


class PrestartedWorker:
    """A pool-like source of workers for a one-shot judge: one worker starts at once, in the
    background, while the judge imports pytest and the suites; later acquires (a restart
    after a crash) start a fresh one. Unlike a WorkerPool it never starts a spare."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._first = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="prestart-worker", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._first = start_worker(self.limits, arm_clock=False)
        except Exception as error:  # acquire() re-raises it where the proxy can report it
            self._error = error

    def acquire(self):
        self._thread.join()
        worker, self._first = self._first, None
        if worker is None or not worker.alive():
            if self._error is not None and worker is None:
                error, self._error = self._error, None
                raise error
            worker = start_worker(self.limits, arm_clock=False)
        worker.arm_grading_clock()
        return worker

    def close(self) -> None:
        self._thread.join()
        if self._first is not None:
            with contextlib.suppress(Exception):
                self._first.kill()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="grader.judge.judge_process")
    parser.add_argument("--fd", type=int, required=True, help="the channel socket's fd")
    parser.add_argument("--limits", default=None, help="Limits as JSON (default: from env)")
    parser.add_argument("--warm", action="store_true", help="grade the reference once first")
    parser.add_argument("--one-shot", action="store_true", help="one pre-started worker, no pool")
    parser.add_argument("--spare-workers", type=int, default=1, help="pre-started workers kept")
    return parser.parse_args(argv)


def _quiet_stdout() -> None:
    """pytest's terminal output is not wanted; the report travels over the channel."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def _single_threaded_torch() -> None:
    """The judge's tensors are tiny ([B, L] up to 3 x 4096), so a second intra-op thread only
    burns CPU: its spin-waits cost ~0.1 s of CPU a grading, on cores the sandboxed workers
    and the other judges need."""
    import torch

    torch.set_num_threads(1)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # before pytest is imported; see inline
    channel = Channel(socket.socket(fileno=args.fd))
    _quiet_stdout()
    limits = Limits(**json.loads(args.limits)) if args.limits else Limits.from_env()
    pool = PrestartedWorker(limits) if args.one_shot else WorkerPool(args.spare_workers, limits)
    from grader.judge.inline import run_grading  # imports torch and pytest
    from grader.judge.session import Submission

    _single_threaded_torch()

    exercise = default_exercise()
    if args.warm:
        source = exercise.reference.read_text(encoding="utf-8")
        run_grading(Submission(source=source, limits=limits, pool=pool), exercise)
    gc.freeze()  # torch, pytest and the suites stay: keep them out of every later gc pass
    wait_filled = getattr(pool, "wait_filled", None)
    if wait_filled is not None:  # ready means warm: a sandboxed worker is waiting too
        wait_filled(STARTUP_TIMEOUT_S)
    ready = {"ready": True, "pid": os.getpid()}
    channel.send({**ready, "grading_wall_seconds": limits.grading_wall_seconds})
    try:
        _serve(channel, limits, pool, exercise, Submission, run_grading)
    finally:
        pool.close()
    return 0


class NextRequest:
    """The next grading request, received when a pytest run asks for its submission.

    Each run starts before its request arrives (see plugin.GradingRequest), so pytest's
    configuration and collection (~60 ms) happen while the judge would be idle anyway.
    Calling this blocks for the request; None means stop (exit, or the Grader went away).
    """

    def __init__(self, channel: Channel, submission) -> None:
        self.channel, self.submission = channel, submission
        self.asked = self.stopped = False

    def __call__(self):
        self.asked = True
        try:
            message = self.channel.receive()
        except ChannelClosed:
            message = None
        if message is None or message.get("op") != "grade":
            self.stopped = True
            return None
        return self.submission(message)


def _serve(channel, limits, pool, exercise, submission_type, run_grading) -> None:
    """Answer grading requests until told to stop or the Grader goes away."""

    def submission(message: dict):
        return submission_type(
            source=message["source"],
            filename=message.get("filename") or "submission.py",
            mode=message.get("mode") or "submit",
            tiers=message.get("tiers"),
            limits=limits,
            pool=pool,
            name=message.get("name"),
        )

    while True:
        incoming = NextRequest(channel, submission)
        try:
            answer = {"report": run_grading(incoming, exercise)}
        except Exception:  # a bug of ours: say so, keep serving
            answer = {"error": traceback.format_exc(limit=8)}
        if not incoming.asked:  # the run ended before it asked: it answers the next request
            incoming()
        if incoming.stopped:
            return
        if answer.get("report") is not None:
            answer["report"] = answer["report"].model_dump(mode="json")
        try:
            channel.send(answer)
        except ChannelClosed:
            return


if __name__ == "__main__":
    sys.exit(main())
