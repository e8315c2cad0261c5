"""Student faults and grader faults, kept apart, on a small exercise with small limits.

Tiers: A (visible, with a hidden test), B (hidden tier), C (tests with grader bugs, and
tests that try to end the whole run as `pytest` would),
D (a test that kills the judge process), E (slow calls that exhaust the grading's time).
"""

from __future__ import annotations

import dataclasses

import pytest
from judge_helpers import build_exercise

from grader.exercise import REPO_ROOT, default_exercise, refresh_catalog
from grader.judge import Grader, TierRegistryError
from grader.judge import client as judge_client
from grader.judge.engine import inventory
from grader.sandbox import WAITS, Limits

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

TIERS = """
[[tier]]
id = "A"
title = "Ratio"
description = "sequence_ratio matches the reference."
points = 10
visibility = "visible"
order = 0

[[tier]]
id = "B"
title = "Loss"
description = "gspo_loss matches the reference."
points = 5
visibility = "hidden"
order = 1

[[tier]]
id = "C"
title = "Buggy tests"
description = "Tests whose own code is broken."
points = 1
visibility = "visible"
order = 2

[[tier]]
id = "D"
title = "Judge killer"
description = "A test that ends the judge process."
points = 1
visibility = "visible"
order = 3

[[tier]]
id = "E"
title = "Slow"
description = "Slow calls."
points = 1
visibility = "visible"
order = 4
"""

BATCH = """
import os
import pytest
import torch


def batch():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.1]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[-1.1, -2.0], [-0.4, -0.3]], dtype=torch.float64)
    mask = torch.tensor([[1, 1], [1, 0]])
    return logp, old, mask
"""

TESTS = {
    "test_a.py": BATCH
    + '''
pytestmark = pytest.mark.tier("A")


def test_ratio(student, reference):
    """The ratio matches the reference."""
    got = student.sequence_ratio(*batch())
    want = reference.sequence_ratio(*batch())
    assert torch.allclose(got, want), f"ratio {got.tolist()}; expected {want.tolist()}"


@pytest.mark.hidden
def test_hidden_ratio(student, reference):
    got = student.sequence_ratio(*batch())
    assert torch.allclose(got, reference.sequence_ratio(*batch())), "hidden ratio differs"
''',
    "test_b.py": BATCH
    + """
@pytest.mark.tier("B")
def test_loss(student, reference):
    logp, old, mask = batch()
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    got = student.gspo_loss(logp, old, adv, mask)
    assert torch.allclose(got, reference.gspo_loss(logp, old, adv, mask)), "loss differs"
""",
    "test_c.py": BATCH
    + """
pytestmark = pytest.mark.tier("C")


@pytest.fixture
def broken_fixture():
    raise RuntimeError("the fixture has a bug")


def test_bug_in_test_code(student):
    ratio = student.sequence_ratio(*batch())
    {}["no such key"]


def test_bug_in_fixture(broken_fixture):
    pass


@pytest.fixture
def interrupting_fixture():
    raise KeyboardInterrupt


def test_interrupts_the_run(student):
    raise KeyboardInterrupt


def test_exits_pytest():
    pytest.exit("enough")


def test_asks_the_session_to_stop(request):
    request.session.shouldstop = "enough"


def test_interrupting_fixture(interrupting_fixture):
    pass


def test_after_the_interrupts(student):
    assert student.sequence_ratio(*batch()).shape == (2,)
""",
    "test_d.py": BATCH
    + """
@pytest.mark.tier("D")
def test_judge_dies():
    os._exit(3)
""",
    "test_e.py": BATCH
    + """
pytestmark = pytest.mark.tier("E")


@pytest.mark.parametrize("n", range(10))
def test_slow(student, n):
    student.sequence_ratio(*batch())
""",
}

REFERENCE = (REPO_ROOT / "reference" / "gspo.py").read_text(encoding="utf-8")
# small, yet with room for a worker's torch import on a loaded 2-core machine
LIMITS = Limits(call_wall_seconds=3.0, grading_wall_seconds=20.0, cpu_seconds=30.0)


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    root = build_exercise(tmp_path_factory.mktemp("exercise"), TIERS, TESTS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GSPO_GRADER_EXERCISE_DIR", str(root))
        refresh_catalog()
        # warm=False: the warm-up grading would run tier D, which ends the judge process
        with Grader(pool_size=1, limits=LIMITS, warm=False) as warm:
            assert warm.wait_ready(300), "the judge process did not start"
            yield warm
    refresh_catalog()


def outcomes(report):
    return {test.id.split("::")[-1]: test for tier in report.tiers for test in tier.tests}


def test_reference_passes_and_run_mode_hides_hidden_tests_and_tiers(grader):
    submit = grader.grade(REFERENCE, mode="submit", tiers=["A", "B"])
    assert submit.passed and submit.score == 15.0 and submit.max_score == 15.0
    assert set(outcomes(submit)) == {"test_ratio", "test_hidden_ratio", "test_loss"}
    assert [t.visibility for t in submit.tiers] == ["mixed", "hidden"]
    run = grader.grade(REFERENCE, mode="run", tiers=["A", "B"])
    assert run.passed and set(outcomes(run)) == {"test_ratio"} and run.max_score == 10.0


def test_wrong_answer_shows_inputs_for_visible_tests_only(grader):
    wrong = REFERENCE.replace("return torch.exp(mean).to(logp.dtype)", "return mean.to(logp.dtype)")
    report = grader.grade(wrong, mode="submit", tiers=["A"])
    tests = outcomes(report)
    assert tests["test_ratio"].outcome == "failed" and "expected" in tests["test_ratio"].message
    assert "sequence_ratio(" in tests["test_ratio"].inputs
    assert (
        tests["test_hidden_ratio"].outcome == "failed" and tests["test_hidden_ratio"].inputs is None
    )
    assert report.tiers[0].score == 0 and report.submission_error is None


def test_grader_bugs_are_not_blamed_on_the_student(grader):
    report = grader.grade(REFERENCE, tiers=["C"])
    tests = outcomes(report)
    for name in ("test_bug_in_test_code", "test_bug_in_fixture"):
        assert tests[name].outcome == "error", tests[name]
        assert tests[name].message.startswith("Grader error (not your code's fault)")
    assert "KeyError" in tests["test_bug_in_test_code"].message
    assert "the fixture has a bug" in tests["test_bug_in_fixture"].message
    assert report.grader_error is not None and "not in your code" in report.grader_error.message
    assert report.submission_error is None and not report.passed


def test_a_tier_that_ends_the_run_loses_only_its_own_test(grader):
    """KeyboardInterrupt, pytest.exit and session.shouldstop end a `pytest` run; in a
    grading, each fails its own test as the grader's fault, the judge lives on, and the
    next test and the next grading are judged."""
    failures = grader.stats()["judge_failures"]
    for _ in range(2):
        report = grader.grade(REFERENCE, tiers=["C"])
        tests = outcomes(report)
        for name in ("test_interrupts_the_run", "test_exits_pytest",
                     "test_asks_the_session_to_stop", "test_interrupting_fixture"):  # fmt: skip
            assert tests[name].outcome == "error", tests[name]
            assert tests[name].message.startswith("Grader error (not your code's fault)")
            assert "tried to stop the whole grading" in tests[name].message, tests[name]
        assert tests["test_after_the_interrupts"].outcome == "passed", tests
        assert report.submission_error is None
    assert "Exit: enough" in tests["test_exits_pytest"].message
    assert "'enough'" in tests["test_asks_the_session_to_stop"].message
    assert grader.stats()["judge_failures"] == failures


def test_endless_loop_at_import_is_a_timeout(grader):
    report = grader.grade("while True:\n    pass\n", tiers=["A"])
    assert report.submission_error is not None and report.submission_error.kind == "timeout"
    assert all(test.outcome == "failed" for test in outcomes(report).values())
    assert report.grader_error is None


def test_endless_loop_in_a_call_is_a_timeout(grader):
    source = (
        REFERENCE + "\n\ndef sequence_ratio(logp, old_logp, mask):\n    while True:\n        pass\n"
    )
    report = grader.grade(source, mode="run", tiers=["A"])
    assert report.submission_error is not None and report.submission_error.kind == "timeout"
    assert outcomes(report)["test_ratio"].outcome == "failed"
    assert report.grader_error is None and not report.passed


def test_running_out_of_memory_is_named_as_such(grader):
    source = REFERENCE + "\n\ndef sequence_ratio(logp, old_logp, mask):\n"
    source += "    hoard = bytearray(64 * 2**30)\n    return logp\n"
    report = grader.grade(source, mode="run", tiers=["A"])
    error = report.submission_error
    assert error is not None and error.kind == "memory_limit", error
    assert "MemoryError" in outcomes(report)["test_ratio"].message
    assert report.grader_error is None and not report.passed


SLOW = REFERENCE.replace(
    "def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:",
    "def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:\n"
    "    import time; time.sleep(2.5)",
)


def test_grading_time_limit_stops_the_remaining_tests(grader):
    report = grader.grade(SLOW, tiers=["E"])
    assert report.submission_error is not None and report.submission_error.kind == "timeout"
    assert any("Not run" in test.message for test in outcomes(report).values())
    assert report.timings.total_s < LIMITS.grading_wall_seconds + 10


def test_a_dying_judge_is_a_grader_error_and_is_replaced(grader):
    report = grader.grade(REFERENCE, tiers=["D"])
    assert report.grader_error is not None and "judge" in report.grader_error.message
    assert report.submission_error is None and not report.passed
    after = grader.grade(REFERENCE, tiers=["A"])
    assert after.passed, after.grader_error
    assert grader.stats()["judge_failures"] >= 1


def test_a_judge_that_does_not_answer_in_time_is_a_timeout(grader, monkeypatch):
    margin = 1.0 - 2 * LIMITS.grading_wall_seconds  # the judge gets 1 s in all
    monkeypatch.setattr(judge_client, "WAITS", dataclasses.replace(WAITS, judge_margin_s=margin))
    report = grader.grade(SLOW, tiers=["E"])  # a 2.5 s call against a 1 s outer limit
    assert report.submission_error is not None and report.submission_error.kind == "timeout"
    assert "stopped" in report.submission_error.message
    assert [tier.id for tier in report.tiers] == ["E"] and report.max_score == 1.0


def test_unknown_or_missing_tier_marker_is_a_clear_collection_error(tmp_path, use_exercise):
    tests = {"test_x.py": 'import pytest\n\n@pytest.mark.tier("T9")\ndef test_x():\n    pass\n'}
    use_exercise(build_exercise(tmp_path / "unknown", TIERS, tests))
    with pytest.raises(TierRegistryError) as error:
        inventory(default_exercise())
    for words in ("test_x.py::test_x", "'T9'", "A, B, C, D, E"):
        assert words in str(error.value)
    use_exercise(
        build_exercise(tmp_path / "missing", TIERS, {"test_y.py": "def test_y():\n    pass\n"})
    )
    with pytest.raises(TierRegistryError, match=r"test_y.py::test_y: no tier marker"):
        inventory(default_exercise())
