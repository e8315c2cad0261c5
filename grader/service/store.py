"""The submissions store: all SQL lives here, behind `Store`, so another database can follow.

SQLite runs in WAL mode with synchronous=FULL: once `add_submission` returns, the row survives
a kill -9 of the server (and a power cut, as far as the disk honours fsync). One connection is
shared by the service's threads behind a lock; the store's queries are small and fast.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

SCHEMA = """
CREATE TABLE IF NOT EXISTS students (
    name TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS submissions (
    submission_id TEXT PRIMARY KEY,
    report_id TEXT NOT NULL UNIQUE,
    student TEXT NOT NULL REFERENCES students(name),
    code TEXT NOT NULL,
    created_at TEXT NOT NULL,
    report_json TEXT NOT NULL,
    score REAL NOT NULL,
    max_score REAL NOT NULL,
    passed INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS submissions_by_student ON submissions(student, created_at);
"""


@dataclass(frozen=True)
class Submission:
    """One stored submission. `report_json` is the Report exactly as returned to the student."""

    submission_id: str
    report_id: str
    student: str
    code: str
    created_at: str  # ISO 8601, UTC
    report_json: str
    score: float
    max_score: float
    passed: bool


@dataclass(frozen=True)
class SubmissionSummary:
    submission_id: str
    student: str
    created_at: str
    passed: bool
    score: float
    max_score: float


class Store(Protocol):
    """What the service needs from a database; a PostgreSQL store would implement the same."""

    def student_key_hash(self, name: str) -> str | None: ...
    def create_student(self, name: str, key_hash: str, created_at: str) -> bool: ...
    def add_submission(self, submission: Submission) -> None: ...
    def get_submission(self, submission_id: str) -> Submission | None: ...
    def find_by_report(self, report_id: str) -> Submission | None: ...
    def list_submissions(self, student: str | None = None) -> list[SubmissionSummary]: ...
    def close(self) -> None: ...


class SQLiteStore:
    """The default store: one SQLite file in the data directory."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)

    def student_key_hash(self, name: str) -> str | None:
        row = self._one("SELECT key_hash FROM students WHERE name = ?", (name,))
        return row[0] if row else None

    def create_student(self, name: str, key_hash: str, created_at: str) -> bool:
        """Insert the student; False when the name was taken (possibly a moment ago)."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO students (name, key_hash, created_at) VALUES (?, ?, ?)",
                (name, key_hash, created_at),
            )
        return cursor.rowcount == 1

    def add_submission(self, submission: Submission) -> None:
        s = submission
        with self._lock:
            self._db.execute(
                "INSERT INTO submissions (submission_id, report_id, student, code, created_at,"
                " report_json, score, max_score, passed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    s.submission_id,
                    s.report_id,
                    s.student,
                    s.code,
                    s.created_at,
                    s.report_json,
                    s.score,
                    s.max_score,
                    int(s.passed),
                ),
            )

    def get_submission(self, submission_id: str) -> Submission | None:
        return self._submission("submission_id", submission_id)

    def find_by_report(self, report_id: str) -> Submission | None:
        return self._submission("report_id", report_id)

    def list_submissions(self, student: str | None = None) -> list[SubmissionSummary]:
        """Newest first; every student's when `student` is None."""
        query = "SELECT submission_id, student, created_at, passed, score, max_score"
        query += " FROM submissions"
        params: tuple = ()
        if student is not None:
            query += " WHERE student = ?"
            params = (student,)
        query += " ORDER BY created_at DESC, rowid DESC"
        with self._lock:
            rows = self._db.execute(query, params).fetchall()
        return [SubmissionSummary(r[0], r[1], r[2], bool(r[3]), r[4], r[5]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _submission(self, column: str, value: str) -> Submission | None:
        row = self._one(
            "SELECT submission_id, report_id, student, code, created_at, report_json, score,"
            f" max_score, passed FROM submissions WHERE {column} = ?",
            (value,),
        )
        return Submission(*row[:8], passed=bool(row[8])) if row else None

    def _one(self, query: str, params: tuple):
        with self._lock:
            return self._db.execute(query, params).fetchone()


def open_store(database_url: str) -> Store:
    """Open the store a URL names. Only `sqlite:///PATH` exists today."""
    prefix = "sqlite:///"
    if database_url.startswith(prefix):
        return SQLiteStore(Path(database_url[len(prefix) :]))
    scheme = database_url.split(":", 1)[0]
    raise ValueError(f"unsupported database URL scheme {scheme!r}; use sqlite:///PATH")
