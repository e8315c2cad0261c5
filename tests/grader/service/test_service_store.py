"""The store on SQLite and on PostgreSQL alike: round trips, admission enforced in the
database, the verdict written once, plots, and the student-name race."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from grader.service.store import (
    Admission,
    OwnerBusy,
    QueueFull,
    RunRecord,
    Submission,
    Verdict,
    open_store,
)

pytestmark = pytest.mark.service

ROOMY = Admission(max_waiting=100, max_per_student=100)


def record(n: int, student: str = "ada", **changes) -> Submission:
    values = {
        "submission_id": f"{n:032x}",
        "report_id": f"{n + 1000:032x}",
        "student": student,
        "code": f"# code {n}",
        "created_at": f"2026-01-01T00:00:{n:02d}+00:00",
        "exercise": "gspo",
    }
    return Submission(**(values | changes))


def done(n: int, student: str = "ada", **changes) -> Submission:
    verdict = {"status": "done", "attempts": 1, "report_json": '{"passed": true}'}
    verdict |= {"score": float(n), "max_score": 100.0, "passed": n % 2 == 0}
    return record(n, student, **(verdict | changes))


@pytest.fixture
def store(database_url):
    store = open_store(database_url, migrate=True)
    store.create_student("ada", "hash-a", "t")
    store.create_student("grace", "hash-g", "t")
    yield store
    store.close()


def test_rows_survive_closing_and_reopening(database_url):
    store = open_store(database_url, migrate=True)
    assert store.create_student("李雷 2", "hash-a", "2026-01-01T00:00:00+00:00")
    store.add_submission(done(1, student="李雷 2"))
    store.close()
    again = open_store(database_url)  # migrated: opens without migrating
    assert again.student_key_hash("李雷 2") == "hash-a"
    assert again.get_submission(done(1).submission_id) == done(1, student="李雷 2")
    assert again.find_by_report(done(1).report_id) == done(1, student="李雷 2")
    assert again.get_submission("f" * 32) is None
    again.close()


def test_sqlite_is_durable_wal_with_full_sync(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite3'}", migrate=True)
    with store.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert c.execute(text("PRAGMA synchronous")).scalar() == 2  # 2 = FULL
        assert c.execute(text("PRAGMA foreign_keys")).scalar() == 1
    store.close()


def test_listing_is_newest_first_per_student_and_per_exercise(store):
    for n in (3, 1, 2):
        store.add_submission(done(n))
    store.add_submission(done(4, student="grace", exercise="dpo"))
    assert [s.score for s in store.list_submissions("ada")] == [3.0, 2.0, 1.0]
    assert [s.student for s in store.list_submissions()] == ["grace", "ada", "ada", "ada"]
    assert [s.student for s in store.list_submissions(exercise="dpo")] == ["grace"]
    assert store.list_submissions("ada", exercise="dpo") == []
    assert store.list_submissions("nobody") == []


def test_a_submission_needs_an_existing_student(store):
    with pytest.raises(IntegrityError):
        store.add_submission(done(1, student="ghost"))


def test_the_verdict_is_written_once(store):
    store.queue_submission(record(1), ROOMY)
    assert store.get_submission(record(1).submission_id).status == "queued"
    started = store.start_attempt("submission", record(1).submission_id)
    assert (started.status, started.attempts) == ("grading", 1)
    first = Verdict('{"first": 1}', score=80.0, max_score=100.0, passed=False)
    assert store.finish("submission", record(1).submission_id, first) is True
    late = Verdict('{"late": 1}', score=100.0, max_score=100.0, passed=True)
    assert store.finish("submission", record(1).submission_id, late) is False
    row = store.get_submission(record(1).submission_id)
    assert (row.status, row.score, row.report_json) == ("done", 80.0, '{"first": 1}')
    assert store.start_attempt("submission", record(1).submission_id) is None  # finished


def test_an_ungradable_submission_keeps_no_score(store):
    store.queue_submission(record(1), ROOMY)
    store.start_attempt("submission", record(1).submission_id)
    store.requeue("submission", record(1).submission_id)
    again = store.start_attempt("submission", record(1).submission_id)
    assert again.attempts == 2
    assert store.finish("submission", again.submission_id, Verdict('{"grader_error": 1}'))
    row = store.get_submission(again.submission_id)
    assert (row.status, row.score, row.passed) == ("ungradable", None, None)
    assert store.list_submissions()[0].status == "ungradable"


def test_one_student_may_have_max_per_student_in_flight(store):
    one = Admission(max_waiting=100, max_per_student=1)
    store.queue_submission(record(1), one)
    with pytest.raises(OwnerBusy):
        store.queue_submission(record(2), one)
    store.queue_submission(record(3, student="grace"), one)  # another student is not held back
    store.start_attempt("submission", record(1).submission_id)
    with pytest.raises(OwnerBusy):  # grading is still in flight
        store.queue_submission(record(2), one)
    store.finish("submission", record(1).submission_id, Verdict("{}", 1.0, 1.0, True))
    store.queue_submission(record(2), one)  # the place was given back
    assert store.get_submission(record(2).submission_id).status == "queued"


def test_the_queue_refuses_past_max_waiting_and_counts_positions(store):
    two = Admission(max_waiting=2, max_per_student=5)
    store.queue_submission(record(1), two)
    store.queue_run(RunRecord("a" * 32, "gspo", "# run", "2026-01-01T00:00:02+00:00"), two)
    with pytest.raises(QueueFull):
        store.queue_submission(record(3), two)
    with pytest.raises(QueueFull):
        store.queue_run(RunRecord("b" * 32, "gspo", "# run", "2026-01-01T00:00:04+00:00"), two)
    assert store.waiting() == 2
    assert store.position("run", "a" * 32) == 2
    assert store.position("submission", record(1).submission_id) == 1
    store.start_attempt("submission", record(1).submission_id)  # taken: no longer waiting
    assert store.position("submission", record(1).submission_id) is None
    assert store.position("run", "a" * 32) == 1
    store.queue_submission(record(3), two)


def test_the_embedded_service_counts_gradings_in_flight_against_its_slots(store):
    """max_in_flight counts what waits and what is being graded; a verdict frees a slot."""
    slots = Admission(max_waiting=10, max_per_student=5, max_in_flight=2)
    store.queue_submission(record(1), slots)
    store.queue_run(RunRecord("a" * 32, "gspo", "# run", "2026-01-01T00:00:02+00:00"), slots)
    store.start_attempt("submission", record(1).submission_id)  # grading: still in flight
    assert store.waiting() == 1
    with pytest.raises(QueueFull):
        store.queue_submission(record(3), slots)
    store.finish("submission", record(1).submission_id, Verdict("{}", 1.0, 1.0, True))
    store.queue_submission(record(3), slots)
    assert store.get_submission(record(3).submission_id).status == "queued"


def test_admission_holds_under_racing_requests(store):
    """Eight threads race to queue a submission of the same student: exactly one gets in."""
    one = Admission(max_waiting=100, max_per_student=1)
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def queue(i: int) -> None:
        barrier.wait()
        try:
            store.queue_submission(record(10 + i), one)
            outcomes.append("queued")
        except OwnerBusy:
            outcomes.append("busy")

    threads = [threading.Thread(target=queue, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["busy"] * 7 + ["queued"]


def test_the_row_and_its_job_commit_together_or_not_at_all(store):
    def failing_enqueue(connection) -> None:
        raise RuntimeError("the queue refused the job")

    with pytest.raises(RuntimeError):
        store.queue_submission(record(1), ROOMY, enqueue=failing_enqueue)
    assert store.get_submission(record(1).submission_id) is None
    seen = []
    store.queue_submission(record(2), ROOMY, enqueue=seen.append)
    assert len(seen) == 1 and store.get_submission(record(2).submission_id) is not None


def test_runs_and_plots_round_trip(store):
    run = RunRecord("c" * 32, "gspo", "# run", "2026-01-01T00:00:00+00:00")
    store.queue_run(run, ROOMY)
    assert store.finish("run", run.report_id, Verdict('{"mode": "run"}', 10.0, 10.0, True))
    assert store.get_run(run.report_id).status == "done"
    assert (
        store.prune_runs("2026-01-02T00:00:00+00:00") == 1 and store.get_run(run.report_id) is None
    )
    assert not store.has_plots("k1")
    store.save_plots("k1", {"curves": b"\x89PNG one", "grad_matrix": b"\x89PNG two"})
    store.save_plots("k1", {"curves": b"\x89PNG again"})  # drawn twice: the first set stays
    assert store.has_plots("k1") and store.plot_png("k1", "curves") == b"\x89PNG one"
    assert store.plot_png("k1", "missing") is None


def test_only_one_of_many_racing_claims_on_a_name_wins(database_url):
    store = open_store(database_url, migrate=True)
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


def test_a_job_without_a_live_queue_job_is_an_orphan_adopted_once(postgres):
    """PostgreSQL: a row in flight whose procrastinate job is gone (its task failed on the
    database) is found, and only one of two grading nodes queues it again."""
    from grader.service.grading_node import Job
    from grader.service.procrastinate_queue import GRADE_TASK, deferring_app, grade_job_writer

    url = postgres.new_database()
    store = open_store(url, migrate=True)
    store.create_student("ada", "h", "t")
    app = deferring_app(url)
    job = Job("submission", record(1).submission_id)
    store.queue_submission(record(1), ROOMY, grade_job_writer(app, job))
    assert store.orphans(GRADE_TASK) == []  # its job waits
    with store.engine.begin() as c:
        c.execute(text("UPDATE procrastinate_jobs SET status = 'failed'"))
    assert store.orphans(GRADE_TASK) == [("submission", job.job_id)]
    assert store.adopt("submission", job.job_id, GRADE_TASK, grade_job_writer(app, job))
    assert not store.adopt("submission", job.job_id, GRADE_TASK, grade_job_writer(app, job))
    assert store.orphans(GRADE_TASK) == []
    store.close()
