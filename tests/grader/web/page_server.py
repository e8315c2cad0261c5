"""The page's server for the browser tests and the screenshot: build web/dist when it is
missing or older than its sources, then start `python -m grader serve` on a free loopback
port and wait until /healthz says the grading pools are warm.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
WEB = REPO / "web"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stale(dist_index: Path) -> bool:
    """dist/ is missing, or older than a source file: build again rather than test old code."""
    if not dist_index.exists():
        return True
    built = dist_index.stat().st_mtime
    sources = [WEB / "index.html", WEB / "build.mjs", WEB / "package-lock.json"]
    sources += list((WEB / "src").rglob("*")) + list((WEB / "docs").rglob("*"))
    return any(path.stat().st_mtime > built for path in sources if path.exists())


def _build_page() -> None:
    """`npm ci && npm run build` in web/, or fail saying what is missing."""
    if not _stale(WEB / "dist" / "index.html"):
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            "web/dist is missing or stale and npm is not installed: "
            "run `npm ci && npm run build` in web/"
        )
    steps = [[npm, "run", "build"]]
    if not (WEB / "node_modules" / ".package-lock.json").exists():
        steps.insert(0, [npm, "ci", "--no-audit", "--no-fund"])
    for step in steps:
        done = subprocess.run(step, cwd=WEB, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"`{' '.join(step[1:])}` failed in web/:\n{done.stdout}\n{done.stderr}")


def _wait_healthy(base: str, process: subprocess.Popen, log: Path, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the service exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    pytest.fail(f"the service was not healthy after {seconds} s:\n{log.read_text()[-4000:]}")


def start_service(data_dir: Path) -> tuple[str, subprocess.Popen]:
    """`python -m grader serve` on a free loopback port; returns its base URL once healthy."""
    _build_page()
    port = _free_port()
    log = data_dir / "service.log"
    command = [sys.executable, "-m", "grader", "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--data-dir", str(data_dir)]
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, process, log)
    except BaseException:
        stop_service(process)
        raise
    return base, process


def stop_service(process: subprocess.Popen) -> None:
    """SIGTERM (a graceful shutdown closes the sandbox workers), then SIGKILL its group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
