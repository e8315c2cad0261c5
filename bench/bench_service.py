"""Benchmark the grading service against cold grading, in one run, on loopback only.

    python bench/bench_service.py            # full run (about 2-3 minutes here)
    python bench/bench_service.py --quick    # smoke run (fewer requests, 10 s of load)

It prints these figures and asserts nothing about time:
  1. cold: `python -m grader grade reference/gspo.py --json -` as a fresh process, a few
     times: the baseline, a grading with nothing warm (a fresh pytest over the tiers);
  2. warm: Submit of the reference over HTTP to a real server, sequentially: p50/p95, and how
     many times faster than (1) (target: p50 <= cold/10 and under 300 ms), the CPU one warm
     grading costs in the judge and in the sandboxed worker (from the reports' metrics);
     (2c) Submits that alternate the exercises (what switching exercise costs);
  3. load: N concurrent clients submitting for a while: all answered correctly?, p99,
     gradings/s, peak memory (PSS and summed RSS) of the server's process tree;
  4. and 5. the distributed deployment (bench/distributed.py): what the queue adds to a
     Submit, and throughput with one and two worker processes (skip: --no-distributed);
  6. live Submit p95 with and without a regrade running (bench/regrade_phase.py; only this
     phase: --regrade-only);
  7. a class's mix of right and wrong code beside the reference alone (bench/class_mix.py;
     skip: --no-class-mix); with --baseline PATH, on that checkout and this tree alternately.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference" / "gspo.py"
PY = sys.executable
from regrade_phase import TOKEN as REGRADE_TOKEN  # noqa: E402
from regrade_phase import report_regrade  # noqa: E402

TIMEOUT_S = 300  # per request; a request that takes longer counts as an error


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def timed_process(argv: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - start, done


def bench_cold(runs: int) -> tuple[list[float], dict | None]:
    """(1) One fresh CLI process per grading."""
    times, report = [], None
    for _ in range(runs):
        seconds, done = timed_process([PY, "-m", "grader", "grade", str(REFERENCE), "--json", "-"])
        if done.returncode not in (0, 1):
            print(f"  cold CLI failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
            return times, None
        report = json.loads(done.stdout)
        times.append(seconds)
    return times, report


class Server:
    """`grader.service.serve` in a subprocess on 127.0.0.1; `rss()` sums its process tree."""

    def __init__(self, data_dir: Path, pool_size: int, concurrent: int, python: str = PY,
                 root: Path = ROOT, env: dict[str, str] | None = None,
                 reuse: bool = False):  # fmt: skip
        """`python`, `root`, `env`: another checkout's (class_mix.py --baseline); `reuse`:
        the service reuses verdicts of code it graded before (off: every Submit of the same
        file is graded, so the figures are the grading's own; a tree without the setting
        ignores it)."""
        self.port = free_port()
        env = {**os.environ, **(env or {}), "GSPO_GRADER_POOL_SIZE": str(pool_size)}
        env |= {"GSPO_GRADER_MAX_CONCURRENT": str(concurrent), "GSPO_GRADER_MAX_QUEUE": "64"}
        env["GSPO_GRADER_LOG_LEVEL"] = "warning"
        # every student comes from 127.0.0.1 (20 new names an hour by default), and a loaded
        # queue outlasts the default verdict wait (20 s, then 202 and the page polls)
        env |= {"GSPO_GRADER_NAMES_PER_HOUR": "100000", "GSPO_GRADER_VERDICT_WAIT_SECONDS": "300"}
        env["GSPO_GRADER_INSTRUCTOR_TOKEN"] = REGRADE_TOKEN
        env["GSPO_GRADER_REUSE_VERDICTS"] = "true" if reuse else "false"
        code = (
            f"from grader.service import serve; serve('127.0.0.1', {self.port}, {str(data_dir)!r})"
        )
        self.process = subprocess.Popen([python, "-c", code], cwd=root, env=env)

    def wait_ready(self, timeout: float = 120.0) -> float:
        start = time.perf_counter()
        while time.perf_counter() - start < timeout:
            try:
                status, _ = request(self.port, "GET", "/healthz")
                if status == 200:
                    return time.perf_counter() - start
            except OSError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError("the server exited during start-up")
            time.sleep(0.1)
        raise RuntimeError("the server did not become healthy in time")

    def rss(self) -> tuple[int, int]:
        """(RSS, PSS) summed over the server's process tree. Forked sandbox workers share
        the zygote's pages, which RSS counts once per process; PSS splits each shared page
        between its sharers, so its sum is the memory the tree really holds."""
        tree = process_tree(self.process.pid)
        return sum(rss_bytes(pid) for pid in tree), sum(pss_bytes(pid) for pid in tree)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def pss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def request(port, method, path, body=None, headers=None, conn=None):
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    payload = json.dumps(body).encode() if body is not None else None
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    conn.request(method, path, body=payload, headers=all_headers)
    response = conn.getresponse()
    data = response.read()
    if own:
        conn.close()
    return response.status, data


class Client:
    """One student submitting the reference over a kept-alive connection."""

    def __init__(self, port: int, name: str, code: str, exercise: str | None = None):
        self.port, self.name, self.code, self.key = port, name, code, None
        self.exercise = exercise
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)

    def reconnect(self) -> None:
        self.conn.close()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)

    def submit(self) -> tuple[float, int, dict | None]:
        """(seconds, HTTP status or 0 for a transport error, parsed body or None)."""
        headers = {"X-Student-Key": self.key} if self.key else {}
        body = {"code": self.code, "student": self.name}
        if self.exercise:
            body["exercise"] = self.exercise
        start = time.perf_counter()
        try:
            status, data = request(self.port, "POST", "/api/submit", body, headers, self.conn)
        except (OSError, http.client.HTTPException):
            self.reconnect()  # a timed-out connection cannot be reused
            return time.perf_counter() - start, 0, None
        seconds = time.perf_counter() - start
        parsed = json.loads(data) if status == 200 else None
        if parsed and parsed.get("student_key"):
            self.key = parsed["student_key"]
        return seconds, status, parsed


def correct(parsed: dict | None, expected_score: float | None) -> bool:
    if parsed is None:
        return False
    report = parsed["report"]
    return report["passed"] and (expected_score is None or report["score"] == expected_score)


def counters(port: int) -> dict[str, float]:
    """The service's /metrics counters that end in `_total` and carry no labels."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.endswith("_total") and not line.startswith("#"):
            found[name] = float(value)
    return found


def bench_warm(
    port: int, n: int, code: str, expected_score, pause: float = 0.0, name: str | None = None
):
    """(2) Sequential warm Submits: latencies, the grader's own times (one per answered
    request, in order), the count correct, and the grader's counters over the phase
    (/metrics: CPU in the judge and in the sandboxed worker, student calls, calls answered
    from calls sent ahead).

    With `pause`, each request waits that long after the previous answer, so the pools have
    refilled their pre-started workers (a class where Submits do not arrive back to back).
    `name`: the student's, new on this server (a taken name without its key is refused)."""
    name = name or f"bench-warm-{'paced' if pause else 'back-to-back'}"
    client = Client(port, name, code)
    for _ in range(3):  # warm-up: the first requests create the student and touch caches
        client.submit()
    times, grading, ok = [], [], 0
    before = counters(port)
    for _ in range(n):
        if pause:
            time.sleep(pause)
            client.reconnect()  # the server closes a keep-alive connection idle for 5 s
        seconds, _, parsed = client.submit()
        times.append(seconds)
        ok += correct(parsed, expected_score)
        if parsed:
            grading.append(parsed["report"]["timings"]["total_s"])
    after = counters(port)
    spent = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    return times, grading, spent, ok


def bench_switching(port: int, n: int, codes: dict[str, str]):
    """(2c) Sequential Submits that alternate exercises, each exercise's reference: the
    answer times of each exercise, and the count that passed."""
    clients = {ex: Client(port, f"bench-switch-{ex}", code, ex) for ex, code in codes.items()}
    times: dict[str, list[float]] = {ex: [] for ex in codes}
    ok = 0
    for i in range(n):
        exercise = list(codes)[i % len(codes)]
        seconds, _, parsed = clients[exercise].submit()
        times[exercise].append(seconds)
        ok += correct(parsed, None)
    return times, ok


def classify(status: int, parsed: dict | None, expected_score) -> str:
    if status == 503:
        return "refused"
    if status == 0:
        return "error"
    return "ok" if correct(parsed, expected_score) else "wrong"


MEMORY_SAMPLE_S = 5.0  # how often the load phase reads the process tree's memory


def bench_load(
    server: Server, clients: int, duration: float, code: str, expected_score, name="bench-load"
):
    """(3) `clients` threads, students `name`-0.., submitting back to back for `duration` s."""
    lock, times = threading.Lock(), []
    outcomes = {"ok": 0, "wrong": 0, "refused": 0, "error": 0}
    stop_at = time.perf_counter() + duration
    peak = [server.rss()]

    def student(i: int) -> None:
        client = Client(server.port, f"{name}-{i}", code)
        while time.perf_counter() < stop_at:
            seconds, status, parsed = client.submit()
            with lock:
                times.append(seconds)
                outcomes[classify(status, parsed, expected_score)] += 1

            if status == 503:
                time.sleep(0.2)

    threads = [threading.Thread(target=student, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    next_sample = time.perf_counter() + MEMORY_SAMPLE_S
    while any(t.is_alive() for t in threads):
        if time.perf_counter() >= next_sample:  # reading PSS costs ~0.1 s of CPU: the
            peak[0] = tuple(map(max, peak[0], server.rss()))  # load must not pay for it
            next_sample += MEMORY_SAMPLE_S
        time.sleep(0.2)
    elapsed = time.perf_counter() - start
    return times, outcomes, elapsed, peak[0]


def summary(label: str, values: list[float]) -> str:
    if not values:
        return f"{label}: no data"
    ms = [v * 1000 for v in values]
    return (
        f"{label}: n={len(ms)} median={statistics.median(ms):.0f} ms "
        f"p95={percentile(ms, 95):.0f} ms min={min(ms):.0f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--duration", type=float, default=None, help="load phase seconds (60)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=None, help="warm requests per phase (30)")
    parser.add_argument("--pool-size", type=int, default=4)
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument(
        "--pause", type=float, default=1.0, help="seconds between paced warm requests (1)"
    )
    parser.add_argument("--no-distributed", action="store_true", help="skip phases 4 and 5")
    parser.add_argument("--regrade-only", action="store_true", help="only phase 6 (a regrade)")
    parser.add_argument("--no-class-mix", action="store_true", help="skip phase 7")
    parser.add_argument(
        "--baseline", type=Path, default=None,
        help="an older checkout: phase 7 runs on it and on this tree alternately, compared",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2, help="with --baseline: runs of each (2)")
    args = parser.parse_args(argv)
    cold_runs = 2 if args.quick else 3
    n_warm = args.requests or (10 if args.quick else 30)
    duration = args.duration or (10.0 if args.quick else 60.0)
    code = REFERENCE.read_text()
    import class_mix

    mix_settings = class_mix.settings_for(args.quick, args.clients, None, args.pool_size,
                                          args.concurrent)  # fmt: skip

    print(f"machine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    if args.regrade_only:
        with tempfile.TemporaryDirectory() as data_dir:
            server = Server(Path(data_dir), args.pool_size, args.concurrent)
            try:
                server.wait_ready()
                report_regrade(server, n_warm, 2 * n_warm, code, None)
            finally:
                server.stop()
        return 0
    print("(1) cold CLI grading of reference/gspo.py")
    cold, cold_report = bench_cold(cold_runs)
    print("  " + summary("cold", cold))
    expected = cold_report["score"] if cold_report else None
    if cold_report:
        print(
            f"  verdict: passed={cold_report['passed']} score={expected}/{cold_report['max_score']}"
        )

    with tempfile.TemporaryDirectory() as data_dir:
        server = Server(Path(data_dir), args.pool_size, args.concurrent)
        try:
            print(f"  server healthy after {server.wait_ready():.1f} s (pool {args.pool_size})")
            # paced first: every request finds a pre-started worker (the warm latency)
            _, _, overhead = report_phase_2(server, n_warm, code, expected, cold, args.pause)
            report_phase_2(server, n_warm, code, expected, cold)
            report_switching(server, n_warm)
            metrics = cold_report.get("metrics", {}) if cold_report else {}  # before report 3.0
            report_phase_3(server, args.clients, duration, code, expected, metrics)
            report_regrade(server, n_warm, 10 * n_warm, code, expected)
            if not args.no_class_mix and args.baseline is None:
                class_mix.phase(server.port, mix_settings)
        finally:
            server.stop()
    if not args.no_class_mix and args.baseline is not None:
        print(f"(7) class mix, interleaved with {args.baseline} (bench/class_mix.py)")
        class_mix.compare(args.baseline, mix_settings, args.rounds)

    if not args.no_distributed:
        import distributed

        distributed.run(n_warm, args.pause, args.clients, duration, args.concurrent, overhead)
    return 0


def report_phase_2(
    server: Server, n: int, code: str, expected, cold: list[float], pause: float = 0.0
) -> tuple[float, float, list[float]]:
    paced = f", each {pause:g} s after the previous answer" if pause else ", back to back"
    print(f"(2) warm Submit over HTTP, {n} sequential requests{paced}")
    warm, grading, spent, ok = bench_warm(server.port, n, code, expected, pause)
    print("  " + summary("warm", warm))
    print("  " + summary("of which grading (report.timings.total_s)", grading))
    judge_cpu = spent.get("gspo_grader_judge_cpu_seconds_total", 0.0) / n * 1000
    worker_cpu = spent.get("gspo_grader_worker_cpu_seconds_total", 0.0) / n * 1000
    print(
        f"  CPU per grading (mean, /metrics): judge {judge_cpu:.0f} ms, sandboxed worker "
        f"{worker_cpu:.0f} ms"
    )
    calls = spent.get("gspo_grader_student_calls_total", 0.0)
    ahead = spent.get("gspo_grader_calls_answered_ahead_total", 0.0)
    print(f"  student calls answered from calls sent ahead: {ahead / max(calls, 1) * 100:.0f}%")
    trips = spent.get("gspo_grader_round_trips_total", 0.0)
    print(f"  round trips per grading (requests the judge waited for): {trips / n:.1f}")
    overhead = [total - graded for total, graded in zip(warm, grading, strict=False)]
    if overhead:
        print("  " + summary("service overhead (answer time minus grading time)", overhead))
    print(f"  answered correctly: {ok}/{n}")
    p50 = percentile(warm, 50)
    if cold:
        ratio = statistics.median(cold) / p50
        print(f"  cold median / warm p50 = {ratio:.1f}x (target >= 10x; p50 target < 300 ms)")
    return p50, percentile(warm, 95), overhead


def report_switching(server: Server, n: int) -> None:
    from grader.exercise import catalog

    codes = {ex.id: ex.reference.read_text() for ex in catalog().values()}
    print(f"(2c) warm Submit over HTTP, {n} sequential requests alternating {', '.join(codes)}")
    times, ok = bench_switching(server.port, n, codes)
    for exercise, values in times.items():
        print("  " + summary(exercise, values))
    print(f"  answered correctly (each reference passed): {ok}/{n}")


def report_phase_3(
    server: Server, clients: int, duration: float, code: str, expected, metrics: dict
) -> None:
    print(f"(3) {clients} concurrent clients for {duration:.0f} s")
    times, outcomes, elapsed, peak = bench_load(server, clients, duration, code, expected)
    total = sum(outcomes.values())
    graded = outcomes["ok"] + outcomes["wrong"]
    print(
        f"  requests: {total}; correct {outcomes['ok']}, wrong {outcomes['wrong']}, "
        f"refused (503) {outcomes['refused']}, transport errors {outcomes['error']}; "
        f"all answered correctly: {outcomes['ok'] == total}"
    )
    if times:
        print(
            f"  p50={percentile(times, 50) * 1000:.0f} ms p99={percentile(times, 99) * 1000:.0f} ms"
        )
    print(f"  throughput: {graded / elapsed:.2f} gradings/s (aim 5/s)")
    tests, calls = metrics.get("tests_total"), metrics.get("student_calls")
    if tests and calls:  # what compares releases whose tier suites differ in size
        print(
            f"  work: {graded / elapsed * tests:.0f} tests/s, {graded / elapsed * calls:.0f} "
            f"student calls/s ({tests:.0f} tests and {calls:.0f} calls a grading)"
        )
    rss, pss = peak
    print(f"  peak memory of the server process tree: PSS {pss / 2**20:.0f} MiB (RSS summed")
    print(f"  over its processes, counting shared pages once per process: {rss / 2**20:.0f} MiB)")


if __name__ == "__main__":
    raise SystemExit(main())
