"""A real PostgreSQL server for the tests: Debian's binaries, a cluster made with initdb in a
temporary folder and run by pg_ctl as an unprivileged user (`nobody` when the tests run as
root, since PostgreSQL refuses root), listening on 127.0.0.1 at a free port. Each test asks
for a fresh database of its own.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg


def find_bindir() -> Path | None:
    """The newest Debian PostgreSQL's bin folder (initdb and pg_ctl are not on PATH)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: p.parent.parent.name
    )
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="gspo-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.user = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
        self._databases = 0
        if self.user is not None:
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        user = {"user": self.user.pw_uid, "group": self.user.pw_gid} if self.user else {}
        return subprocess.run(
            [str(self.bindir / tool), *args],
            capture_output=True,
            text=True,
            check=check,
            cwd=self.root,
            timeout=120,
            env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"},
            **user,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=on"
        options += " -c max_connections=200"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-o",
            options,
            "-w",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def log(self) -> str:
        path = self.root / "log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        self._databases += 1
        name = f"test_{self._databases}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def destroy(self) -> None:
        self.stop("immediate")
        with contextlib.suppress(OSError):
            shutil.rmtree(self.root)
