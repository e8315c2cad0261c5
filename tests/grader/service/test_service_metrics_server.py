"""A grading node's HTTP side: /metrics for scrapes, /healthz for a container's health check."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from grader.judge import COUNTERS, GradingStats
from grader.node import Metrics, MetricsServer


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


@pytest.fixture
def node():
    state = {"healthy": True}
    server = MetricsServer(
        _free_port(),
        lambda: "gspo_grader_ready 1\n",
        host="127.0.0.1",
        healthy=lambda: state["healthy"],
    )
    server.start()
    yield server, state
    server.stop()


def test_metrics_and_health_are_served_and_anything_else_is_404(node):
    server, state = node
    status, kind, body = _get(server.port, "/metrics")
    assert (status, body) == (200, "gspo_grader_ready 1\n") and kind.startswith("text/plain")
    assert _get(server.port, "/healthz") == (200, "application/json", '{"status": "ok"}')
    state["healthy"] = False  # every judge restarting: the node cannot grade now
    status, kind, body = _get(server.port, "/healthz")
    assert (status, json.loads(body)) == (503, {"status": "unavailable"})
    assert _get(server.port, "/")[0] == 404


def test_port_0_serves_nothing():
    server = MetricsServer(0, lambda: "")
    server.start()
    assert server._server is None
    server.stop()


def test_the_judges_counters_are_summed_over_gradings():
    """GradingStats are not in the student's report: /metrics sums them, one counter each."""
    metrics = Metrics()
    for cpu, calls in ((0.25, 40), (0.5, 60)):
        metrics.observe_stats(None, GradingStats(judge_cpu_seconds=cpu, student_calls=calls))
    text = metrics.render({})
    assert "gspo_grader_judge_cpu_seconds_total 0.75" in text.splitlines()
    assert "gspo_grader_student_calls_total 100" in text.splitlines()
    assert "gspo_grader_worker_cpu_seconds_total 0" in text.splitlines()
    for name in COUNTERS.values():
        assert f"# TYPE {name} counter" in text
