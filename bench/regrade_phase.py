"""(6) Live Submits while a regrade runs: p95 of sequential Submits with no regrade, then
with a regrade preview of `stored` Submits queued below them on the same server (the issue's
target: at most 20 % higher). Called by bench_service.py; it asserts nothing about time."""

from __future__ import annotations

import json
import time

TOKEN = "bench-instructor-token-0123456789abcdef"


def report_regrade(server, n: int, stored: int, code: str, expected) -> None:
    from bench_service import Client, bench_warm, request, summary

    print(f"(6) live Submits with and without a regrade of {stored} stored Submits")
    for i in range(stored):  # the Submits a regrade will grade again
        Client(server.port, f"bench-regrade-{i}", code).submit()
    quiet, *_ = bench_warm(server.port, n, code, expected, name="bench-regrade-quiet")
    print("  " + summary("no regrade", quiet))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, data = request(
        server.port, "POST", "/api/instructor/regrades", {"exercise": "gspo"}, auth
    )
    if status != 200:
        print(f"  the regrade could not start: {status} {data[:200]!r}")
        return
    preview_id = json.loads(data)["preview_id"]
    busy, *_ = bench_warm(server.port, n, code, expected, name="bench-regrade-busy")
    _, data = request(server.port, "GET", f"/api/instructor/regrades/{preview_id}", None, auth)
    shown = json.loads(data)
    print("  " + summary("regrade running", busy))
    print(f"  regrade: {shown['graded']} of {shown['total']} graded when the Submits ended")
    p95 = sorted(busy)[int(0.95 * (len(busy) - 1))] / sorted(quiet)[int(0.95 * (len(quiet) - 1))]
    print(f"  live Submit p95 with a regrade: {100 * (p95 - 1):+.0f} % (target: at most +20 %)")
    while shown["status"] != "ready":  # leave the server idle for the next phase
        time.sleep(0.5)
        shown = json.loads(request(server.port, "GET", f"/api/instructor/regrades/{preview_id}",
                                   None, auth)[1])  # fmt: skip


# ---- on the distributed deployment -------------------------------------------------------
# Each grading node configuration, as the settings its worker process starts with: before
# lanes (every judge may take a regrading, all at the same CPU priority), lanes alone (a
# reserved judge, niced regrade judges), and the defaults (lanes, and a regrading starts
# only after a second with no live grading on the node).
CONFIGS = {
    "no lanes": {
        "GSPO_GRADER_LIVE_JUDGES": "0",
        "GSPO_GRADER_REGRADE_NICE": "0",
        "GSPO_GRADER_REGRADE_LULL_SECONDS": "0",
    },
    "lanes": {
        "GSPO_GRADER_LIVE_JUDGES": "1",
        "GSPO_GRADER_REGRADE_NICE": "10",
        "GSPO_GRADER_REGRADE_LULL_SECONDS": "0",
    },
    "defaults": {
        "GSPO_GRADER_LIVE_JUDGES": "1",
        "GSPO_GRADER_REGRADE_NICE": "10",
        "GSPO_GRADER_REGRADE_LULL_SECONDS": "1",
    },
}


def run_distributed(n: int, stored: int, repeats: int, judges: int, pause: float) -> None:
    """(6d) Live Submits with and without `stored` regradings queued, on the distributed
    deployment (PostgreSQL, one API node, a grading node of `judges` judges), for each node
    configuration of CONFIGS, interleaved over `repeats` rounds: per round and
    configuration, `n` paced Submits with nothing else queued, then `n` while a regrade
    preview of the `stored` Submits runs below them. The two grading nodes run side by side,
    the one not measured stopped (SIGSTOP) with nothing in flight. After each busy block
    the regradings still queued are finished by the bench (ungradable, through the store),
    so the next block starts on an empty queue."""
    import signal
    import statistics
    import tempfile
    from pathlib import Path

    import distributed
    from bench_service import REFERENCE, percentile
    from class_seed import report_of, seed  # the tests' helper (distributed put it on the path)
    from postgres_server import PostgresServer, find_bindir

    from grader.store import open_store

    bindir = find_bindir()
    if bindir is None:
        print("(6d) skipped: PostgreSQL is not installed (scripts/setup.sh --test)")
        return
    code = REFERENCE.read_text()
    server = PostgresServer(bindir)
    server.start()
    rises: dict[str, list[tuple[float, float]]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as scratch:
        url = server.new_database()
        env = {"GSPO_GRADER_INSTRUCTOR_TOKEN": TOKEN, "GSPO_GRADER_MAX_QUEUE": "64",
               "GSPO_GRADER_NAMES_PER_HOUR": "100000"}  # a new student per block  # fmt: skip
        cluster = distributed.Deployment(Path(scratch), url, judges, env)
        store = open_store(url)
        try:
            print(f"(6d) distributed: live Submits with and without {stored} regradings queued")
            started = time.perf_counter()
            graded = report_of("gspo", {"T1::stored": "passed"}, 20.0)
            for i in range(stored):  # graded once already: what the regrade grades again
                seed(store, f"bench-stored-{i}", graded, i, code)
            print(f"  {stored} stored Submits seeded in {time.perf_counter() - started:.0f} s")
            nodes = {}
            for name, settings in CONFIGS.items():
                seconds = cluster.add_worker(settings)
                nodes[name] = cluster.workers[-1]
                print(f"  grading node '{name}' ({judges} judges) warm after {seconds:.0f} s")
                _live(cluster.port, 5, code, pause)  # its first gradings, and
                time.sleep(10)  # the reference previews it draws at its start, not measured
                nodes[name].process.send_signal(signal.SIGSTOP)
            for round_ in range(1, repeats + 1):
                for name, node in nodes.items():
                    node.process.send_signal(signal.SIGCONT)
                    try:
                        quiet, busy, done = _blocks(cluster, store, n, code, pause)
                    finally:
                        _settle(store)
                        node.process.send_signal(signal.SIGSTOP)
                    q95, b95 = percentile(quiet, 95), percentile(busy, 95)
                    q50, b50 = percentile(quiet, 50), percentile(busy, 50)
                    rises[name].append((100 * (b50 / q50 - 1), 100 * (b95 / q95 - 1)))
                    print(
                        f"  round {round_} {name:>8}: p50 {q50 * 1000:.0f} -> {b50 * 1000:.0f} "
                        f"ms ({rises[name][-1][0]:+.0f} %), p95 {q95 * 1000:.0f} -> "
                        f"{b95 * 1000:.0f} ms ({rises[name][-1][1]:+.0f} %); {done} "
                        "regradings graded meanwhile"
                    )
            for name, pairs in rises.items():
                p50s, p95s = [p for p, _ in pairs], [p for _, p in pairs]
                print(
                    f"  {name:>8}: live Submit p95 rise median {statistics.median(p95s):+.0f} % "
                    f"(min {min(p95s):+.0f}, max {max(p95s):+.0f}); p50 rise median "
                    f"{statistics.median(p50s):+.0f} % (target: p95 at most +20 %)"
                )
        finally:
            for node in cluster.workers:
                node.process.send_signal(signal.SIGCONT)
            store.close()
            cluster.stop()
            server.destroy()


def _live(port: int, n: int, code: str, pause: float) -> list[float]:
    """`n` paced Submits of `code` by a new student (after 3 not counted), each `pause`
    seconds after the previous answer: their answer times. RuntimeError unless every one
    was answered 200 with a passing report (a refused Submit is fast, and no measure)."""
    import secrets

    from bench_service import Client, correct

    client = Client(port, f"bench-live-{secrets.token_hex(4)}", code)
    times = []
    for i in range(n + 3):
        time.sleep(pause)
        client.reconnect()
        seconds, status, parsed = client.submit()
        if status != 200 or not correct(parsed, None):
            raise RuntimeError(f"a live Submit was answered {status}, not a passing verdict")
        if i >= 3:
            times.append(seconds)
    return times


def _blocks(cluster, store, n: int, code: str, pause: float):
    """One configuration's quiet block, then its busy block: the answer times of each and
    how many regradings were graded during the busy one."""
    from bench_service import request

    quiet = _live(cluster.port, n, code, pause)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, data = request(
        cluster.port, "POST", "/api/instructor/regrades", {"exercise": "gspo"}, auth
    )
    if status != 200:
        raise RuntimeError(f"the regrade could not start: {status} {data[:200]!r}")
    preview_id = json.loads(data)["preview_id"]
    busy = _live(cluster.port, n, code, pause)
    regrade = store.regrade(preview_id)
    done = sum(store.grading(i.new_grading_id).status == "done" for i in regrade.items)
    return quiet, busy, done


def _settle(store) -> None:
    """Finish every grading still queued (the bench's own leftovers: ungradable, no
    score) and wait until none is being graded, so the next block starts on an empty
    queue and its node can be stopped with nothing in flight."""
    from sqlalchemy import select

    from grader.store import GradingResult
    from grader.store.schema import gradings

    with store.engine.connect() as c:
        queued = list(c.scalars(select(gradings.c.grading_id).where(gradings.c.status == "queued")))
    for grading_id in queued:
        store.finish(grading_id, GradingResult("{}"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with store.engine.connect() as c:
            busy = c.scalar(select(gradings.c.grading_id).where(gradings.c.status == "grading"))
        if busy is None:
            return
        time.sleep(0.2)
    raise RuntimeError("a grading was still running 120 s after the queue was emptied")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="(6d) live Submits during a regrade, distributed")
    parser.add_argument("--requests", type=int, default=20, help="live Submits per block (20)")
    parser.add_argument("--stored", type=int, default=1000, help="Submits regraded (1000)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per configuration (3)")
    parser.add_argument("--judges", type=int, default=2, help="judges of the grading node (2)")
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between Submits")
    args = parser.parse_args(argv)
    run_distributed(args.requests, args.stored, args.repeats, args.judges, args.pause)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
