"""CPU per grading of a warm judge, this tree against another one, interleaved.

    .venv/bin/python bench/judge_cpu.py --baseline /path/to/other/checkout
    .venv/bin/python bench/judge_cpu.py --baseline ../main --rounds 10 FILE.py ...

Each tree gets one process with a warm Grader of one judge (its own `grader` package, put
first on PYTHONPATH; the same Python and the same files for both). Round after round, each
process grades every file once on Submit, the two taking turns, so both see the same load
from the rest of the machine. Per file and tree it prints the judge's CPU per grading
(GradingStats.judge_cpu_seconds: the judge process, collecting its session included), the
worker's and the grading's wall time, as median [min-max] over the rounds, the round trips,
the score (which must be the same in both trees), and the ratios of the medians: the
judge's CPU, and the judge's and the worker's together. Without FILEs: the reference, the
starter and five wrong files of the corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WRONG = ("forgot_exp", "no_clipping", "loss_not_negated", "batch_sum", "empty_batch_crash")
DEFAULT_FILES = [
    ROOT / "reference" / "gspo.py",
    ROOT / "starter" / "gspo.py",
    *(ROOT / "tests" / "implementations" / "wrong" / f"{name}.py" for name in WRONG),
]


def serve() -> None:
    """The child: grade what each stdin line asks for, answer one JSON line each."""
    from grader.judge import Grader

    stats = []
    with Grader(pool_size=1, on_stats=lambda report, one: stats.append(one)) as grader:
        grader.wait_ready()
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            request = json.loads(line)
            began = time.perf_counter()
            report = grader.grade(request["source"], "submit", exercise=request["exercise"])
            wall_s = time.perf_counter() - began
            one = stats.pop() if stats else None
            print(json.dumps({
                "score": report.score,
                "judge_cpu_s": one.judge_cpu_seconds if one else None,
                "worker_cpu_s": one.worker_cpu_seconds if one else None,
                "round_trips": one.round_trips if one else None,
                "wall_s": wall_s,
            }), flush=True)  # fmt: skip


class Tree:
    """A child process serving gradings with the `grader` package of `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=root,
        )  # fmt: skip

    def ready(self) -> None:
        if not json.loads(self.process.stdout.readline()).get("ready"):
            raise SystemExit(f"the grader of {self.root} did not start")

    def grade(self, source: str, exercise: str | None) -> dict:
        self.process.stdin.write(json.dumps({"source": source, "exercise": exercise}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the grader of {self.root} ended")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def spread(values: list[float]) -> str:
    ms = sorted(1000 * value for value in values)
    return f"{statistics.median(ms):5.0f} ms [{ms[0]:.0f}-{ms[-1]:.0f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="submissions (default: see above)")
    parser.add_argument("--baseline", type=Path, help="the other tree's root (required)")
    parser.add_argument("--rounds", type=int, default=5, help="gradings of each file per tree")
    parser.add_argument("--exercise", default=None, help="the exercise id (default: the root's)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return 0
    if args.baseline is None:
        parser.error("--baseline is required: the root of the tree to compare with")
    files = args.files or DEFAULT_FILES
    sources = {path: path.read_text(encoding="utf-8") for path in files}
    trees = {"baseline": Tree(args.baseline.resolve()), "this tree": Tree(ROOT)}
    try:
        for tree in trees.values():
            tree.ready()
        results = {(name, path): [] for name in trees for path in files}
        for _ in range(args.rounds):
            for path, source in sources.items():
                for name, tree in trees.items():
                    results[name, path].append(tree.grade(source, args.exercise))
    finally:
        for tree in trees.values():
            tree.close()
    print(f"judge and worker CPU per grading, median [min-max] of {args.rounds} interleaved rounds")
    for path in files:
        label = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        medians = {}
        for name in trees:
            runs = results[name, path]
            judge = [run["judge_cpu_s"] for run in runs]
            both = [run["judge_cpu_s"] + run["worker_cpu_s"] for run in runs]
            medians[name] = statistics.median(judge), statistics.median(both)
            scores = sorted({run["score"] for run in runs})
            worker = spread([run["worker_cpu_s"] for run in runs])
            wall = spread([run["wall_s"] for run in runs])
            shown = ", ".join(f"{score:g}" for score in scores)
            print(f"  {label!s:48s} {name:9s} judge {spread(judge)}  worker {worker}  "
                  f"wall {wall}  round trips {runs[-1]['round_trips']}  "
                  f"score {shown}")  # fmt: skip
        pairs = zip(medians["this tree"], medians["baseline"], strict=True)
        ratios = [now / then if then else float("nan") for now, then in pairs]
        print(f"  {'':48s} CPU ratio (this tree / baseline): judge {ratios[0]:.2f}, "
              f"judge + worker {ratios[1]:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
