"""A judge process: `python -m grader.judge_process --fd N [--limits JSON] [--warm] [--one-shot]
[--nice N]`.

A plain loop: receive a request, grade it, send the report, then collect the next pytest
session while nobody waits (see engine/; the messages are in link.py). With --warm it
first grades every exercise's reference once, so no student pays for a first import; it
keeps sandboxed workers started ahead (a WorkerPool), and --one-shot starts one worker and
no replacement, and collects no next session (the CLI grading a single file).

This process is the trusted judge: it never imports or executes student code.

It lies outside the `grader.judge` package because its first act is to start its sandbox's
zygote, whose imports (~2 s) are the longest path of a cold grading: started as a module of
that package, Python would import the package's face first (the Grader's side and the report
model, ~0.15 s). So only the sandbox's light face is imported at the top; the judge's
modules, after the pool has started.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import traceback
from multiprocessing.connection import Connection

from grader.sandbox import WAITS, Limits, WorkerPool
from grader.sandbox.worker.confine import session_follows_niceness

log = logging.getLogger(__name__)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="grader.judge.process")
    parser.add_argument("--fd", type=int, required=True, help="the link socket's descriptor")
    parser.add_argument("--limits", default=None, help="Limits as JSON (default: from env)")
    parser.add_argument("--warm", action="store_true", help="grade each reference once first")
    parser.add_argument("--one-shot", action="store_true", help="one worker, no replacement")
    parser.add_argument("--spare-workers", type=int, default=1, help="workers kept started")
    parser.add_argument("--nice", type=int, default=0, help="added to the CPU niceness")
    return parser.parse_args(argv)


def run_judge(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.nice:  # first, on the one thread: every later thread and child inherits it
        os.nice(args.nice)
    session_follows_niceness()  # the Grader started this judge in a session of its own
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the engine names its one plugin
    link = Connection(args.fd)
    _quiet_stdout()
    _log_to_stderr()
    limits = Limits.from_json(args.limits) if args.limits else Limits.from_env()
    workers = 1 if args.one_shot else args.spare_workers
    pool = WorkerPool(workers, limits, refill=not args.one_shot)
    from grader.exercise import catalog
    from grader.judge.engine import Judge  # imports torch and pytest
    from grader.judge.link import GradingRequest, LinkClosed, send

    _prepare_torch()
    judge = Judge(limits, pool)
    try:
        if args.warm:
            for exercise in catalog().values():
                source = exercise.reference.read_text(encoding="utf-8")
                judge.grade(GradingRequest(source=source, exercise=exercise.id))
        gc.freeze()  # torch, pytest and the suites stay: keep them out of every later gc pass
        if not args.one_shot and not pool.wait_filled(WAITS.worker_ready_s):
            # ready means warm, a sandboxed worker waiting too; without one, a grading
            # that finds none starts its own, and the operator learns why
            why = pool.last_error or "still starting"
            log.warning("no sandboxed worker was ready after %g s (%s); a grading that finds "
                        "none starts its own", WAITS.worker_ready_s, why)  # fmt: skip
        ready = {"ready": True, "pid": os.getpid()}
        send(link, {**ready, "grading_wall_seconds": limits.grading_wall_seconds})
        _serve(link, judge, collect_ahead=not args.one_shot)
    except LinkClosed:  # the Grader went away: nothing left to answer
        pass
    finally:
        judge.close()
        pool.close()
    return 0


def _serve(link: Connection, judge, collect_ahead: bool) -> None:
    """Answer requests until told to exit or the Grader goes away; `collect_ahead`: collect
    the next session after each answer (a one-shot judge's only next message is exit)."""
    from grader.judge.link import GradingRequest, receive, send

    judge.prepare(None)
    while (message := receive(link)).get("op") == "grade":
        request = GradingRequest.from_message(message)
        try:
            judge.rehearse(request)  # only before a first grading, while no worker is ready
            report, stats = judge.grade(request)
            answer = {"report": report.model_dump_json(), "stats": stats.as_dict()}
        except Exception:  # a bug of ours: say so, keep serving
            answer = {"error": traceback.format_exc(limit=8)}
        send(link, answer)
        if collect_ahead:
            judge.prepare(request.exercise)


def _quiet_stdout() -> None:
    """pytest's terminal output is not wanted; the report travels over the link."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def _log_to_stderr() -> None:
    """The sandbox's warnings (weaker than bwrap, a zygote that cannot fork) on stderr, which
    the grader passes on to its own (client.py); at GSPO_GRADER_LOG_LEVEL, as the service."""
    name = os.environ.get("GSPO_GRADER_LOG_LEVEL", "info").strip().upper()
    level = logging.getLevelName(name)
    logging.basicConfig(
        level=level if isinstance(level, int) else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )


def _prepare_torch() -> None:
    """One intra-op thread: the judge's tensors are tiny ([B, L] up to 3 x 4096), so a second only
    burns CPU: its spin-waits cost ~0.1 s of CPU a grading, on cores the sandboxed workers
    and the other judges need.

    Then the one lazy import a grading meets here is paid now, while the sandbox's zygote
    still starts (the worker pays its own, main.warm_up): the first `autograd.grad` with
    explicit output gradients (a remote call's backward) imports sympy, ~0.3 s of a cold
    CLI grading's tests otherwise. The judge runs no op on `meta` tensors, so it never
    imports torch._dynamo (~1 s), and does not pay for it."""
    import torch

    torch.set_num_threads(1)
    leaf = torch.zeros((), requires_grad=True)
    torch.autograd.grad([leaf * 2], [leaf], [torch.ones(())])


if __name__ == "__main__":
    code = run_judge()
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown of torch's modules: 0.1-0.2 s of a cold CLI's end
