"""A judge's first grading is prepared by a rehearsal (engine/rehearsal.py): the exercise's
reference graded in the judge while no sandboxed worker is ready. It leaves forecasts, so the
first real grading waits for far fewer replies; it never changes a verdict, never runs the
submission in the judge, and stops once a worker waits."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from grader.exercise import find_exercise
from grader.judge import GradingRequest
from grader.judge.engine import Judge
from grader.judge.engine.rehearsal import rehearse
from grader.judge.engine.runtime import ExerciseRuntime
from grader.sandbox import Limits, WorkerPool

ROOT = Path(__file__).resolve().parents[3]
IMPLEMENTATIONS = ROOT / "tests" / "implementations"
SUBMISSIONS = [
    ROOT / "reference" / "gspo.py",
    ROOT / "starter" / "gspo.py",
    IMPLEMENTATIONS / "wrong" / "forgot_exp.py",
    IMPLEMENTATIONS / "wrong" / "no_clipping.py",
]


class NotReadyYet:
    """A real pool that says no worker waits until `ready_after` questions were asked: the
    moment a rehearsal stops is then the test's choice, not the machine's speed."""

    def __init__(self, pool: WorkerPool, ready_after: int | None = None) -> None:
        self.pool, self.ready_after, self.asked = pool, ready_after, 0

    def has_idle(self) -> bool:
        self.asked += 1
        return self.ready_after is not None and self.asked > self.ready_after

    def acquire(self):
        return self.pool.acquire()


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(1, Limits()) as pool:
        yield pool


def first_grading(pool, source: str, rehearsed: bool, mode: str = "submit"):
    """A new judge's first grading of `source`: (tests the rehearsal passed, report, stats)."""
    judge = Judge(Limits(), NotReadyYet(pool))
    try:
        request = GradingRequest(source=source, mode=mode)
        passed = judge.rehearse(request) if rehearsed else 0
        report, stats = judge.grade(request)
    finally:
        judge.close()
    return passed, report, stats


def outcomes(report) -> list[tuple[str, str, str]]:
    return [(t.id, t.outcome, t.message) for tier in report.tiers for t in tier.tests]


def test_the_first_grading_after_a_rehearsal_waits_for_few_replies(pool):
    source = SUBMISSIONS[0].read_text(encoding="utf-8")
    _, plain, plain_stats = first_grading(pool, source, rehearsed=False)
    passed, report, stats = first_grading(pool, source, rehearsed=True)
    tests = len(outcomes(report))
    assert report.passed and plain.passed
    assert tests - 2 <= passed < tests  # all but the device check (meta is refused there)
    assert plain_stats.round_trips > 100
    assert stats.round_trips < plain_stats.round_trips / 5, (stats, plain_stats)
    assert stats.calls_answered_ahead > 0 == plain_stats.calls_answered_ahead


@pytest.mark.parametrize("path", SUBMISSIONS, ids=lambda path: path.stem)
def test_a_rehearsal_changes_no_verdict(pool, path):
    source = path.read_text(encoding="utf-8")
    _, plain, _ = first_grading(pool, source, rehearsed=False)
    passed, report, _ = first_grading(pool, source, rehearsed=True)
    assert passed > 0
    assert (report.score, report.passed) == (plain.score, plain.passed)
    assert outcomes(report) == outcomes(plain)


def test_run_mode_rehearses_only_the_visible_tests(pool):
    source = SUBMISSIONS[0].read_text(encoding="utf-8")
    passed, report, _ = first_grading(pool, source, rehearsed=True, mode="run")
    _, submit, _ = first_grading(pool, source, rehearsed=True)
    assert report.passed
    assert 0 < passed < len(outcomes(submit)) - 2


def test_a_judge_rehearses_only_before_its_first_grading_and_only_while_no_worker_waits(pool):
    request = GradingRequest(source="x = 1\n")
    judge = Judge(Limits(), NotReadyYet(pool))
    try:
        assert judge.rehearse(request) > 0
        assert judge.rehearse(request) == 0  # once per exercise and mode
    finally:
        judge.close()
    assert pool.wait_filled(60)
    ready = Judge(Limits(), pool)  # a worker waits: nothing to rehearse for
    try:
        assert ready.rehearse(request) == 0
    finally:
        ready.close()
    graded = Judge(Limits(), NotReadyYet(pool))
    try:
        graded.grade(GradingRequest(source="x = 1\n", mode="run"))
        assert graded.rehearse(GradingRequest(source="x = 1\n", mode="run")) == 0
    finally:
        graded.close()


def test_the_rehearsal_never_runs_the_submission_in_the_judge(pool, tmp_path):
    marker = tmp_path / "ran-in-the-judge"
    source = f"open({str(marker)!r}, 'w').close()\n{SUBMISSIONS[0].read_text(encoding='utf-8')}"
    judge = Judge(Limits(), NotReadyYet(pool))
    try:
        assert judge.rehearse(GradingRequest(source=source)) > 0
    finally:
        judge.close()
    assert not marker.exists()
    deadline = time.monotonic() + 5  # the worker thread ends in the background
    while "submission" in sys.modules and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "submission" not in sys.modules  # the reference it loaded is dropped again


def test_the_rehearsal_stops_before_the_next_test_once_a_worker_waits(pool):
    runtime = ExerciseRuntime.load(find_exercise(None))
    asked = iter(range(1000))
    passed = rehearse(runtime, Limits(), GradingRequest(source=""), stop=lambda: next(asked) >= 4)
    assert 1 <= passed <= 4


def test_the_rehearsal_leaves_the_judge_without_torchs_compiler():
    """Calls on meta tensors are refused in the judge's process: the first op on one imports
    torch._dynamo, ~0.75 s that would eat the time the rehearsal has."""
    code = """
import sys
from grader.judge import GradingRequest
from grader.judge.engine import Judge
from grader.sandbox import Limits

class Never:
    def has_idle(self):
        return False

judge = Judge(Limits(), Never())
print(judge.rehearse(GradingRequest(source="")), "torch._dynamo" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    passed, dynamo = done.stdout.split()
    assert int(passed) > 30
    assert dynamo == "False"


@pytest.fixture
def modules_coming_and_going():
    """Another thread adding and dropping modules all the time, switching threads as often as
    the interpreter can: what a rehearsal's worker thread does once, as it ends in the
    background (it drops its `submission` module), made near certain to land mid-discard."""
    modules = [types.ModuleType(f"coming_and_going_{i}") for i in range(2000)]
    done = threading.Event()

    def churn():
        while not done.is_set():
            for module in modules:
                sys.modules[module.__name__] = module
            for module in modules:
                sys.modules.pop(module.__name__, None)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(interval)


def test_a_rehearsal_puts_the_process_back_while_other_threads_import(modules_coming_and_going):
    runtime = ExerciseRuntime.load(find_exercise(None))
    tiers = os.path.join(runtime.exercise.tiers_dir, "")
    path = list(sys.path)
    for _ in range(20):
        assert rehearse(runtime, Limits(), GradingRequest(source=""), stop=lambda: True) == 0
        from_tiers = [
            name
            for name, module in sys.modules.copy().items()
            if str(getattr(module, "__file__", None)).startswith(tiers)
        ]
        assert from_tiers == []
        assert sys.path == path
