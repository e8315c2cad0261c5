"""The schema's migrations: a data dir of the first release, and a database of the release
before gradings (revision 0004: one row per submission, procrastinate's queue on
PostgreSQL), upgrade without losing a row; an unmigrated or unreachable database is refused
with a line that says what to do."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from service_fakes import FakeGrader
from service_kit import TOKEN
from sqlalchemy import inspect, text

from grader.store import (
    Admission,
    DatabaseError,
    Submission,
    current_revision,
    head_revision,
    now,
    open_engine,
    open_store,
    upgrade,
)

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
        now = store.get(sid)
        sent, grading = now.submission, now.grading
        assert (grading.grading_id, sent.student, sent.code, sent.accepted_at) == (
            rid,
            student,
            code,
            created_at,
        )
        assert (grading.report_json, grading.score, grading.max_score, grading.passed) == (
            report_json,
            score,
            max_score,
            bool(passed),
        )
        assert (sent.exercise, grading.status, grading.attempts) == ("gspo", "done", 1)
        assert json.loads(grading.report_json)["submission"] == sid
    listing = store.list_submissions("ada")
    assert [s.submission_id for s in listing] == [old_rows[1][0], old_rows[0][0]]
    new = Submission("9" * 32, "submit", "ada", "ada", "gspo", "# new", "2026-12-01T00:00:00")
    store.admit(new, "8" * 32, Admission(10, 10, 1))  # the upgraded database takes new work
    store.close()
    again = open_store(f"sqlite:///{path}", migrate=True)  # upgrading twice changes nothing
    assert len(again.list_submissions()) == 4
    again.close()


# ---- a database of the release before gradings (revision 0004) ----------------------------
REPORT = {"schema_version": "1.0", "exercise": "gspo", "mode": "submit", "passed": True,
          "score": 20.0, "max_score": 20.0}  # fmt: skip
OLD_ROWS = [  # submission id, report id, status, attempts, score (as 0004-era code wrote them)
    ("1" * 32, "a" * 32, "done", 1, 20.0),
    ("2" * 32, "b" * 32, "queued", 0, None),
    ("3" * 32, "c" * 32, "ungradable", 2, None),
    ("4" * 32, "d" * 32, "done", 1, 20.0),  # made from an LMS launch: has a passback row
]
FAKE_PROCRASTINATE = """
CREATE TYPE procrastinate_job_status AS ENUM ('todo', 'doing', 'succeeded', 'failed');
CREATE TABLE procrastinate_jobs (id bigserial PRIMARY KEY, status procrastinate_job_status);
CREATE FUNCTION procrastinate_fetch_job(target text) RETURNS bigint
    AS 'SELECT 1::bigint' LANGUAGE sql;
"""


def release_0004_database(url: str) -> None:
    """The schema at revision 0004 with rows written the way that release's code wrote them."""
    engine = open_engine(url)
    upgrade(engine, "0004")
    with engine.connect().execution_options(write=True) as c, c.begin():
        if engine.dialect.name == "postgresql":  # that release's queue
            c.connection.driver_connection.execute(FAKE_PROCRASTINATE)
        c.execute(text("INSERT INTO students VALUES ('ada', :h, '2026-11-30T09:00:00+00:00')"),
                  {"h": "0f" * 32})  # fmt: skip
        for n, (sid, rid, status, attempts, score) in enumerate(OLD_ROWS):
            report = json.dumps(REPORT | {"submission": sid}) if status != "queued" else None
            values = {"sid": sid, "rid": rid, "code": f"# code {n}", "at": f"2026-11-30T09:0{n}:00",
                      "report": report, "score": score, "max": 20.0 if score else None,
                      "passed": True if score else None, "status": status, "attempts": attempts,
                      "done": f"2026-11-30T09:0{n}:30" if report else None}  # fmt: skip
            c.execute(
                text(
                    "INSERT INTO submissions (submission_id, report_id, student, code, created_at,"
                    " report_json, score, max_score, passed, exercise, status, attempts,"
                    " finished_at) VALUES (:sid, :rid, 'ada', :code, :at, :report, :score, :max,"
                    " :passed, 'gspo', :status, :attempts, :done)"
                ),
                values,
            )
        run = {"r": json.dumps(REPORT | {"mode": "run"}), "at": now()}  # Runs are kept a day
        c.execute(text("INSERT INTO runs VALUES ('" + "e" * 32 + "', 'gspo', '# run', :at,"
                       " 'done', 1, :r, :at)"), run)  # fmt: skip
        for statement in (
            "INSERT INTO lti_platforms VALUES (1, 'https://lms', 'c1', 'https://lms/auth',"
            " 'https://lms/token', 'https://lms/jwks', NULL, 'LMS', '2026-11-30')",
            "INSERT INTO lti_courses VALUES (1, 1, 'd1', 'ctx', 'Course', 'best')",
            "INSERT INTO lti_links VALUES (1, 1, 'rl1', 'GSPO', 'gspo', NULL)",
            "INSERT INTO lti_users VALUES (1, 1, 'd1', 'sub-1', 'Ada L', 'ada', '2026-11-30')",
            "INSERT INTO lti_scores (submission_id, user_id, link_id, state, attempts,"
            f" next_attempt_at, created_at) VALUES ('{'4' * 32}', 1, 1, 'sent', 1, 'x', 'y')",
        ):
            c.execute(text(statement))
    engine.dispose()


def db_upgrade(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "grader", "db", "upgrade", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def test_a_0004_database_upgrades_to_submissions_with_gradings(database_url, make_client, tmp_path):
    release_0004_database(database_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSPO_GRADER_")}
    if database_url.startswith("sqlite"):
        args = ("--data-dir", str(Path(database_url.removeprefix("sqlite:///")).parent))
        settings = {"data_dir": Path(args[1])}
    else:
        env["GSPO_GRADER_DATABASE_URL"], args = database_url, ()
        settings = {"database_url": database_url}
    upgraded = db_upgrade(env, *args)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "upgraded from 0004 to revision" in upgraded.stdout
    held = FakeGrader(start_gate=threading.Event())  # grades nothing: read what was migrated
    client, _ = make_client(held, wait_ready=False, instructor_token=TOKEN, **settings)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for sid, rid, status, attempts, score in OLD_ROWS:
        body = client.get(f"/api/submissions/{sid}", headers=auth).json()
        assert (body["report_id"], body["status"], body["created_at"][:15]) == (
            rid, status, "2026-11-30T09:0")  # fmt: skip
        assert (body["report"] or {}).get("score") == (20.0 if status != "queued" else None)
        history = client.get(f"/api/submissions/{sid}/gradings", headers=auth).json()["gradings"]
        assert [(g["attempts"], g["score"], g["current"]) for g in history] == [
            (attempts, score, True)
        ]
    listing = client.get("/api/instructor/submissions", headers=auth).json()["submissions"]
    assert [s["submission_id"] for s in listing] == [row[0] for row in reversed(OLD_ROWS)]
    assert client.get("/api/runs/" + "e" * 32).json()["status"] == "done"
    store = client.app.state.service.store
    with store.engine.connect() as c:
        tables = set(inspect(c).get_table_names())
        join = "SELECT s.student FROM lti_scores o JOIN submissions s USING (submission_id)"
        linked = c.execute(text(join)).scalars().all()
    assert linked == ["ada"] and "runs" not in tables and "procrastinate_jobs" not in tables
    assert db_upgrade(env, *args).stdout.strip().endswith("nothing to do")
    held.start_gate.set()


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


def test_a_new_database_has_gradings_and_heartbeats_and_no_other_queue(database_url):
    store = open_store(database_url, migrate=True)
    with store.engine.connect() as c:
        tables = set(inspect(c).get_table_names())
    assert {"students", "submissions", "gradings", "nodes", "plots"} <= tables
    assert not {t for t in tables if t.startswith("procrastinate") or t == "runs"}
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
