"""The schema's migrations: a data dir of the first release upgrades without losing a row,
and an unmigrated or unreachable database is refused with a line that says what to do."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import inspect

from grader.service.database import DatabaseError, current_revision, head_revision
from grader.service.store import Admission, Submission, open_store

pytestmark = pytest.mark.service

FIRST_RELEASE_SQL = Path(__file__).parent / "fixtures" / "first_release.sql"


def first_release_database(path: Path) -> list[tuple]:
    """A database as the first release wrote it; its submission rows as that release read them."""
    with sqlite3.connect(path) as db:
        db.executescript(FIRST_RELEASE_SQL.read_text(encoding="utf-8"))
        return db.execute("SELECT * FROM submissions ORDER BY submission_id").fetchall()


def test_a_first_release_data_dir_upgrades_without_losing_a_row(tmp_path):
    path = tmp_path / "grader.sqlite3"
    old_rows = first_release_database(path)
    assert len(old_rows) == 3
    store = open_store(f"sqlite:///{path}", migrate=True)  # what the embedded default does
    assert current_revision(store.engine) == head_revision()
    assert store.student_key_hash("ada") == "0f" * 32 and store.student_key_hash("李雷 2")
    for row in old_rows:
        sid, rid, student, code, created_at, report_json, score, max_score, passed = row
        now = store.get_submission(sid)
        assert (now.report_id, now.student, now.code, now.created_at) == (
            rid,
            student,
            code,
            created_at,
        )
        assert (now.report_json, now.score, now.max_score, now.passed) == (
            report_json,
            score,
            max_score,
            bool(passed),
        )
        assert (now.exercise, now.status, now.attempts) == ("gspo", "done", 1)
        assert json.loads(now.report_json)["submission"] == sid
    listing = store.list_submissions("ada")
    assert [s.submission_id for s in listing] == [old_rows[1][0], old_rows[0][0]]
    store.queue_submission(  # the upgraded database takes new work
        Submission("9" * 32, "8" * 32, "ada", "# new", "2026-12-01T00:00:00+00:00", "gspo"),
        Admission(max_waiting=10, max_per_student=1),
    )
    store.close()
    again = open_store(f"sqlite:///{path}", migrate=True)  # upgrading twice changes nothing
    assert len(again.list_submissions()) == 4
    again.close()


def test_an_unmigrated_database_is_refused_with_the_command_to_run(database_url):
    with pytest.raises(DatabaseError, match=r"no grader schema.*gspo-grader db upgrade"):
        open_store(database_url)
    open_store(database_url, migrate=True).close()
    open_store(database_url).close()


def test_an_unreachable_database_is_refused_in_one_line(postgres):
    url = f"postgresql://postgres@127.0.0.1:{postgres.port + 1}/nothing"
    with pytest.raises(DatabaseError, match="cannot be reached") as caught:
        open_store(url)
    assert "\n" not in str(caught.value)


def test_postgres_gets_the_queue_schema_and_sqlite_does_not(database_url):
    store = open_store(database_url, migrate=True)
    with store.engine.connect() as c:
        tables = set(inspect(c).get_table_names())
    assert {"students", "submissions", "runs", "plots"} <= tables
    assert ("procrastinate_jobs" in tables) is database_url.startswith("postgresql")
    store.close()


def test_names_are_normalised_and_colliding_ones_reported_on_upgrade(tmp_path, caplog):
    path = tmp_path / "grader.sqlite3"
    first_release_database(path)
    with sqlite3.connect(path) as db:
        for name in (" Bob  Lee ", "Ada", "\u0430da"):  # renamed; collides with ada; mixed
            db.execute("INSERT INTO students VALUES (?, ?, ?)", (name, "ab" * 32, "2026"))
        row = db.execute("SELECT * FROM submissions LIMIT 1").fetchone()
        db.execute(
            "INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("4" * 32, "5" * 32, " Bob  Lee ", *row[3:]),
        )
    store = open_store(f"sqlite:///{path}", migrate=True)
    assert store.student_key_hash("bob lee") == "ab" * 32
    assert store.student_key_hash(" Bob  Lee ") is None
    assert [s.submission_id for s in store.list_submissions("bob lee")] == ["4" * 32]
    assert store.student_key_hash("Ada") and store.student_key_hash("ada")  # left as they were
    assert store.student_key_hash("李雷 2")  # already normal
    store.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "names ['Ada', 'ada'] are one once normalised ('ada'); left as they are" in warnings
    assert "name '\u0430da' mixes scripts; left as it is" in warnings
