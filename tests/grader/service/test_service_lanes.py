"""A node's lanes (grader/node/lanes.py): reserved claim loops take live work only, so a
live grading is claimed at once on a reserved judge while every other judge is busy with a
regrading; the shared loops grade on the shared grader (its judges at a lower CPU
priority). Claim order and lanes are asserted, never times. Closing a node lets a drawing
under way end first (it writes to the store its owner closes next)."""

from __future__ import annotations

import threading
import time

import pytest
from service_fakes import FakeDrawer, FakeGrader
from service_kit import wait_until

from grader.node import GradingNode, Metrics, lanes_of, pool_sizes
from grader.service import regrade
from grader.store import Admission, GradingResult, Submission

pytestmark = pytest.mark.service

ROOMY = Admission(capacity=100, run_capacity=100, submits_per_student=100, runs_per_client=100)


def submit(store, n: int, student: str = "ada") -> str:
    submission = Submission(
        submission_id=f"{n:032x}",
        kind="submit",
        student=student,
        client=student,
        exercise="gspo",
        code=f"# code {n}",
        accepted_at=f"2026-01-01T00:00:{n:02d}+00:00",
    )
    store.admit(submission, f"{n + 1000:032x}", ROOMY)
    return submission.submission_id


def graded_submits(store, count: int) -> list[str]:
    """`count` Submits, each graded once (what a regrade grades again)."""
    ids = [submit(store, n) for n in range(count)]
    while (job := store.claim("earlier-node")) is not None:
        store.finish(job.grading_id, GradingResult("{}", 10.0, 20.0, False))
    return ids


def test_lanes_reserve_judges_for_live_work_but_never_all_of_them():
    assert lanes_of(2, 1, 10).loops == [True, False]
    assert lanes_of(4, 2, 10).loops == [True, True, False, False]
    assert lanes_of(1, 1, 10).loops == [False]  # one judge: it must grade regradings too
    assert lanes_of(3, 5, 10).loops == [True, True, False]
    assert lanes_of(3, 0, 10).loops == [False, False, False]
    with pytest.raises(ValueError, match="at least one judge"):
        lanes_of(0, 1, 10)


def test_pool_sizes_give_the_shared_loops_one_judge_each_and_live_work_the_rest():
    assert pool_sizes(lanes_of(2, 1, 10), 2) == (1, 1)
    assert pool_sizes(lanes_of(2, 1, 10), 4) == (3, 1)  # spares stay at normal priority
    assert pool_sizes(lanes_of(4, 1, 10), 2) == (1, 3)  # a judge per claim loop at least
    assert pool_sizes(lanes_of(2, 1, 0), 2) == (2, 0)  # no lower priority: one grader
    assert pool_sizes(lanes_of(1, 1, 10), 1) == (1, 0)  # nothing reserved: one grader


def test_a_live_only_claim_never_takes_a_regrading(store):
    [old] = graded_submits(store, 1)
    [again] = regrade(store, [old])
    assert store.claim("node-a", live_only=True) is None
    live = submit(store, 5, student="grace")
    job = store.claim("node-a", live_only=True)
    assert (job.submission_id, job.priority) == (live, 0)
    assert store.claim("node-a", live_only=True) is None
    job = store.claim("node-a")
    assert (job.grading_id, job.priority) == (again, 1)


def test_a_live_grading_is_claimed_at_once_while_the_shared_judge_regrades(store):
    regradings = regrade(store, graded_submits(store, 3))
    live, shared = FakeGrader(), FakeGrader()
    shared.grade_gate = threading.Event()  # the shared judge stays busy with its regrading
    node = GradingNode(store, live, Metrics(), "node-1", 2, draw=FakeDrawer(), live_judges=1,
                       shared_grader=shared)  # fmt: skip
    node.grader.start()
    node.start()
    try:
        wait_until(lambda: len(shared.calls) == 1)  # one regrading taken by the shared loop
        live_id = submit(store, 9, student="grace")
        node.wake()
        wait_until(lambda: store.get(live_id).grading.status == "done")
        assert live.calls == [("# code 9", "submit")]  # on the reserved judge, alone
        assert len(shared.calls) == 1 and store.waiting() == len(regradings) - 1
        shared.grade_gate.set()  # the shared loop goes on with the regradings
        wait_until(lambda: all(store.grading(g).status == "done" for g in regradings))
        assert live.calls == [("# code 9", "submit")]  # a reserved loop took none of them
        assert len(shared.calls) == len(regradings) and store.waiting() == 0
    finally:
        shared.grade_gate.set()
        node.close()


def test_a_regrading_starts_only_after_a_lull_in_live_work(store):
    again = graded_submits(store, 2)
    live, shared = FakeGrader(), FakeGrader()
    node = GradingNode(store, live, Metrics(), "node-1", 2, draw=FakeDrawer(), live_judges=1,
                       shared_grader=shared, regrade_lull_s=8.0)  # fmt: skip
    node.grader.start()
    node.start()
    try:
        live_id = submit(store, 9, student="grace")
        node.wake()
        wait_until(lambda: store.get(live_id).grading.status == "done")
        ended = time.monotonic()
        regradings = regrade(store, again)
        node.wake()
        time.sleep(1.0)  # well inside the lull: no loop took a regrading
        assert store.waiting() == len(regradings)
        wait_until(lambda: all(store.grading(g).status == "done" for g in regradings), 30)
        assert time.monotonic() - ended >= 8.0  # after the lull, graded on the shared judge
        regraded = [code for code, _ in shared.calls if code != "# code 9"]
        assert sorted(regraded) == ["# code 0", "# code 1"]
        assert ("# code 9", "submit") in live.calls + shared.calls
    finally:
        node.close()


class SlowDrawer(FakeDrawer):
    def __init__(self):
        super().__init__()
        self.begun = 0

    def __call__(self, exercise, result: dict) -> dict[str, bytes]:
        self.begun += 1
        time.sleep(0.5)
        return super().__call__(exercise, result)


def test_closing_a_node_waits_for_the_drawing_under_way(store):
    drawer = SlowDrawer()
    node = GradingNode(store, FakeGrader(), Metrics(), "node-1", 1, draw=drawer)
    node.grader.start()
    submit(store, 1)
    node.run(store.claim(node.name))  # its plots and the reference preview go to be drawn
    wait_until(lambda: drawer.begun >= 1)
    node.close()
    assert drawer.begun == len(drawer.results) >= 1  # every drawing begun had ended
