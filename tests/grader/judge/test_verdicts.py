"""Whose fault is a failure, what the student reads, and how tiers are scored."""

from __future__ import annotations

import pytest

from grader.judge import Tier
from grader.judge.engine import (
    GRADER_FAULT,
    SubmissionNotLoaded,
    TestRecord,
    judge_exception,
    tier_results,
)
from grader.sandbox import StudentError, StudentTimeout


def raised(statement):
    try:
        statement()
    except BaseException as error:
        return error
    raise AssertionError("nothing was raised")


def test_assertion_keeps_the_authors_message_only():
    error = AssertionError("ratio has shape [4, 1]; expected [4]\nassert (4, 1) == (4,)")
    verdict = judge_exception(error, "call")
    assert (verdict.outcome, verdict.blame) == ("failed", "student")
    assert verdict.message == "ratio has shape [4, 1]; expected [4]"


def test_pytest_fail_counts_as_a_failed_check():
    verdict = judge_exception(raised(lambda: pytest.fail("loss was 0.3; expected 0.5")), "call")
    assert verdict.outcome == "failed" and verdict.message == "loss was 0.3; expected 0.5"


def test_student_exceptions_fail_with_their_own_words():
    error = StudentError("ZeroDivisionError", "division by zero", line=12)
    verdict = judge_exception(error, "call")
    assert verdict.outcome == "failed" and verdict.blame == "student"
    assert verdict.message == "ZeroDivisionError: division by zero (submission.py, line 12)"
    timeout = judge_exception(StudentTimeout("the call took more than 3 s"), "call")
    assert timeout.outcome == "failed" and timeout.student_error is not None


def test_load_failure_in_setup_blames_the_student():
    verdict = judge_exception(SubmissionNotLoaded("SyntaxError: invalid syntax (line 3)"), "setup")
    assert verdict.outcome == "failed" and "line 3" in verdict.message


@pytest.mark.parametrize("phase", ["setup", "call", "teardown"])
def test_other_exceptions_are_the_graders_fault(phase):
    verdict = judge_exception(TypeError("'float' object is not subscriptable"), phase)
    assert verdict.outcome == "error" and verdict.blame == "grader"
    assert verdict.message.startswith(GRADER_FAULT)
    assert "TypeError: 'float' object is not subscriptable" in verdict.message


def test_skips_are_skipped():
    verdict = judge_exception(raised(lambda: pytest.skip("no bfloat16 here")), "call")
    assert verdict.outcome == "skipped" and "bfloat16" in verdict.message


def test_long_messages_are_cut():
    verdict = judge_exception(AssertionError("x" * 5000), "call")
    assert len(verdict.message) <= 800 and verdict.message.endswith("...")


TIER = Tier("T1", "Reference compare", "", 30.0, "visible", 1)


def record(outcome, hidden=False, tier=TIER, inputs="f(x)", same_as=None, name="t"):
    return TestRecord(tier, f"{name}_{outcome}", "name", hidden, outcome, "why", inputs,
                      same_as=same_as)  # fmt: skip


def tier_result(tier, records):
    (result,) = tier_results([tier], records)
    return result


def test_tier_score_is_points_times_share_of_graded_tests():
    records = [record("passed"), record("failed"), record("passed", hidden=True), record("skipped")]
    result = tier_result(TIER, records)
    assert result.score == 20.0 and result.max_score == 30.0
    assert not result.passed and result.visibility == "mixed"
    assert tier_result(TIER, [record("passed")]).passed


def test_hidden_and_passed_tests_reveal_no_inputs():
    failed, hidden, passed = record("failed"), record("error", hidden=True), record("passed")
    results = tier_result(TIER, [failed, hidden, passed]).tests
    assert [r.inputs for r in results] == ["f(x)", None, None]
    assert results[2].message == ""


def test_tiers_without_selected_tests_are_left_out():
    t0 = Tier("T0", "Contract", "", 10.0, "visible", 0)
    results = tier_results([t0, TIER], [record("passed")])
    assert [r.id for r in results] == ["T1"]


def test_tests_failing_with_one_student_error_point_to_the_first_across_tiers():
    t0 = Tier("T0", "Contract", "", 10.0, "visible", 0)
    same = ("NotImplementedError", "not written yet", 37)
    records = [
        record("failed", tier=t0, same_as=same, name="a"),
        record("failed", tier=t0, same_as=("ValueError", "other", 3), name="b"),
        record("failed", same_as=same, name="c"),
        record("failed", name="d"),  # an assertion: never grouped
    ]
    contract, compare = tier_results([t0, TIER], records)
    assert [t.same_error_as for t in contract.tests] == [None, None]
    assert [t.same_error_as for t in compare.tests] == ["a_failed", None]
