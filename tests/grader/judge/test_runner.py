"""The judge end to end on the real tier suites, through a warm Grader and real sandboxes.

One Grader (one judge process, one pre-started worker) serves the whole module, so each
grading costs its tests, not a torch import.
"""

from __future__ import annotations

import pytest

from grader.exercise import REPO_ROOT, default_exercise, find_exercise
from grader.judge import Grader, load_tiers
from grader.sandbox import Limits

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

REFERENCE = (REPO_ROOT / "reference" / "gspo.py").read_text(encoding="utf-8")
STARTER = (REPO_ROOT / "starter" / "gspo.py").read_text(encoding="utf-8")
# generous: this 2-core machine is shared; the timeout tests use small limits (test_faults.py)
LIMITS = Limits(call_wall_seconds=30.0, grading_wall_seconds=120.0, cpu_seconds=120.0)


STATS: list = []  # (report, GradingStats) of every grading the module's grader ran


@pytest.fixture(scope="module")
def grader():
    with Grader(pool_size=1, limits=LIMITS, on_stats=lambda *graded: STATS.append(graded)) as warm:
        assert warm.wait_ready(300), "the judge process did not start"
        yield warm


def all_tests(report):
    return [test for tier in report.tiers for test in tier.tests]


def test_reference_passes_every_tier_on_submit(grader):
    report = grader.grade(REFERENCE, mode="submit", filename="reference.py")
    assert report.grader_error is None and report.submission_error is None
    assert report.passed and report.score == report.max_score
    assert [t.id for t in report.tiers] == [t.id for t in load_tiers(default_exercise().tiers_file)]
    assert all(test.outcome == "passed" for test in all_tests(report))
    assert any(test.hidden for test in all_tests(report))
    assert report.artifacts is not None and len(report.artifacts.data["ratios"]) == 3
    assert [table.name for table in report.artifacts.tables] == ["grad_matrix", "ratios", "checks"]
    graded, stats = STATS[-1]
    assert report.isolation and graded is report and stats.student_calls > 0
    assert stats.tier_tests == len(all_tests(report)) and stats.judge_cpu_seconds > 0
    assert "metrics" not in report.model_dump()  # the grader's counters are not the student's
    assert report.timings.total_s > 0 and report.mode == "submit"


def test_run_mode_leaves_hidden_tests_out(grader):
    report = grader.grade(REFERENCE, mode="run")
    assert report.passed and report.mode == "run"
    assert all_tests(report) and not any(test.hidden for test in all_tests(report))
    visible = [t for t in load_tiers(default_exercise().tiers_file) if t.visibility == "visible"]
    assert report.max_score == sum(t.points for t in visible)


def test_tier_selection(grader):
    report = grader.grade(REFERENCE, tiers=["T0"])
    assert [t.id for t in report.tiers] == ["T0"] and report.passed


def test_starter_fails_every_test_with_not_implemented(grader):
    report = grader.grade(STARTER, mode="submit")
    assert not report.passed and report.score == 0 and report.grader_error is None
    tests = all_tests(report)
    assert tests and all(test.outcome == "failed" for test in tests)
    assert all("NotImplementedError" in test.message for test in tests)
    assert all("Traceback" not in test.message for test in tests)
    visible_failed = [test for test in tests if not test.hidden]
    assert any(test.inputs and "tensor(" in test.inputs for test in visible_failed)
    assert all(test.inputs is None for test in tests if test.hidden)


def test_syntax_error_is_a_submission_error_with_its_line(grader):
    source = "import torch\n\ndef sequence_ratio(logp, old_logp, mask)\n    return logp\n"
    report = grader.grade(source, tiers=["T0"])
    error = report.submission_error
    assert error is not None and error.kind == "syntax_error" and error.line == 3
    assert not report.passed and report.grader_error is None
    assert all(test.outcome == "failed" for test in all_tests(report))


def test_missing_function_is_named(grader):
    source = REFERENCE.replace("def gspo_loss(", "def gspo_loss_v2(")
    report = grader.grade(source, tiers=["T0"])
    error = report.submission_error
    assert error is not None and error.kind == "missing_function"
    assert "gspo_loss" in error.message
    assert all("gspo_loss" in test.message for test in all_tests(report))


def test_exception_at_import_and_printed_output(grader):
    source = "print('loading my module')\nraise RuntimeError('boom at import')\n"
    report = grader.grade(source, tiers=["T0"])
    error = report.submission_error
    assert error is not None and error.kind == "import_error"
    assert "boom at import" in error.message and error.line == 2
    assert "loading my module" in report.output


def test_stats_count_gradings(grader):
    stats = grader.stats()
    assert stats["pool_size"] == 1 and stats["graded"] >= 1 and stats["busy"] == 0


def test_a_judge_is_recycled_after_its_gradings_and_grading_goes_on():
    with Grader(pool_size=1, limits=LIMITS, recycle_after=2, warm=False) as recycling:
        reports = [recycling.grade(REFERENCE, tiers=["T0"]) for _ in range(3)]
        stats = recycling.stats()
    assert all(report.passed for report in reports), [r.grader_error for r in reports]
    assert stats["recycled"] == 1 and stats["judge_failures"] == 0 and stats["graded"] == 3


def test_any_exercise_of_the_catalog_is_graded_by_the_same_judge(grader):
    dpo = find_exercise("dpo")
    report = grader.grade(dpo.reference.read_text(encoding="utf-8"), exercise="dpo")
    assert report.exercise == "dpo" and report.passed, report.grader_error
    assert [table.name for table in report.artifacts.tables] == ["pairs", "token_grads"]
    back = grader.grade(REFERENCE, tiers=["T0"])  # and back to the root exercise
    assert back.exercise == "gspo" and back.passed


COUNTING = (
    REFERENCE.replace("def sequence_ratio(", "def _sequence_ratio(").replace(
        "def gspo_loss(", "def _gspo_loss("
    )
    + """

CALLS = 0


def sequence_ratio(logp, old_logp, mask):
    global CALLS
    CALLS += 1
    print("call", CALLS)
    return _sequence_ratio(logp, old_logp, mask)


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    global CALLS
    CALLS += 1
    print("call", CALLS)
    return _gspo_loss(logp, old_logp, advantages, mask, clip_eps)
"""
)


def calls_run(report) -> int:
    """How many calls the worker ran, as the counting submission printed them."""
    return max(int(line.split()[1]) for line in report.output.splitlines() if line[:5] == "call ")


def test_a_grading_is_answered_ahead_from_the_last_one_and_a_run_never_sees_submit_calls():
    graded = []
    with Grader(
        pool_size=1, limits=LIMITS, warm=False, on_stats=lambda *g: graded.append(g)
    ) as fresh:
        for mode in ("submit", "run", "run", "submit"):
            fresh.grade(COUNTING, mode=mode)
    (_, submit), (_, first_run), (_, second_run), (_, second_submit) = graded
    for report, stats in graded:
        assert report.passed, report.grader_error or report.submission_error
        # the worker ran exactly the calls the tests made: none forecast and dropped
        assert calls_run(report) == stats.student_calls
    assert submit.calls_sent_ahead == 0  # nothing graded before it
    # a Run is not forecast by a Submit: the hidden tests' inputs never reach it
    assert first_run.calls_sent_ahead == 0
    assert first_run.student_calls < submit.student_calls
    for later in (second_run, second_submit):
        calls = later.student_calls
        assert later.calls_answered_ahead == later.calls_sent_ahead == calls
