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
