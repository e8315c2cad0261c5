"""The grading node's process: `gspo-grader worker` loads no web stack (checked in a real
subprocess, from the interpreter's own import log), and refuses to start without the
distributed database, in one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.service

WEB = {"fastapi", "starlette", "uvicorn", "joserfc", "httpx"}


def imported(stderr: str) -> set[str]:
    """Top-level names of every module the process imported (PYTHONPROFILEIMPORTTIME's log)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def web_modules_of(log: str) -> set[str]:
    return imported(log) & WEB


def test_the_worker_command_imports_no_web_framework(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSPO_GRADER_")}
    env |= {"PYTHONPROFILEIMPORTTIME": "1"}
    env |= {"GSPO_GRADER_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    done = subprocess.run(
        [sys.executable, "-m", "grader", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "cannot be reached" in done.stderr.splitlines()[-1]
    names = imported(done.stderr)
    assert {"grader", "sqlalchemy", "psycopg"} <= names  # the log is read right
    assert web_modules_of(done.stderr) == set()


def test_the_worker_needs_the_distributed_database(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSPO_GRADER_")}
    done = subprocess.run(
        [sys.executable, "-m", "grader", "worker"],
        env={**env, "GSPO_GRADER_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "postgresql://" in done.stderr.splitlines()[-1]
