"""The SQLite store: durability settings, round trips, and the student-name race."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from grader.service.store import SQLiteStore, Submission, open_store

pytestmark = pytest.mark.service


def record(n: int, student: str = "ada", created_at: str | None = None) -> Submission:
    return Submission(
        submission_id=f"{n:032x}",
        report_id=f"{n + 1000:032x}",
        student=student,
        code=f"# code {n}",
        created_at=created_at or f"2026-01-01T00:00:{n:02d}+00:00",
        report_json='{"passed": true}',
        score=float(n),
        max_score=100.0,
        passed=n % 2 == 0,
    )


def test_rows_survive_closing_and_reopening(tmp_path):
    path = tmp_path / "db.sqlite3"
    store = open_store(f"sqlite:///{path}")
    assert store.create_student("ada", "hash-a", "2026-01-01T00:00:00+00:00")
    store.add_submission(record(1))
    store.close()
    again = open_store(f"sqlite:///{path}")
    assert again.student_key_hash("ada") == "hash-a"
    assert again.get_submission(record(1).submission_id) == record(1)
    assert again.find_by_report(record(1).report_id) == record(1)
    again.close()


def test_durability_pragmas_are_wal_and_full_sync(tmp_path):
    store = SQLiteStore(tmp_path / "db.sqlite3")
    assert store._one("PRAGMA journal_mode", ()) == ("wal",)
    assert store._one("PRAGMA synchronous", ()) == (2,)  # 2 = FULL
    store.close()


def test_listing_is_newest_first_and_per_student(tmp_path):
    store = SQLiteStore(tmp_path / "db.sqlite3")
    store.create_student("ada", "h", "t")
    store.create_student("grace", "h", "t")
    for n in (3, 1, 2):
        store.add_submission(record(n))
    store.add_submission(record(4, student="grace"))
    assert [s.score for s in store.list_submissions("ada")] == [3.0, 2.0, 1.0]
    assert [s.student for s in store.list_submissions()] == ["grace", "ada", "ada", "ada"]
    assert store.list_submissions("nobody") == []
    store.close()


def test_a_submission_needs_an_existing_student(tmp_path):
    store = SQLiteStore(tmp_path / "db.sqlite3")
    with pytest.raises(sqlite3.IntegrityError):
        store.add_submission(record(1, student="ghost"))
    store.close()


def test_only_one_of_many_racing_claims_on_a_name_wins(tmp_path):
    store = SQLiteStore(tmp_path / "db.sqlite3")
    wins = []
    barrier = threading.Barrier(8)

    def claim(i: int) -> None:
        barrier.wait()
        if store.create_student("ada", f"hash-{i}", "t"):
            wins.append(i)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1 and store.student_key_hash("ada") == f"hash-{wins[0]}"
    store.close()


def test_unknown_database_schemes_are_refused():
    with pytest.raises(ValueError, match="postgresql"):
        open_store("postgresql://localhost/grader")
