"""Entry point of the sandboxed worker and of the zygote.

    python -I -B <worker folder>/main.py --limits '<Limits as JSON>' [--zygote]

Run as a file, this folder is not a package, yet its modules use relative imports (so the
judge can import the same code as `grader.sandbox.worker`). The bootstrap below loads the
folder as a package under a neutral name, drops the folder from sys.path so the submission
cannot import worker modules by their plain names, and calls `start` from that package.

Order matters: import torch, set one thread, pay torch's lazy imports, apply the limits, and
only then read the submission (the judge sends it after the "ready" frame). The zygote stops
before the limits: each worker it forks applies its own once confined.
"""

import sys


def start(argv: list[str]) -> int:
    """Serve one judge on fd 3 (a worker), or fork workers for it (the zygote)."""
    import argparse
    import socket

    import torch

    from . import rlimits, serve, zygote
    from .confine import session_follows_niceness
    from .contract import CHANNEL_FD, Limits

    session_follows_niceness()  # a session of its own (bwrap --new-session)

    parser = argparse.ArgumentParser(prog="gspo-worker", description="sandboxed worker")
    parser.add_argument("--limits", default="{}", help="the launcher's Limits as JSON")
    parser.add_argument("--zygote", action="store_true", help="fork workers (see zygote.py)")
    parser.add_argument("--fd", type=int, default=CHANNEL_FD, help="the connected socket")
    args = parser.parse_args(argv)
    limits = Limits.from_json(args.limits)
    torch.set_num_threads(1)  # no intra-op pool: a pre-started worker stays cheap, and a
    warm_up(torch)  # process that started one must not fork (the zygote does fork)
    if args.zygote:
        return zygote.run_zygote(args.fd)
    rlimits.apply(limits.as_dict())
    return serve.serve_guarded(socket.socket(fileno=args.fd), limits.wire())


def warm_up(torch) -> None:
    """Pay torch's lazy imports now, not in the student's first timed call: the first
    `autograd.grad` with explicit grad_outputs imports sympy (~1 s), the first meta-device op
    imports torch._dynamo and more (seconds). Scalar, single-threaded ops: no pool starts."""
    leaf = torch.zeros((), requires_grad=True)
    torch.autograd.grad([leaf * 2], [leaf], [torch.ones(())], allow_unused=True)
    torch.empty(1, device="meta") + 1


if __name__ == "__main__" and not __package__:
    import importlib.util
    import os

    _here = os.path.dirname(os.path.abspath(__file__))
    _spec = importlib.util.spec_from_file_location(
        "gspo_worker", os.path.join(_here, "__init__.py"), submodule_search_locations=[_here]
    )
    _package = importlib.util.module_from_spec(_spec)
    sys.modules["gspo_worker"] = _package
    _spec.loader.exec_module(_package)
    if sys.path and os.path.abspath(sys.path[0] or ".") == _here:
        del sys.path[0]
    from gspo_worker.main import start as _start

    sys.exit(_start(sys.argv[1:]))
