"""The distributed phase of bench_service.py: the same Submits through PostgreSQL (grading
rows claimed by grading nodes), in the same run as the embedded phases.

It starts a private PostgreSQL (initdb + pg_ctl in a temporary folder, as the tests do),
`gspo-grader db upgrade`, one API node (`gspo-grader serve`) and grading nodes
(`gspo-grader worker`), all on 127.0.0.1, and prints:
  (4) paced sequential Submits: p50 and p95, and what the queue adds: each answer's time
      minus the grading time in its report is the service's overhead (HTTP, queue, store,
      waiting for the verdict); distributed minus embedded (phase 2, same run), at p50 and
      p95 (aim: < 30 ms at p50). Grading times vary by hundreds of milliseconds on a shared
      machine, so comparing whole answer times would drown the queue in that noise;
  (5) throughput under load with one grading node, then with two.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_service as bench

sys.path.insert(0, str(bench.ROOT / "tests" / "grader" / "service"))
from postgres_server import PostgresServer, find_bindir  # the tests' helper


class Node:
    """`python -m grader ARGS` with the distributed settings; its log in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        with open(log, "wb") as sink:
            self.process = subprocess.Popen(
                [bench.PY, "-m", "grader", *args], cwd=bench.ROOT, env=env, stdout=sink,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def wait_http(port: int, path: str, want: str = "", timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status, data = bench.request(port, "GET", path)
            if status == 200 and want in data.decode():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"127.0.0.1:{port}{path} did not answer in {timeout} s")


class Deployment:
    def __init__(self, folder: Path, url: str, judges: int, env: dict[str, str] | None = None):
        self.folder, self.judges, self.workers = folder, judges, []
        self.env = {
            **os.environ,
            "GSPO_GRADER_DATABASE_URL": url,
            "GSPO_GRADER_LOG_LEVEL": "warning",
            **(env or {}),
        }
        self.env |= {"GSPO_GRADER_VERDICT_WAIT_SECONDS": "300", "GSPO_GRADER_MAX_QUEUE": "64"}
        done = subprocess.run([bench.PY, "-m", "grader", "db", "upgrade"], env=self.env,
                              capture_output=True, text=True, cwd=bench.ROOT)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        self.port = bench.free_port()
        self.api = Node(["serve", "--port", str(self.port)], self.env, folder / "api.log")
        wait_http(self.port, "/api/exercise")

    def add_worker(self, env: dict[str, str] | None = None) -> float:
        """Start a grading node (its settings: the deployment's, then `env`) and wait until
        its judges are warm; the seconds that took. Its metrics port: `node.metrics_port`."""
        start, metrics = time.perf_counter(), bench.free_port()
        args = ["worker", "--concurrency", str(self.judges), "--metrics-port", str(metrics)]
        log = self.folder / f"worker-{len(self.workers)}.log"
        node = Node(args, {**self.env, **(env or {})}, log)
        node.metrics_port = metrics
        self.workers.append(node)
        wait_http(metrics, "/metrics", "gspo_grader_ready 1")
        return time.perf_counter() - start

    def rss(self) -> tuple[int, int]:
        tree = [p for n in [self.api, *self.workers] for p in bench.process_tree(n.process.pid)]
        return sum(map(bench.rss_bytes, tree)), sum(map(bench.pss_bytes, tree))

    def stop(self) -> None:
        for node in [*self.workers, self.api]:
            node.stop()


def run(n: int, pause: float, clients: int, duration: float, judges: int, embedded) -> None:
    """`embedded`: the service overheads (seconds) of phase (2), paced, from the same run."""
    bindir = find_bindir()
    if bindir is None:
        print("(4) distributed: skipped, PostgreSQL is not installed (scripts/setup.sh --test)")
        return
    server = PostgresServer(bindir)
    server.start()
    with tempfile.TemporaryDirectory() as scratch:
        cluster = Deployment(Path(scratch), server.new_database(), judges)
        try:
            print(f"(4) distributed: 1 API node, 1 worker of {judges} judges, PostgreSQL")
            print(f"  worker warm after {cluster.add_worker():.1f} s")
            code = bench.REFERENCE.read_text()
            warm, grading, _, ok = bench.bench_warm(cluster.port, n, code, None, pause)
            print("  " + bench.summary("distributed warm", warm) + f"; correct {ok}/{n}")
            overhead = [total - graded for total, graded in zip(warm, grading, strict=False)]
            print("  " + bench.summary("service overhead", overhead))
            if overhead and embedded:
                added = [
                    (bench.percentile(overhead, q) - bench.percentile(embedded, q)) * 1000
                    for q in (50, 95)
                ]
                print(
                    f"  added by the queue (distributed minus embedded overhead): "
                    f"p50 {added[0]:+.0f} ms, p95 {added[1]:+.0f} ms (aim: < 30 ms at p50)"
                )
            for workers in (1, 2):
                if workers == 2:
                    print(f"  second worker warm after {cluster.add_worker():.1f} s")
                throughput(cluster, workers, clients, duration, code)
        finally:
            cluster.stop()
            server.destroy()


def throughput(cluster: Deployment, workers: int, clients: int, duration: float, code: str) -> None:
    print(f"(5) {clients} clients for {duration:.0f} s, {workers} worker process(es)")
    name = f"bench-distributed-{workers}"
    times, outcomes, elapsed, peak = bench.bench_load(cluster, clients, duration, code, None, name)
    graded = outcomes["ok"] + outcomes["wrong"]
    print(
        f"  correct {outcomes['ok']}, wrong {outcomes['wrong']}, refused {outcomes['refused']}, "
        f"errors {outcomes['error']}; p50={bench.percentile(times, 50) * 1000:.0f} ms "
        f"p99={bench.percentile(times, 99) * 1000:.0f} ms"
    )
    print(f"  throughput: {graded / elapsed:.2f} gradings/s; peak PSS {peak[1] / 2**20:.0f} MiB")
