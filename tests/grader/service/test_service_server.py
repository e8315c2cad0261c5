"""A real uvicorn server in a subprocess: submissions survive a restart and a kill -9.

The server runs `grader.service.serve` with the real Grader, on 127.0.0.1 and a free port,
in its own session so the test can clean up everything it started.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from procs import processes

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
    """A service started as `argv` in a session of its own, listening at `host`:`port`, with
    one judge and the sandbox's slack; `env` adds to (or, as None, removes from) its
    environment."""

    def __init__(self, argv: list[str], host: str, port: int, log_path: Path, env=None):
        self.port = port
        self.url = f"http://{host}:{port}"
        merged = {**os.environ, **SLACK_ENV, "GSPO_GRADER_POOL_SIZE": "1"}
        merged |= {"GSPO_GRADER_MAX_CONCURRENT": "1", **(env or {})}
        merged = {name: value for name, value in merged.items() if value is not None}
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                argv, start_new_session=True, env=merged, stdout=log, stderr=subprocess.STDOUT
            )
        self.http = httpx.Client(base_url=self.url, timeout=300)

    @classmethod
    def embedded(cls, data_dir: Path, log_path: Path) -> ServerProcess:
        """`grader.service.serve` on 127.0.0.1, a free port and `data_dir`."""
        port = free_port()
        code = "from grader.service import serve; import sys; serve(*sys.argv[1:])"
        argv = [sys.executable, "-c", code, "127.0.0.1", str(port), str(data_dir)]
        return cls(argv, "127.0.0.1", port, log_path, {"GSPO_GRADER_LOG_LEVEL": "info"})

    def wait(self, path: str, timeout: float = 300) -> None:
        """Until GET `path` answers 200 (/api/exercise: listening; /healthz: warm)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()[-2000:]
            try:
                if self.http.get(path).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{path} did not answer 200 in {timeout} s")

    def session_pids(self) -> list[int]:
        """Processes still in the server's session (its grader's judges and helpers)."""
        return [p.pid for p in processes() if p.session == self.process.pid]

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
        server = ServerProcess.embedded(tmp_path / "data", tmp_path / f"server-{len(started)}.log")
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


def status_of_a_slow_head(host: str, port: int, pad_bytes: int) -> bytes:
    """The status line answering a GET whose head arrives in two parts, the first holding a
    header of `pad_bytes`: the server holds an incomplete head up to its cap, no further."""
    with socket.create_connection((host, port), timeout=30) as connection:
        head = f"GET /api/exercise HTTP/1.1\r\nHost: {host}\r\nX-Pad: {'a' * pad_bytes}"
        connection.sendall(head.encode())
        time.sleep(0.5)  # the server reads what came, and waits for the rest
        with contextlib.suppress(OSError):  # refused already: it may have closed
            connection.sendall(b"\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := connection.recv(1 << 16):
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ([], ("127.0.0.2", "env")),  # no option: the environment decides
        (["--host", "127.0.0.3", "--port", "{port}", "--data-dir", "{tmp}/cli"],
         ("127.0.0.3", "cli")),  # an option given wins over the environment
    ],
    ids=["environment", "options"],
)  # fmt: skip
def test_gspo_grader_serve_listens_where_its_options_or_else_the_environment_say(
    tmp_path, options, where
):
    """`gspo-grader serve` for real: where it listens and keeps its data, a request head held
    while incomplete up to http_max_header_bytes (64 KiB; h11's own default is 16 KiB) and
    no further, and idle keep-alive connections closed after http_keep_alive_seconds (5 s)."""
    ports = {"env": free_port(), "cli": free_port()}
    env = {"GSPO_GRADER_HOST": "127.0.0.2", "GSPO_GRADER_PORT": str(ports["env"])}
    env |= {"GSPO_GRADER_DATA_DIR": str(tmp_path / "env"), "GSPO_GRADER_DATABASE_URL": None}
    argv = [sys.executable, "-m", "grader", "serve"]
    argv += [arg.format(port=ports["cli"], tmp=tmp_path) for arg in options]
    host, which = where
    server = ServerProcess(argv, host, ports[which], tmp_path / "serve.log", env)
    try:
        server.wait("/api/exercise", timeout=120)  # listening where expected
        assert (tmp_path / which / "grader.sqlite3").is_file()
        assert not (tmp_path / ("cli" if which == "env" else "env")).exists()
        assert status_of_a_slow_head(host, ports[which], 40 << 10) == b"HTTP/1.1 200 OK"
        assert status_of_a_slow_head(host, ports[which], 80 << 10) == b"HTTP/1.1 400 Bad Request"
        with socket.create_connection((host, ports[which]), timeout=30) as idle:
            idle.sendall(f"GET /api/exercise HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            received = b""
            while b"\r\n\r\n" not in received:
                received += idle.recv(1 << 16)
            head, body = received.split(b"\r\n\r\n", 1)
            assert head.startswith(b"HTTP/1.1 200"), head
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            while len(body) < length:
                body += idle.recv(1 << 16)
            answered = time.monotonic()
            assert idle.recv(1) == b""  # closed by the server (a 30 s wait raises instead)
            assert 4.0 <= time.monotonic() - answered <= 15.0  # kept alive about 5 s
    finally:
        server.kill_session()
