"""(7) A class's load: right and wrong code mixed, against the reference-only figures of the
same run, and optionally against a baseline tree in interleaved runs.

    python bench/class_mix.py                          # the whole corpus, each file 4 times
    python bench/class_mix.py --quick                  # a sample, each file twice (minutes)
    python bench/class_mix.py --quick --baseline /work/wt-base   # A B A B against that tree

The mix comes from each exercise of the catalog (GSPO at the root, DPO under exercises/): its
`tests/implementations/` correct/ (must pass), wrong/ and stubs/ (must fail) and its starter
(must fail), each file submitted `--repeat` times by `--clients` threads, every thread its own
student, to a real server on 127.0.0.1 started as bench_service.py starts it. Every verdict is
checked. One run of a tree ("measure") prints, all measured in that run:

  cold     `python -c "import torch"` and a cold CLI grading of the reference (fresh
           processes), their ratio; a submission that loops forever graded by a cold CLI;
  warm     paced Submits of the reference: p50, and p50 over the cold CLI's median;
  mix      the class's mix under load: gradings/s, p50 and p95, whole and right/wrong apart,
           the counters over the load, and the whole machine's CPU a grading split by
           process: the server (API, node, SQLite), the node's plotting process, the
           judges, the zygote, the workers, the bench's own clients, and the rest (kernel
           threads, others); then the CPU of the server and its plotting process after the
           phase until both are idle again: the toy's plots of new results, drawn after
           each verdict, which the phase's own window misses; and how many toy results
           had their plots drawn, and how many found them drawn already;
  ref      the reference alone, as many gradings by as many clients: the same figures;
  cost     each distinct file of the mix once, one at a time, the service's /metrics
           counters read before and after each: CPU per grading (judge, worker), round trips
           (`gspo_grader_round_trips_total`, "n/a" where the tree lacks it), the share of
           student calls answered from calls sent ahead, for right and wrong code apart and
           for the reference. It comes after the load: run first, it drew the plots of every
           distinct result, and the mix then had none to draw, unlike a real class;
  hung     the looping submissions through the warm server: one whose every function
           loops, one whose first function loops beside others that return at once.

With `--baseline PATH` (an older checkout: PATH/.venv/bin/python when present, else this
python with PYTHONPATH=PATH), the runs alternate baseline and this tree `--rounds` times and
a table gives each figure's median on both, the spread (min-max) over the rounds and the
ratio this/baseline. It asserts nothing about time.

The server grades every Submit, the same file again included: the figures are the grading's
own. With `--reuse` it reuses the verdict of code it graded before (the service's default,
grader/node/reuse.py), as a class's real service would; the load phases then also print how
many gradings took an earlier report and ran no tier.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import bench_service as bench

ROUND_TRIPS = "gspo_grader_round_trips_total"
JUDGE_CPU = "gspo_grader_judge_cpu_seconds_total"
WORKER_CPU = "gspo_grader_worker_cpu_seconds_total"
CALLS = "gspo_grader_student_calls_total"
AHEAD = "gspo_grader_calls_answered_ahead_total"
COLLECTED = "gspo_grader_sessions_collected_total"  # gradings that collected their session
PLOTS_DRAWN = "gspo_grader_plots_drawn_total"  # toy results drawn (once per distinct result)
PLOTS_REUSED = "gspo_grader_plots_reused_total"
VERDICTS_REUSED = "gspo_grader_verdicts_reused_total"  # gradings that ran no tier (--reuse)
RIGHT_KINDS = ("correct", "reference")
CLI_TIMEOUT_S = 600
Completed = subprocess.CompletedProcess


# ---- the trees ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tree:
    """A checkout to measure: its root, the python that runs it, the environment it needs."""

    label: str
    root: Path
    python: str
    env: dict[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def current(cls) -> Tree:
        return cls("this tree", bench.ROOT, bench.PY)

    @classmethod
    def at(cls, path: Path) -> Tree:
        root = path.resolve()
        own = root / ".venv" / "bin" / "python"
        if own.exists():
            return cls(f"baseline {root}", root, str(own))
        path_var = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
        return cls(f"baseline {root}", root, bench.PY, {"PYTHONPATH": path_var})

    def environ(self, **extra: str) -> dict[str, str]:
        return {**os.environ, **self.env, **extra}

    def run(self, argv: list[str], timeout: float = CLI_TIMEOUT_S) -> tuple[float, Completed]:
        """A fresh process of this tree's python: (wall seconds, the completed process)."""
        start = time.perf_counter()
        done = subprocess.run(
            [self.python, *argv],
            cwd=self.root,
            env=self.environ(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return time.perf_counter() - start, done


CATALOG_CODE = """
import json
from grader.exercise import catalog
print(json.dumps([{"id": e.id, "root": str(e.root), "starter": str(e.starter),
                   "reference": str(e.reference), "functions": list(e.function_names)}
                  for e in catalog().values()]))
"""


@dataclass(frozen=True)
class Entry:
    """One file of the mix: which exercise, what kind (correct, wrong, stubs, starter,
    reference), and its code."""

    exercise: str
    kind: str
    name: str
    code: str

    @property
    def right(self) -> bool:
        return self.kind in RIGHT_KINDS


def catalog(tree: Tree) -> list[dict]:
    """The tree's own catalog, as its grader reads it."""
    _, done = tree.run(["-c", CATALOG_CODE], timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{tree.label}: the catalog could not be read: {done.stderr[-500:]}")
    return json.loads(done.stdout)


def spaced(items: list, count: int | None) -> list:
    """`count` items evenly spaced over the list (all of them for None): the same sample on
    every tree whose corpus holds the same files."""
    if count is None or count >= len(items):
        return items
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def corpus(tree: Tree, sample: tuple[int, int] | None) -> tuple[list[Entry], dict[str, Entry]]:
    """Every distinct file of the mix (with `sample` (right, wrong): that many of each kind
    per exercise, evenly spaced; stubs and the starter always), and each exercise's reference."""
    files, references = [], {}
    for exercise in catalog(tree):
        root, eid = Path(exercise["root"]), exercise["id"]
        implementations = root / "tests" / "implementations"
        for kind in ("correct", "wrong", "stubs"):
            paths = sorted((implementations / kind).glob("*.py"))
            if sample and kind != "stubs":
                paths = spaced(paths, sample[0] if kind == "correct" else sample[1])
            files += [Entry(eid, kind, f"{eid}:{kind}/{p.stem}", p.read_text()) for p in paths]
        starter = Path(exercise["starter"])
        files.append(Entry(eid, "starter", f"{eid}:starter", starter.read_text()))
        reference = Path(exercise["reference"])
        references[eid] = Entry(eid, "reference", f"{eid}:reference", reference.read_text())
    return files, references


LOOPS = "    while True:\n        pass\n"


def hung_codes(functions: list[str]) -> dict[str, str]:
    """Submissions that never return, by kind: every function loops, or only the first
    while the others return 0 at once (their tests must not wait behind the loop)."""
    first = [LOOPS if k == 0 else "    return 0\n" for k in range(len(functions))]
    kinds = {"every function loops": [LOOPS] * len(functions), "first function loops": first}
    return {
        kind: f'"""{kind.capitalize()} (bench/class_mix.py)."""'
        + "".join(
            f"\n\ndef {name}(*args, **kwargs):\n{body}"
            for name, body in zip(functions, bodies, strict=True)
        )
        for kind, bodies in kinds.items()
    }


# ---- verdicts -------------------------------------------------------------------------------
def outcome(entry: Entry, status: int, parsed: dict | None) -> str:
    """ "ok" (the expected verdict), "wrong verdict", "grader error", "timed out or crashed"
    (right code whose call ran past its limit or whose worker died: a starved machine, the
    way check-exercise counts it), or what the transport said."""
    if status == 503:
        return "refused (503)"
    if status == 202:
        return "not answered in the verdict wait (202)"
    if parsed is None:
        return f"no answer (HTTP {status})"
    report = parsed["report"]
    if report.get("grader_error"):
        return "grader error"
    if bool(report["passed"]) == entry.right:
        return "ok"
    error = report.get("submission_error") or {}
    if entry.right and error.get("kind") in ("crash", "timeout"):
        return "timed out or crashed"
    return "wrong verdict"


@dataclass
class Tally:
    """Outcomes of a phase, and the files whose verdict was not the expected one."""

    counts: dict[str, int] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)

    def add(self, entry: Entry, result: str) -> None:
        self.counts[result] = self.counts.get(result, 0) + 1
        if result != "ok":
            self.bad.append(f"{entry.name}: {result}")

    def line(self) -> str:
        total = sum(self.counts.values())
        ok = self.counts.get("ok", 0)
        rest = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()) if k != "ok")
        shown = "; ".join(sorted(set(self.bad))[:6])
        return f"verdicts as expected: {ok}/{total}" + (f" ({rest}: {shown})" if rest else "")


# ---- phases on a running server -------------------------------------------------------------
def submit(client: bench.Client, entry: Entry) -> tuple[float, int, dict | None]:
    client.code, client.exercise = entry.code, entry.exercise
    return client.submit()


def cost(port: int, entries: list[Entry], prefix: str) -> tuple[dict[str, dict], Tally]:
    """Each entry once, one at a time, the counters read before and after each: the sums by
    class ("right", "wrong", "reference") of each counter, and the gradings counted."""
    client = bench.Client(port, f"{prefix}-cost", "")
    sums: dict[str, dict] = {}
    tally = Tally()
    for entry in entries:
        before = bench.counters(port)
        status_parsed = submit(client, entry)
        after = bench.counters(port)
        tally.add(entry, outcome(entry, *status_parsed[1:]))
        group = "reference" if entry.kind == "reference" else ("right" if entry.right else "wrong")
        into = sums.setdefault(group, {"gradings": 0})
        into["gradings"] += 1
        for name in (JUDGE_CPU, WORKER_CPU, CALLS, AHEAD, ROUND_TRIPS):
            if name in after:
                into[name] = into.get(name, 0.0) + after[name] - before.get(name, 0.0)
        one = sum(after.get(n, 0.0) - before.get(n, 0.0) for n in (JUDGE_CPU, WORKER_CPU))
        into.setdefault("cpu_s", []).append(one)  # this grading's judge + worker CPU
    return sums, tally


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (every process: the server,
    its judges and workers, the database, these clients), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(n) for n in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


ROLES = (  # a process's role, from its command line; the first match counts
    ("judges", "grader.judge_process"),
    ("zygote", "--zygote"),  # with its forks' own CPU; the workers are counted apart
    ("server", "grader.service import serve"),  # the API, the node, SQLite (and plots, in
    # a tree without a plotting process)
    ("plots", " import serve_plots"),  # the node's plotting process (before 740a01d too)
)
# whose CPU a process's ended children were: a judge recycled (every 200 gradings) or
# replaced is reaped by the server, a zygote by its judge
CHILDREN_OF = {"server": "judges", "judges": "zygote", "zygote": "zygote", "plots": "plots"}
AFTER_ROLES = ("server", "plots")  # what works on after a load phase: the toy's plots


def cpu_by_role() -> dict[str, float]:
    """CPU seconds by role, summed over the live processes: each one's own time, and that of
    its children it has waited for counted to the children's role (CHILDREN_OF), and this
    process ("bench clients": the load's own HTTP clients). A worker is killed with its pid
    namespace once its grading ends, so no parent waits for it and its CPU appears in no
    process: the judges' worker counter gives it."""
    tick = os.sysconf("SC_CLK_TCK")
    spent = {"bench clients": sum(os.times()[:2])}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        role = next((name for name, mark in ROLES if mark in command), None)
        if role is not None:  # utime and stime; then cutime and cstime, its ended children's
            spent[role] = spent.get(role, 0.0) + sum(int(n) for n in fields[11:13]) / tick
            heir = CHILDREN_OF[role]
            spent[heir] = spent.get(heir, 0.0) + sum(int(n) for n in fields[13:15]) / tick
    return spent


SETTLE_LIMIT_S = 180.0  # the longest wait for the server to finish its work after a phase


def after_cpu_s() -> float:
    roles = cpu_by_role()
    return sum(roles.get(name, 0.0) for name in AFTER_ROLES)


def settle() -> tuple[float, float]:
    """Wait until the server's work after a load phase is done (the toy's plots of new
    results are drawn after the verdict, one at a time): until the CPU of the server and
    its plotting process grows by less than 2 % over a second. (seconds waited, their CPU
    seconds over the wait)."""
    began, start = time.perf_counter(), after_cpu_s()
    last = start
    while time.perf_counter() - began < SETTLE_LIMIT_S:
        time.sleep(1.0)
        now = after_cpu_s()
        if now - last < 0.02:
            return time.perf_counter() - began, now - start
        last = now
    return time.perf_counter() - began, last - start


def load(port: int, entries: list[Entry], clients: int, prefix: str):
    """`clients` threads, each its own student, taking the next entry of `entries` until
    none is left: (elapsed s, [(entry, seconds, outcome)], counters over the load, with the
    machine's busy CPU seconds as "machine_cpu_s")."""
    todo, lock, done = list(reversed(entries)), threading.Lock(), []

    def student(i: int) -> None:
        client = bench.Client(port, f"{prefix}-{i}", "")
        while True:
            with lock:
                if not todo:
                    return
                entry = todo.pop()
            seconds, status, parsed = submit(client, entry)
            if status == 503:  # the queue is full: take it again a little later
                with lock:
                    todo.append(entry)
                time.sleep(0.2)
                continue
            with lock:
                done.append((entry, seconds, outcome(entry, status, parsed)))

    before, busy, roles = bench.counters(port), machine_busy_s(), cpu_by_role()
    threads = [threading.Thread(target=student, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    after, busy = bench.counters(port), machine_busy_s() - busy
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    by_role = {f"{name} cpu_s": s - roles.get(name, 0.0) for name, s in cpu_by_role().items()}
    waited, after_s = settle()
    settled = bench.counters(port)  # the plots of the load's results are drawn by now
    plots = {name: settled[name] - before.get(name, 0.0)
             for name in (PLOTS_DRAWN, PLOTS_REUSED) if name in settled}  # fmt: skip
    late = {"server after cpu_s": after_s, "settle_s": waited, **plots}
    return elapsed, done, {**spent, **by_role, **late, "machine_cpu_s": busy}


# ---- one run of one tree --------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    quick: bool
    repeat: int
    clients: int
    pool_size: int
    concurrent: int
    cold_runs: int
    warm_requests: int
    pause_s: float
    seed: int
    reuse: bool = False  # the server reuses the verdicts of code graded before


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def per_grading(sums: dict, name: str, scale: float = 1.0) -> float | None:
    """A counter's mean per grading; None when the tree has no such counter."""
    if name not in sums or not sums.get("gradings"):
        return None
    return sums[name] / sums["gradings"] * scale


def ahead_share(sums: dict) -> float | None:
    if CALLS not in sums or AHEAD not in sums:
        return None
    return 100 * sums[AHEAD] / sums[CALLS] if sums[CALLS] else None


def fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def measure(tree: Tree, settings: Settings) -> dict[str, float | None]:
    """Every phase on `tree`, on a server of its own; the figures by name (None: n/a)."""
    files, references, hung = mix_of(tree, settings)
    figures, cold = measure_cold(tree, settings, hung)
    with tempfile.TemporaryDirectory() as data_dir:
        server = bench.Server(
            Path(data_dir),
            settings.pool_size,
            settings.concurrent,
            python=tree.python,
            root=tree.root,
            env=tree.env,
            reuse=settings.reuse,
        )
        try:
            print(f"  server healthy after {server.wait_ready(300):.1f} s")
            figures |= measure_server(server.port, files, references, hung, settings, cold, "mix")
        finally:
            server.stop()
    return figures


def mix_of(tree: Tree, settings: Settings) -> tuple[list[Entry], dict[str, Entry], dict[str, str]]:
    """The distinct files of the mix, the references, the looping submissions by kind."""
    files, references = corpus(tree, (2, 4) if settings.quick else None)
    print(
        f"[{tree.label}] {len(files)} distinct files ({sum(e.right for e in files)} right) "
        f"from {', '.join(references)}"
    )
    return files, references, hung_codes(catalog(tree)[0]["functions"])


def measure_cold(tree: Tree, settings: Settings, hung: dict[str, str]) -> tuple[dict, list[float]]:
    """Fresh processes: `import torch`, a CLI grading of the root exercise's reference, of
    each looping submission. The figures, and the reference's cold times."""
    figures: dict[str, float | None] = {}
    root_exercise = catalog(tree)[0]

    torch_s = [tree.run(["-c", "import torch"])[0] for _ in range(settings.cold_runs)]
    reference = Path(root_exercise["reference"])
    cold = []
    for _ in range(settings.cold_runs):
        seconds, done = tree.run(["-m", "grader", "grade", str(reference), "--json", "-"])
        if done.returncode == 0:
            cold.append(seconds)
        else:
            print(
                f"  cold CLI of the reference failed (exit {done.returncode}): "
                f"{done.stderr.strip()[-300:]}"
            )
    figures["import torch s"] = median(torch_s)
    figures["cold CLI s"] = median(cold)
    figures["cold CLI / import torch"] = (
        figures["cold CLI s"] / figures["import torch s"] if cold else None
    )
    print(
        f"  cold: import torch {fmt(figures['import torch s'], ' s', 2)}, CLI grading of "
        f"the reference {fmt(figures['cold CLI s'], ' s', 2)} (median of "
        f"{settings.cold_runs}): {fmt(figures['cold CLI / import torch'], 'x', 2)} "
        f"(target <= 2x)"
    )

    for kind, code in hung.items():
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "hung.py"
            path.write_text(code)
            seconds, done = tree.run(["-m", "grader", "grade", str(path), "--json", "-"])
        verdict = "failed" if done.returncode == 1 else f"exit {done.returncode} (expected 1)"
        figures[f"hung cold CLI s ({kind})"] = seconds
        print(
            f"  hung code, {kind}, cold CLI: verdict in {seconds:.1f} s, {verdict} (target <= 15 s)"
        )
    figures["hung cold CLI s"] = max(figures[f"hung cold CLI s ({kind})"] for kind in hung)
    return figures, cold


def measure_server(port, files, references, hung, settings: Settings, cold, prefix) -> dict:
    """The phases that need a running server (bench_service.py calls this on its own)."""
    figures: dict[str, float | None] = {}
    waited, spent = settle()  # "healthy" comes before a node's helpers (the plotter) idle
    print(f"  server and plots idle {waited:.1f} s after healthy ({spent:.2f} s of CPU meanwhile)")
    first = next(iter(references.values()))
    warm, _, _, ok = bench.bench_warm(
        port, settings.warm_requests, first.code, None, settings.pause_s, f"{prefix}-warm"
    )
    answered = ok == len(warm)  # a refused Submit answers at once: no figure then
    figures["warm Submit p50 ms"] = bench.percentile(warm, 50) * 1000 if answered else None
    figures["warm p50 / cold CLI"] = (
        bench.percentile(warm, 50) / statistics.median(cold) if cold and answered else None
    )
    print(
        f"  warm Submit of {first.name}, paced: p50 {fmt(figures['warm Submit p50 ms'], ' ms')}, "
        f"{fmt(figures['warm p50 / cold CLI'], 'x', 3)} of the cold CLI (target <= 0.03x); "
        f"passed {ok}/{len(warm)}"
    )

    mix = [entry for entry in files for _ in range(settings.repeat)]
    random.Random(settings.seed).shuffle(mix)
    reference_only = [references[e.exercise] for e in mix]  # same exercises, same count
    for label, entries in (("mix", mix), ("ref", reference_only)):
        what = "class mix" if label == "mix" else "reference only"
        elapsed, done, spent = load(port, entries, settings.clients, f"{prefix}-{label}")
        tally = Tally()
        for entry, _, result in done:
            tally.add(entry, result)
        times = [seconds for _, seconds, _ in done]
        figures[f"{label} gradings/s"] = len(done) / elapsed
        figures[f"{label} p50 s"] = bench.percentile(times, 50)
        figures[f"{label} p95 s"] = bench.percentile(times, 95)
        graded = {"gradings": len(done), **spent}
        judge, worker = per_grading(graded, JUDGE_CPU, 1000), per_grading(graded, WORKER_CPU, 1000)
        figures[f"{label} load CPU ms"] = (judge or 0) + (worker or 0)
        figures[f"{label} machine CPU ms"] = per_grading(graded, "machine_cpu_s", 1000)
        figures[f"{label} load ahead %"] = ahead_share(graded)
        figures[f"{label} load round trips"] = per_grading(graded, ROUND_TRIPS)
        figures[f"{label} load collected %"] = per_grading(graded, COLLECTED, 100)
        print(
            f"  {what}: {len(done)} gradings by {settings.clients} clients in {elapsed:.1f} s: "
            f"{figures[f'{label} gradings/s']:.2f} gradings/s, p50 "
            f"{figures[f'{label} p50 s']:.2f} s, p95 {figures[f'{label} p95 s']:.2f} s; CPU "
            f"{figures[f'{label} load CPU ms']:.0f} ms a grading (the whole machine: "
            f"{fmt(figures[f'{label} machine CPU ms'], ' ms')}), round trips "
            f"{fmt(figures[f'{label} load round trips'], '', 1)}, calls answered ahead "
            f"{fmt(figures[f'{label} load ahead %'], '%')}, gradings that collected their "
            f"pytest session {fmt(figures[f'{label} load collected %'], '%')}"
            + (f", verdicts reused {graded[VERDICTS_REUSED]:.0f}" if settings.reuse else "")
        )
        roles = {name: per_grading(graded, f"{name} cpu_s", 1000) for name in
                 ("server", "plots", "judges", "zygote", "bench clients")}  # fmt: skip
        roles["workers"] = worker  # a killed worker's CPU reaches no parent: its own count
        machine = figures[f"{label} machine CPU ms"] or 0.0
        roles["the rest"] = machine - sum(ms or 0.0 for ms in roles.values())
        for name, ms in roles.items():
            figures[f"{label} {name} CPU ms"] = ms
        print("    the machine's CPU a grading, by process: " + ", ".join(
            f"{name} {fmt(ms, ' ms')}" for name, ms in roles.items()))  # fmt: skip
        late = figures[f"{label} server after CPU ms"] = per_grading(
            graded, "server after cpu_s", 1000
        )
        print(
            f"    and after the phase, until the server and its plots were idle "
            f"({graded['settle_s']:.1f} s: the "
            f"toy's plots of its new results, drawn after each verdict): {fmt(late, ' ms')} "
            "more a grading"
        )
        drawn = figures[f"{label} plots drawn"] = graded.get(PLOTS_DRAWN)
        reused = figures[f"{label} plots reused"] = graded.get(PLOTS_REUSED)
        print(
            f"    toy results whose plots were drawn: {fmt(drawn)}, already drawn: "
            f"{fmt(reused)} (plots are drawn once per distinct result)"
        )
        if label == "mix":
            for side, is_right in (("right", True), ("wrong", False)):
                some = [s for e, s, _ in done if e.right == is_right]
                figures[f"mix {side} p50 s"] = bench.percentile(some, 50) if some else None
                figures[f"mix {side} p95 s"] = bench.percentile(some, 95) if some else None
                print(
                    f"    {side} code: {len(some)} gradings, p50 "
                    f"{fmt(figures[f'mix {side} p50 s'], ' s', 2)}, p95 "
                    f"{fmt(figures[f'mix {side} p95 s'], ' s', 2)}"
                )
        print(f"    {tally.line()}")
        figures[f"{label} unexpected verdicts"] = float(len(tally.bad))
    ratio = figures["mix gradings/s"] / figures["ref gradings/s"]
    figures["mix / ref gradings/s"] = ratio
    print(f"  class mix / reference only, gradings/s: {ratio:.2f}x")
    sums, tally = cost(port, [*references.values(), *files], prefix)
    print(f"  cost: each distinct file once, one at a time; {tally.line()}")
    for group in ("right", "wrong", "reference"):
        s = sums.get(group, {})
        judge, worker = per_grading(s, JUDGE_CPU, 1000), per_grading(s, WORKER_CPU, 1000)
        total = judge + worker if judge is not None and worker is not None else None
        figures[f"{group} CPU ms"] = total
        figures[f"{group} judge CPU ms"] = judge
        figures[f"{group} worker CPU ms"] = worker
        figures[f"{group} round trips"] = per_grading(s, ROUND_TRIPS)
        figures[f"{group} ahead %"] = ahead_share(s)
        each = [1000 * seconds for seconds in s.get("cpu_s", [])]
        spread = f" ({min(each):.0f}-{max(each):.0f})" if len(each) > 1 else ""
        print(
            f"    {group:9} ({s.get('gradings', 0)} gradings): CPU {fmt(total, ' ms')}{spread} "
            f"(judge {fmt(judge, ' ms')} + worker {fmt(worker, ' ms')}), round trips "
            f"{fmt(figures[f'{group} round trips'], '', 1)}, calls answered ahead "
            f"{fmt(figures[f'{group} ahead %'], '%')}"
        )
    right, wrong = figures["right CPU ms"], figures["wrong CPU ms"]
    figures["wrong / right CPU"] = wrong / right if right and wrong is not None else None
    print(
        f"    wrong / right CPU per grading: {fmt(figures['wrong / right CPU'], 'x', 2)} "
        f"(target <= 1.1x)"
    )

    for number, (kind, code) in enumerate(hung.items()):
        client = bench.Client(port, f"{prefix}-hung-{number}", code)
        seconds, status, parsed = client.submit()
        passed = parsed["report"]["passed"] if parsed else None
        figures[f"hung warm s ({kind})"] = seconds
        print(
            f"  hung code, {kind}, warm Submit: verdict in {seconds:.1f} s (HTTP {status}, "
            f"passed={passed}; target <= 12 s)"
        )
    figures["hung warm s"] = max(figures[f"hung warm s ({kind})"] for kind in hung)
    return figures


# ---- the comparison -------------------------------------------------------------------------
def num(value: float) -> str:
    """About three significant digits, never in exponent form."""
    size = abs(value)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 1 else 3
    return f"{value:.{digits}f}"


def table(order: list[Tree], results: dict[Tree, list[dict]]) -> None:
    """Each figure: median on each tree with its spread over the rounds, and this/baseline."""
    baseline, this = order
    names = list(dict.fromkeys(name for runs in results.values() for r in runs for name in r))
    print(f"\nfigure{' ' * 26}{'baseline':>20} {'this tree':>20}  this/baseline")
    for name in names:
        cells, medians = [], []
        for tree in (baseline, this):
            values = [r[name] for r in results[tree] if r.get(name) is not None]
            if not values:
                cells.append("n/a")
                medians.append(None)
                continue
            m = statistics.median(values)
            medians.append(m)
            spread = f" ({num(min(values))}-{num(max(values))})" if len(values) > 1 else ""
            cells.append(f"{num(m)}{spread}")
        ratio = "n/a" if None in medians or not medians[0] else f"{medians[1] / medians[0]:.2f}x"
        print(f"{name:32}{cells[0]:>20} {cells[1]:>20}  {ratio}")


def settings_for(
    quick: bool,
    clients: int = 16,
    repeat: int | None = None,
    pool_size: int = 4,
    concurrent: int = 2,
    seed: int = 25,
    reuse: bool = False,
) -> Settings:
    return Settings(
        quick=quick,
        repeat=repeat or (2 if quick else 4),
        clients=clients,
        pool_size=pool_size,
        concurrent=concurrent,
        cold_runs=1 if quick else 3,
        warm_requests=5 if quick else 20,
        pause_s=1.0,
        seed=seed,
        reuse=reuse,
    )


def phase(port: int, settings: Settings) -> None:
    """(7) of bench_service.py: every phase on this tree, the load on its running server."""
    this = Tree.current()
    print(
        f"(7) class mix ({'a sample' if settings.quick else 'the whole corpus'}, each file "
        f"{settings.repeat} times, {settings.clients} clients): bench/class_mix.py"
    )
    files, references, hung = mix_of(this, settings)
    _, cold = measure_cold(this, settings, hung)
    measure_server(port, files, references, hung, settings, cold, "phase7")


def compare(baseline: Path, settings: Settings, rounds: int) -> None:
    """Baseline and this tree alternately (A B A B ...), then the table of figures."""
    order = [Tree.at(baseline), Tree.current()]
    results: dict[Tree, list[dict]] = {tree: [] for tree in order}
    for round_ in range(rounds):
        for tree in order:
            print(f"\n== round {round_ + 1}/{rounds}: {tree.label} ==")
            results[tree].append(measure(tree, settings))
    table(order, results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a sample: 2 right, 4 wrong per exercise, each twice"
    )
    parser.add_argument("--repeat", type=int, default=None, help="times each file is submitted (4)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--pool-size", type=int, default=4)
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="an older checkout to compare with, in interleaved runs",
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="with --baseline: runs of each tree, alternating (2)"
    )
    parser.add_argument("--seed", type=int, default=25, help="the shuffle of the mix")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="the server reuses verdicts of code it graded before (off: each Submit graded)",
    )
    args = parser.parse_args(argv)
    settings = settings_for(
        args.quick,
        args.clients,
        args.repeat,
        args.pool_size,
        args.concurrent,
        args.seed,
        args.reuse,
    )
    print(f"machine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    if args.baseline is None:
        measure(Tree.current(), settings)
    else:
        compare(args.baseline, settings, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
