"""Round trip of one small call plus its backward through the sandbox proxy, against a local call.

    python bench/proxy_roundtrip.py [--n 200] [--B 4] [--L 8]

Both sides run the reference `gspo_loss(logp, old_logp, adv, mask).backward()` on the same
tensors; the proxy side sends them to a sandboxed worker (two round trips: the call and the
backward). Prints median and p95 of each, the overhead the sandbox adds, and the time of an
empty round trip (on a busy machine, waiting to be scheduled dominates everything else).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from grader.sandbox.remote import open_student

REPO = Path(__file__).resolve().parent.parent


def load_reference():
    spec = importlib.util.spec_from_file_location("gspo_reference", REPO / "reference" / "gspo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_step(step: Callable[[], None], n: int) -> list[float]:
    """Milliseconds per call of `step`, after a few warm-up calls."""
    for _ in range(5):
        step()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def summary(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"{name:<8} median {statistics.median(samples):7.3f} ms   p95 {p95:7.3f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--B", type=int, default=4)
    parser.add_argument("--L", type=int, default=8)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    logp = (-torch.rand(args.B, args.L) * 3).requires_grad_()  # [B, L]
    old_logp = logp.detach() + 0.1 * torch.randn(args.B, args.L)  # [B, L]
    adv, mask = torch.randn(args.B), torch.ones(args.B, args.L)  # [B], [B, L]

    def step(impl) -> Callable[[], None]:
        def run() -> None:
            logp.grad = None
            impl.gspo_loss(logp, old_logp, adv, mask).backward()

        return run

    local = time_step(step(load_reference()), args.n)
    source = (REPO / "reference" / "gspo.py").read_text()
    started = time.perf_counter()
    with open_student(source, functions=("sequence_ratio", "gspo_loss")) as student:
        ready = time.perf_counter() - started
        remote = time_step(step(student), args.n)  # no forecast: one round trip per call
        isolation = student.isolation
    print(f"B={args.B} L={args.L} n={args.n}; worker start + load {ready:.2f} s; {isolation}")
    print(summary("local", local))
    print(summary("proxy", remote))
    overhead = statistics.median(remote) - statistics.median(local)
    print(f"overhead median {overhead:.3f} ms per call + backward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
