"""A real uvicorn server in a subprocess: submissions survive a restart and a kill -9.

The server runs `grader.service.serve` with the real Grader, on 127.0.0.1 and a free port,
in its own session so the test can clean up everything it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from grader.exercise import REPO_ROOT, default_exercise

pytestmark = [pytest.mark.service, pytest.mark.sandbox, pytest.mark.slow]

REFERENCE = default_exercise().reference.read_text()
STARTER = default_exercise().starter.read_text()
SLACK_ENV = {  # a shared 2-core test machine can starve a call for seconds
    "GSPO_GRADER_SANDBOX_CALL_WALL_SECONDS": "60",
    "GSPO_GRADER_SANDBOX_GRADING_WALL_SECONDS": "240",
    "GSPO_GRADER_SANDBOX_CPU_SECONDS": "120",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, data_dir: Path, log_path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, **SLACK_ENV, "GSPO_GRADER_POOL_SIZE": "1"}
        env["GSPO_GRADER_MAX_CONCURRENT"] = "1"
        env["GSPO_GRADER_LOG_LEVEL"] = "info"
        self.log_path = log_path
        code = "from grader.service import serve; import sys; serve(*sys.argv[1:])"
        argv = [sys.executable, "-c", code, "127.0.0.1", str(self.port), str(data_dir)]
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                argv, start_new_session=True, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        self.http = httpx.Client(base_url=self.url, timeout=300)

    def wait(self, path: str, timeout: float = 300) -> None:
        """Until GET `path` answers 200 (/api/exercise: listening; /healthz: warm)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the server exited"
            try:
                if self.http.get(path).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{path} did not answer 200 in {timeout} s")

    def session_pids(self) -> list[int]:
        """Processes still in the server's session (its grader's judges and helpers)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[3]) == self.process.pid:  # field 6 of stat: session id
                    pids.append(int(entry.name))
        return pids

    def kill_session(self) -> None:
        self.http.close()
        for pid in self.session_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait(30)


@pytest.fixture
def start_server(tmp_path):
    started: list[ServerProcess] = []

    def start() -> ServerProcess:
        server = ServerProcess(tmp_path / "data", tmp_path / f"server-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill_session()


def test_submissions_survive_a_restart_and_a_kill_9(start_server):
    first = start_server()
    first.wait("/healthz")
    ada = first.http.post("/api/submit", json={"code": REFERENCE, "student": "ada"}).json()
    assert ada["report"]["passed"] is True
    key = {"X-Student-Key": ada["student_key"]}

    first.process.send_signal(signal.SIGTERM)  # graceful: the grader is closed
    first.process.wait(60)  # uvicorn re-raises SIGTERM after its shutdown, so -15 is normal
    log = first.log_path.read_text()
    assert "service closed: grading node, grader and store" in log, log[-2000:]
    assert first.session_pids() == []

    second = start_server()
    second.wait("/healthz")
    mine = second.http.get(f"/api/submissions/{ada['submission_id']}", headers=key)
    assert mine.status_code == 200 and mine.json()["report"] == ada["report"]
    starter = second.http.post(
        "/api/submit", json={"code": STARTER, "student": "ada"}, headers=key
    ).json()
    assert starter["report"]["passed"] is False
    second.process.send_signal(signal.SIGKILL)  # right after the submit returned
    second.process.wait(30)

    third = start_server()
    third.wait("/api/exercise")
    listing = third.http.get("/api/submissions", params={"student": "ada"}, headers=key).json()
    ids = [item["submission_id"] for item in listing["submissions"]]
    assert ids == [starter["submission_id"], ada["submission_id"]]
    again = third.http.get(f"/api/submissions/{starter['submission_id']}", headers=key)
    assert again.json()["report"] == starter["report"]


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"GSPO_GRADER_MAX_CONCURRENT": "0"}, "GSPO_GRADER_MAX_CONCURRENT"),
        ({"GSPO_GRADER_EXERCISE_DIR": "BROKEN"}, "tiers.toml: not valid TOML"),
        ({"GSPO_GRADER_EXERCISE_DIR": "NO-MANIFEST"}, "exercise.toml: no such file"),
        (
            {"GSPO_GRADER_SANDBOX_LEVEL": "rlimits", "GSPO_GRADER_SANDBOX_REQUIRE": "bwrap"},
            "sandbox isolation bwrap is required",
        ),
    ],
)
def test_serve_refuses_to_start_on_a_bad_setting_or_a_broken_tier_registry(tmp_path, env, words):
    """Before it listens, with one line and exit status 2: a service that started with no
    tiers would answer /api/exercise with nothing and grade nothing."""
    exercise = tmp_path / "exercise"
    (exercise / "tests" / "tiers").mkdir(parents=True)
    (exercise / "tests" / "tiers" / "tiers.toml").write_text("[[tier]\nid = ")
    if "BROKEN" in env.values():
        for name in ("exercise.toml", "starter", "reference"):
            copy = shutil.copytree if (REPO_ROOT / name).is_dir() else shutil.copy
            copy(REPO_ROOT / name, exercise / name)
    env = {k: str(exercise) if v in ("BROKEN", "NO-MANIFEST") else v for k, v in env.items()}
    argv = [sys.executable, "-m", "grader", "serve", "--port", str(free_port())]
    argv += ["--data-dir", str(tmp_path / "data")]
    done = subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gspo-grader: error: ") and words in last, done.stderr[-2000:]
