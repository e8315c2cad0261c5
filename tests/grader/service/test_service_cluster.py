"""The distributed deployment on one machine: real PostgreSQL, `gspo-grader serve` API
nodes and `gspo-grader worker` grading nodes as separate processes on 127.0.0.1.

What each test proves:
  - an API node refuses an unmigrated database, imports no torch, and answers 202 + status
    when no grading node is there;
  - two API nodes and two grading nodes grade 40 Submits from 8 clients right, one verdict
    each, while one grading node is killed with SIGKILL mid-grading; both API nodes show the
    same histories;
  - a grading node stopped with SIGSTOP does not hold its grading: its heartbeat stops, and
    another node queues the grading again and grades it; the grading node imported no web
    framework;
  - PostgreSQL restarted under load: 503 (never 500) while it is down, nothing
    acknowledged is lost.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from cluster import Cluster, verdict, wait_for
from postgres_server import PostgresServer, find_bindir
from test_service_node import web_modules_of

from grader.exercise import default_exercise

pytestmark = [pytest.mark.service, pytest.mark.sandbox, pytest.mark.slow]

REFERENCE = default_exercise().reference.read_text()
STARTER = default_exercise().starter.read_text()
SLOW_REFERENCE = REFERENCE + "\nimport time\n\ntime.sleep(6)  # at load, in the sandbox\n"


@pytest.fixture
def cluster(postgres, tmp_path):
    started = Cluster(
        postgres.new_database(), tmp_path, stalled_seconds="6", verdict_wait_seconds="1"
    )
    assert started.command("db", "upgrade").returncode == 0
    yield started
    started.stop()


def torch_mapped(pid: int) -> bool:
    """True when a process has loaded torch's native library (any `import torch` does)."""
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def test_an_api_node_needs_a_migrated_database_and_imports_no_torch(postgres, tmp_path):
    fresh = Cluster(postgres.new_database(), tmp_path, verdict_wait_seconds="1")
    try:
        refused = fresh.command("serve", "--port", "1")
        assert refused.returncode == 2
        assert refused.stderr.strip().splitlines()[-1].endswith("run `gspo-grader db upgrade`")
        refused = fresh.command("worker")
        assert refused.returncode == 2 and "db upgrade" in refused.stderr
        assert fresh.command("db", "upgrade").returncode == 0
        node, url = fresh.api()
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.get("/healthz").json()["status"] == "degraded"  # no grading node
            answer = client.post("/api/submit", json={"code": REFERENCE, "student": "ada"})
            assert answer.status_code == 202
            assert answer.json()["status"] == "queued" and answer.json()["position"] == 1
            assert client.post("/api/run", json={"code": REFERENCE}).status_code == 202
        assert not torch_mapped(node.pid), "the API node loaded torch"
    finally:
        fresh.stop()


def test_two_api_nodes_and_two_workers_grade_40_submits_with_a_worker_killed(cluster):
    (_, api_a), (node_b, api_b) = cluster.api(), cluster.api()
    victim, _ = cluster.worker()
    cluster.worker()
    # two grading nodes, by their heartbeats
    wait_for(node_b, f"{api_b}/healthz", timeout=30, body='"workers":2,')
    results: dict[str, list[tuple[str, bool, dict]]] = {}
    keys: dict[str, str] = {}
    killed = threading.Event()

    def client(i: int) -> None:
        student = f"student-{i}"
        for n in range(5):
            expected = (i + n) % 2 == 0
            with httpx.Client(base_url=(api_a, api_b)[(i + n) % 2], timeout=300) as http:
                headers = {"X-Student-Key": keys[student]} if student in keys else {}
                body = {"code": REFERENCE if expected else STARTER, "student": student}
                answer = http.post("/api/submit", json=body, headers=headers)
                assert answer.status_code in (200, 202), answer.text
                keys.setdefault(student, answer.json()["student_key"])
                final = verdict(http, answer, keys[student])
            results.setdefault(student, []).append((final["submission_id"], expected, final))

    def kill_while_grading() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed.is_set():
            metrics = httpx.get(cluster.metrics_urls[2], timeout=5).text
            if "gspo_grader_in_flight 1" in metrics:
                os.kill(victim.pid, signal.SIGKILL)
                killed.set()
            time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    threads.append(threading.Thread(target=kill_while_grading))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(900)
    assert killed.is_set(), "the grading node was never caught grading"
    assert sum(len(v) for v in results.values()) == 40
    for student, done in results.items():
        for submission_id, expected, final in done:
            assert final["status"] == "done", final
            assert final["report"]["passed"] is expected, (submission_id, final["report"])
            assert final["report"]["submission"] == submission_id
        histories = []
        for api in (api_a, api_b):
            listing = httpx.get(
                f"{api}/api/submissions",
                params={"student": student},
                headers={"X-Student-Key": keys[student]},
            ).json()["submissions"]
            histories.append(listing)
        assert histories[0] == histories[1]
        assert sorted(i["submission_id"] for i in histories[0]) == sorted(d[0] for d in done)
        assert all(i["status"] == "done" for i in histories[0])


def test_a_stopped_worker_does_not_hold_its_job(cluster):
    _, api = cluster.api()
    cluster.env["PYTHONPROFILEIMPORTTIME"] = "1"  # its log lists every module it imported
    stopped, _ = cluster.worker()
    del cluster.env["PYTHONPROFILEIMPORTTIME"]
    with httpx.Client(base_url=api, timeout=120) as http:
        answer = http.post("/api/submit", json={"code": SLOW_REFERENCE, "student": "ada"})
        key = answer.json()["student_key"]
        url = f"/api/submissions/{answer.json()['submission_id']}"
        deadline = time.monotonic() + 60
        while (
            status := http.get(url, headers={"X-Student-Key": key}).json()["status"]
        ) != "grading":
            assert status == "queued" and time.monotonic() < deadline, status
            time.sleep(0.1)
        os.kill(stopped.pid, signal.SIGSTOP)
        try:
            cluster.worker()
            final = verdict(http, http.get(url, headers={"X-Student-Key": key}), key, timeout=180)
        finally:
            os.kill(stopped.pid, signal.SIGCONT)
        assert final["status"] == "done" and final["report"]["passed"] is True
        time.sleep(8)  # the stopped node wakes up and finishes its grading too
        again = http.get(url, headers={"X-Student-Key": key}).json()
        assert again["report"] == final["report"]  # the verdict was written once
    assert web_modules_of(stopped.log.read_text()) == set()


def test_postgres_restarted_under_load_answers_503_and_loses_nothing(tmp_path):
    server = PostgresServer(find_bindir())
    server.start()
    cluster = Cluster(server.new_database(), tmp_path, verdict_wait_seconds="2")
    try:
        assert cluster.command("db", "upgrade").returncode == 0
        _, api = cluster.api()
        cluster.worker()
        acknowledged: list[tuple[str, str]] = []
        statuses: list[int] = []
        stop = threading.Event()

        def load(i: int) -> None:
            key = None
            with httpx.Client(base_url=api, timeout=60) as http:
                while not stop.is_set():
                    headers = {"X-Student-Key": key} if key else {}
                    body = {"code": REFERENCE, "student": f"load-{i}"}
                    answer = http.post("/api/submit", json=body, headers=headers)
                    statuses.append(answer.status_code)
                    if answer.status_code in (200, 202):
                        key = answer.json()["student_key"]
                        acknowledged.append((answer.json()["submission_id"], key))
                        verdict(http, answer, key)
                    else:
                        time.sleep(0.2)

        threads = [threading.Thread(target=load, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(5)
        server.stop("fast")
        time.sleep(4)
        server.start()
        time.sleep(8)
        stop.set()
        for thread in threads:
            thread.join(300)
        assert 500 not in statuses and 503 in statuses, sorted(set(statuses))
        assert acknowledged
        with httpx.Client(base_url=api, timeout=60) as http:
            for submission_id, key in acknowledged:
                final = verdict(
                    http,
                    http.get(f"/api/submissions/{submission_id}", headers={"X-Student-Key": key}),
                    key,
                )
                assert final["status"] == "done" and final["report"]["passed"] is True
    finally:
        cluster.stop()
        server.destroy()
