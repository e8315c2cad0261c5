"""The store on SQLite and on PostgreSQL alike: round trips, admission enforced in the
database, claims that never hand one grading to two nodes, the verdict written once, the
rule for gradings whose node died, regrades, plots, and the student-name race."""

from __future__ import annotations

import json
import threading

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from grader.node import MAX_ATTEMPTS, recover_lost
from grader.service import regrade
from grader.store import (
    Admission,
    GradingResult,
    NameTaken,
    OwnerBusy,
    QueueFull,
    Submission,
    TooManyNames,
    now,
    open_store,
)

pytestmark = pytest.mark.service

ROOMY = Admission(capacity=100, run_capacity=100, submits_per_student=100, runs_per_client=100)


def sent(n: int, student: str | None = "ada", kind: str = "submit", **changes) -> Submission:
    values = {
        "submission_id": f"{n:032x}",
        "kind": kind,
        "student": student if kind == "submit" else None,
        "client": student or "address 10.0.0.1",
        "exercise": "gspo",
        "code": f"# code {n}",
        "accepted_at": f"2026-01-01T00:00:{n:02d}+00:00",
    }
    return Submission(**(values | changes))


def gid(n: int) -> str:
    return f"{n + 1000:032x}"


def admit(store, n: int, admission: Admission = ROOMY, **changes) -> Submission:
    submission = sent(n, **changes)
    store.admit(submission, gid(n), admission)
    return submission


def test_rows_survive_closing_and_reopening(database_url):
    store = open_store(database_url, migrate=True)
    assert store.create_student("李雷 2", "hash-a")
    mine = admit(store, 1, student="李雷 2")
    store.close()
    again = open_store(database_url)  # migrated: opens without migrating
    assert again.student_key_hash("李雷 2") == "hash-a"
    found = again.get(mine.submission_id)
    assert found.submission == mine and found.grading.status == "queued"
    assert again.by_grading(gid(1)) == found
    assert again.get("f" * 32) is None
    again.close()


def test_sqlite_is_durable_wal_with_full_sync(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite3'}", migrate=True)
    with store.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert c.execute(text("PRAGMA synchronous")).scalar() == 2  # 2 = FULL
        assert c.execute(text("PRAGMA foreign_keys")).scalar() == 1
    store.close()


def finish(store, n: int, score: float) -> None:
    job = store.claim("node-a")
    assert job.grading_id == gid(n)
    assert store.finish(job.grading_id, GradingResult("{}", score, 100.0, score > 50))


def test_listing_is_newest_first_per_student_and_per_exercise(store):
    for n in (3, 1, 2):
        admit(store, n)
        finish(store, n, float(n))
    admit(store, 4, student="grace", exercise="dpo")
    admit(store, 5, kind="run")  # Runs are no one's submissions
    assert [s.score for s in store.list_submissions("ada")] == [3.0, 2.0, 1.0]
    assert [s.student for s in store.list_submissions()] == ["grace", "ada", "ada", "ada"]
    assert [s.student for s in store.list_submissions(exercise="dpo")] == ["grace"]
    assert store.list_submissions("ada", exercise="dpo") == []
    assert store.list_submissions("nobody") == []


def test_a_submission_needs_an_existing_student(store):
    with pytest.raises(IntegrityError):
        admit(store, 1, student="ghost")


def test_the_verdict_is_written_once(store):
    admit(store, 1)
    job = store.claim("node-a")
    assert (job.grading_id, job.attempts, job.code, job.kind) == (gid(1), 1, "# code 1", "submit")
    assert store.get(sent(1).submission_id).grading.status == "grading"
    first = GradingResult('{"first": 1}', score=80.0, max_score=100.0, passed=False)
    assert store.finish(gid(1), first) is True
    late = GradingResult('{"late": 1}', score=100.0, max_score=100.0, passed=True)
    assert store.finish(gid(1), late) is False
    grading = store.get(sent(1).submission_id).grading
    assert (grading.status, grading.score, grading.report_json) == ("done", 80.0, '{"first": 1}')
    assert store.claim("node-a") is None  # nothing left to take


def test_an_ungradable_submission_keeps_no_score(store):
    admit(store, 1)
    store.claim("node-a")
    assert store.requeue(gid(1), node="node-b") is False  # not node-b's to give back
    assert store.requeue(gid(1), node="node-a")
    again = store.claim("node-b")
    assert again.attempts == 2
    assert store.finish(again.grading_id, GradingResult('{"grader_error": 1}'))
    grading = store.get(sent(1).submission_id).grading
    assert (grading.status, grading.score, grading.passed) == ("ungradable", None, None)
    assert store.list_submissions()[0].status == "ungradable"


def test_a_finished_grading_is_found_by_its_verdict_key_once_done(store):
    admit(store, 1, course="lti:c1")
    job = store.claim("node-a")
    assert (job.course, job.live) == ("lti:c1", True)
    assert store.reusable("k" * 64) is None  # claimed, not finished: nothing to reuse
    done = GradingResult('{"r": 1}', 90.0, 100.0, False, "v1", "p" * 32, "k" * 64)
    assert store.finish(job.grading_id, done)
    assert store.reusable("k" * 64) == done
    assert store.reusable("x" * 64) is None
    admit(store, 2)
    store.claim("node-a")  # an ungradable grading keeps its key out of reach
    assert store.finish(gid(2), GradingResult('{"grader_error": 1}', verdict_key="u" * 64))
    assert store.reusable("u" * 64) is None


def test_claims_race_and_each_grading_goes_to_one_node(store):
    for n in range(6):
        admit(store, n, student=None, kind="run", client=f"c{n}")
    taken: list[str] = []
    barrier = threading.Barrier(8)

    def claim_all(i: int) -> None:
        barrier.wait()
        while (job := store.claim(f"node-{i}")) is not None:
            taken.append(job.grading_id)

    threads = [threading.Thread(target=claim_all, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(taken) == sorted(gid(n) for n in range(6))


def test_one_student_may_have_max_per_student_in_flight(store):
    one = Admission(capacity=100, run_capacity=100, submits_per_student=1)
    admit(store, 1, one)
    with pytest.raises(OwnerBusy):
        admit(store, 2, one)
    admit(store, 3, one, student="grace")  # another student is not held back
    store.claim("node-a")
    with pytest.raises(OwnerBusy):  # grading is still in flight
        admit(store, 2, one)
    store.finish(gid(1), GradingResult("{}", 1.0, 1.0, True))
    admit(store, 2, one)  # the place was given back
    assert store.get(sent(2).submission_id).grading.status == "queued"


def test_the_queue_refuses_past_capacity_and_counts_positions(store):
    two = Admission(capacity=2, run_capacity=2, submits_per_student=5)
    admit(store, 1, two)
    admit(store, 2, two, kind="run")
    with pytest.raises(QueueFull):
        admit(store, 3, two)
    with pytest.raises(QueueFull):
        admit(store, 4, two, kind="run", client="another")
    assert store.waiting() == 2
    assert store.position(store.by_grading(gid(2)).grading) == 2
    assert store.position(store.by_grading(gid(1)).grading) == 1
    store.claim("node-a")  # taken: no longer waiting
    assert store.position(store.by_grading(gid(1)).grading) is None
    assert store.position(store.by_grading(gid(2)).grading) == 1
    admit(store, 3, two)


def test_runs_fill_their_share_and_one_each_so_submits_keep_room(store):
    """Issue 26: two slow Runs must not make a Submit wait; one client one Run in flight."""
    fair = Admission(capacity=3, run_capacity=2, submits_per_student=1, runs_per_client=1)
    admit(store, 1, fair, kind="run", student="ada")
    with pytest.raises(OwnerBusy):  # the same client's second Run
        admit(store, 2, fair, kind="run", student="ada")
    admit(store, 3, fair, kind="run", student="grace")
    with pytest.raises(QueueFull):  # Runs have their share
        admit(store, 4, fair, kind="run", student=None, client="address 10.0.0.9")
    admit(store, 5, fair)  # a Submit still gets in


def test_the_embedded_service_counts_gradings_in_flight_against_its_slots(store):
    """count_grading counts what waits and what is being graded; a verdict frees a slot."""
    slots = Admission(capacity=2, run_capacity=2, submits_per_student=5, count_grading=True)
    admit(store, 1, slots)
    admit(store, 2, slots, kind="run")
    store.claim("node-a")  # grading: still in flight
    assert store.waiting() == 1
    with pytest.raises(QueueFull):
        admit(store, 3, slots)
    store.finish(gid(1), GradingResult("{}", 1.0, 1.0, True))
    admit(store, 3, slots)


def test_admission_holds_under_racing_requests(store):
    """Eight threads race to queue a submission of the same student: exactly one gets in."""
    one = Admission(capacity=100, run_capacity=100, submits_per_student=1)
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def queue(i: int) -> None:
        barrier.wait()
        try:
            admit(store, 10 + i, one)
            outcomes.append("queued")
        except OwnerBusy:
            outcomes.append("busy")

    threads = [threading.Thread(target=queue, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["busy"] * 7 + ["queued"]


def test_new_names_are_limited_per_address_and_a_refused_one_claims_nothing(store):
    two = Admission(capacity=100, run_capacity=100, submits_per_student=1, names_per_hour=2)
    for n, name in enumerate(("n1", "n2"), start=1):
        store.admit(sent(n, student=name), gid(n), two, "hash", address="10.0.0.7")
    with pytest.raises(TooManyNames):
        store.admit(sent(3, student="n3"), gid(3), two, "hash", address="10.0.0.7")
    assert store.student_key_hash("n3") is None
    store.admit(sent(4, student="n4"), gid(4), two, "hash", address="10.0.0.8")  # elsewhere
    with pytest.raises(NameTaken):
        store.admit(sent(5, student="n4"), gid(5), two, "hash", address="10.0.0.8")


def test_the_submission_and_what_comes_with_it_commit_together_or_not_at_all(store):
    def failing(connection, submission_id) -> None:
        raise RuntimeError("the outbox refused the row")

    with pytest.raises(RuntimeError):
        store.admit(sent(1), gid(1), ROOMY, also=failing)
    assert store.get(sent(1).submission_id) is None and store.waiting() == 0
    seen = []
    store.admit(sent(2), gid(2), ROOMY, also=lambda c, sid: seen.append(sid))
    assert seen == [sent(2).submission_id] and store.get(sent(2).submission_id) is not None


def test_a_dead_nodes_grading_is_queued_again_then_ungradable(store):
    admit(store, 1)
    store.beat("alive")
    store.beat("dead")
    store.claim("dead")
    assert recover_lost(store, stalled_s=60) == 0  # its heartbeat is recent
    with store.write() as c:  # its heartbeat stopped long ago
        c.execute(text("UPDATE nodes SET seen_at = '2000-01-01' WHERE name = 'dead'"))
    assert recover_lost(store, stalled_s=60) == 1
    assert store.get(sent(1).submission_id).grading.status == "queued"
    for attempt in range(2, MAX_ATTEMPTS + 1):
        assert store.claim("dead").attempts == attempt
    assert recover_lost(store, stalled_s=60) == 1  # its last attempt: given up
    grading = store.get(sent(1).submission_id).grading
    assert (grading.status, grading.score, grading.attempts) == ("ungradable", None, MAX_ATTEMPTS)
    message = json.loads(grading.report_json)["grader_error"]["message"]
    assert message.startswith("Grader error (not your code's fault)")
    assert recover_lost(store, stalled_s=60) == 0


def test_a_grading_its_own_live_node_lost_track_of_is_queued_again(store):
    """The database went away while the node graded: the node is alive, the grading is not
    running on it any more, and the same rule gives it back."""
    admit(store, 1)
    store.beat("me")
    store.claim("me")
    assert recover_lost(store, stalled_s=60, node="me", running={gid(1)}) == 0
    assert recover_lost(store, stalled_s=60, node="other", running=set()) == 0  # not its own
    assert recover_lost(store, stalled_s=60, node="me", running=set()) == 1
    assert store.get(sent(1).submission_id).grading.status == "queued"


def test_a_regrade_adds_a_grading_below_live_work_and_keeps_the_old_one(store):
    admit(store, 1)
    finish(store, 1, 40.0)
    [preview] = regrade(store, [sent(1).submission_id])
    admit(store, 2, student="grace")  # live work comes first
    assert store.claim("node-a").grading_id == gid(2)
    assert store.claim("node-a").grading_id == preview
    store.finish(preview, GradingResult("{}", 70.0, 100.0, True))
    assert store.get(sent(1).submission_id).grading.score == 40.0  # the student sees no change
    [applied] = regrade(store, [sent(1).submission_id], current=True)
    history = store.gradings_of(sent(1).submission_id)
    assert [(g.score, g.current) for g in history] == [(40.0, False), (70.0, False), (None, True)]
    assert store.get(sent(1).submission_id).grading.grading_id == applied


def test_runs_and_plots_round_trip(store):
    run = admit(store, 1, kind="run")
    store.claim("node-a")
    assert store.finish(gid(1), GradingResult('{"mode": "run"}', 10.0, 10.0, True))
    assert store.by_grading(gid(1)).submission == run
    assert store.prune_runs("2026-01-02T00:00:00+00:00") == 1 and store.by_grading(gid(1)) is None
    assert not store.has_plots("k1")
    store.save_plots("k1", {"curves": b"\x89PNG one", "grad_matrix": b"\x89PNG two"})
    store.save_plots("k1", {"curves": b"\x89PNG again"})  # drawn twice: the first set stays
    assert store.has_plots("k1") and store.plot_png("k1", "curves") == b"\x89PNG one"
    assert store.plot_png("k1", "missing") is None


def test_pruning_runs_drops_the_plots_only_they_named(store):
    """A pruned Run's plots go with it, unless a grading that stays names them too (a Submit
    with the same toy result, a Run not pruned) or they are a reference preview."""
    named = {1: ("run", "only-old-runs"), 2: ("run", "only-old-runs"), 3: ("run", "shared"),
             4: ("submit", "shared"), 5: ("run", None), 6: ("run", "recent-run")}  # fmt: skip
    for n, (kind, key) in named.items():
        accepted = "2026-03-01T00:00:00+00:00" if n == 6 else None
        admit(store, n, kind=kind, **({"accepted_at": accepted} if accepted else {}))
        store.claim("node-a")
        assert store.finish(gid(n), GradingResult("{}", 1.0, 2.0, True, "v1", key))
    admit(store, 7, kind="run")  # queued: neither it nor anything of it is pruned
    for key in ("only-old-runs", "shared", "recent-run", "preview", "nobody's"):
        store.save_plots(key, {"curves": b"\x89PNG", "grad_matrix": b"\x89PNG"})
    assert store.prune_runs("2026-02-01T00:00:00+00:00") == 4  # runs 1, 2, 3 and 5
    assert not store.has_plots("only-old-runs")
    assert all(store.has_plots(k) for k in ("shared", "recent-run", "preview", "nobody's"))
    assert store.plot_png("shared", "grad_matrix") == b"\x89PNG"
    assert store.by_grading(gid(6)) is not None and store.by_grading(gid(7)) is not None


def test_plots_wanted_are_finished_gradings_whose_plots_no_node_stored(store):
    start = now()
    for n, key in enumerate(["k1", "k2", None, "k2"], start=1):
        admit(store, n)
        job = store.claim("node-a")
        report = json.dumps({"n": n})
        assert store.finish(job.grading_id, GradingResult(report, 1.0, 2.0, False, "v1", key))
    admit(store, 5)
    store.claim("node-a")  # grading, not finished: nothing to draw yet
    wanted = store.plots_wanted(start, now())
    assert [(w.exercise, w.key) for w in wanted] == [("gspo", "k2"), ("gspo", "k1")]  # newest
    assert json.loads(wanted[0].report_json)["n"] in (2, 4)
    assert store.by_grading(gid(1)).grading.plots_key == "k1"
    store.save_plots("k2", {"curves": b"\x89PNG"})
    assert [w.key for w in store.plots_wanted(start, now())] == ["k1"]
    assert store.plots_wanted(now(), now()) == []  # finished before the window
    assert store.plots_wanted(start, start) == []  # finished after it
    assert [w.key for w in store.plots_wanted(start, now(), limit=1)] == ["k1"]


def test_only_one_of_many_racing_claims_on_a_name_wins(database_url):
    store = open_store(database_url, migrate=True)
    wins = []
    barrier = threading.Barrier(8)

    def claim(i: int) -> None:
        barrier.wait()
        if store.create_student("ada", f"hash-{i}"):
            wins.append(i)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1 and store.student_key_hash("ada") == f"hash-{wins[0]}"
    store.close()
