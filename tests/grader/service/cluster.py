"""Processes of the distributed deployment for the tests: API nodes (`gspo-grader serve`)
and grading nodes (`gspo-grader worker`) over one PostgreSQL, each in its own session on
127.0.0.1, with a log file; everything a test started is killed at its end."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from postgres_server import free_port

SLACK_ENV = {  # a shared 2-core test machine can starve a call for seconds
    "GSPO_GRADER_SANDBOX_CALL_WALL_SECONDS": "60",
    "GSPO_GRADER_SANDBOX_GRADING_WALL_SECONDS": "240",
    "GSPO_GRADER_SANDBOX_CPU_SECONDS": "120",
}


class Node:
    def __init__(self, argv: list[str], env: dict[str, str], log: Path):
        self.log = log
        with open(log, "wb") as sink:
            self.process = subprocess.Popen(
                argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)


class Cluster:
    def __init__(self, database_url: str, folder: Path, **env: str):
        self.folder = folder
        self.env = {**os.environ, **SLACK_ENV, "GSPO_GRADER_DATABASE_URL": database_url}
        self.env |= {"GSPO_GRADER_LOG_LEVEL": "info", "GSPO_GRADER_POOL_SIZE": "1"}
        self.env |= {f"GSPO_GRADER_{k.upper()}": v for k, v in env.items()}
        self.nodes: list[Node] = []
        self.metrics_urls: dict[int, str] = {}  # node index -> a grading node's /metrics

    def command(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "grader", *args]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)

    def api(self) -> tuple[Node, str]:
        port = free_port()
        argv = [sys.executable, "-m", "grader", "serve", "--port", str(port)]
        argv += ["--data-dir", str(self.folder / "data")]
        node = Node(argv, self.env, self.folder / f"api-{len(self.nodes)}.log")
        self.nodes.append(node)
        url = f"http://127.0.0.1:{port}"
        wait_for(node, url + "/api/exercise", timeout=60)
        return node, url

    def worker(self, wait: bool = True) -> tuple[Node, str]:
        port = free_port()
        argv = [sys.executable, "-m", "grader", "worker", "--concurrency", "1"]
        argv += ["--metrics-port", str(port)]
        node = Node(argv, self.env, self.folder / f"worker-{len(self.nodes)}.log")
        url = f"http://127.0.0.1:{port}/metrics"
        self.metrics_urls[len(self.nodes)] = url
        self.nodes.append(node)
        if wait:
            wait_for(node, url, timeout=300, body="gspo_grader_ready 1")
        return node, url

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


def wait_for(node: Node, url: str, timeout: float, body: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.process.poll() is not None:
            raise AssertionError(f"{url}: the process exited:\n{node.text()}")
        with contextlib.suppress(httpx.TransportError):
            answer = httpx.get(url, timeout=5)
            if answer.status_code == 200 and body in answer.text:
                return
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer in {timeout} s:\n{node.text()}")


def verdict(client: httpx.Client, answer: httpx.Response, key: str, timeout: float = 240) -> dict:
    """The final view of a submission: the answer itself, or polled after a 202."""
    body = answer.json()
    deadline = time.monotonic() + timeout
    while body.get("status") in ("queued", "grading"):
        assert time.monotonic() < deadline, f"no verdict for {body['submission_id']} in {timeout} s"
        time.sleep(0.5)
        polled = client.get(
            f"/api/submissions/{body['submission_id']}", headers={"X-Student-Key": key}
        )
        if polled.status_code == 200:
            body = polled.json()
    return body
