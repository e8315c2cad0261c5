"""The tier suites' power: every plausible wrong submission is caught, every correct one passes.

tests/grader/implementations/ holds complete submissions: wrong/ (typical student and library
mistakes, each named in its docstring) and correct/ (the same mathematics written differently).
Each is graded through the judge's real path (warm `Grader`, sandboxed worker, submit mode),
and the suites must tell them apart. The starter must fail every single test, so that no test
passes a stub by accident, and a constant stub (ratio 1, loss 0, both with a gradient) must
fail every tier. Run with -s to see which tiers caught each wrong implementation.
"""

from __future__ import annotations

import ast
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.exercise import default_exercise
from grader.judge import Grader
from grader.report import Report

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

IMPLEMENTATIONS = Path(__file__).resolve().parent.parent / "implementations"
WRONG = sorted((IMPLEMENTATIONS / "wrong").glob("*.py"))
CORRECT = sorted((IMPLEMENTATIONS / "correct").glob("*.py"))
CALL_BUDGET = 250  # student calls of one submit-mode grading of the reference (sandbox cost)

CONSTANT_STUB = """
import torch


def sequence_ratio(logp, old_logp, mask):
    return torch.ones_like(logp[:, 0]) + 0 * torch.where(mask != 0, logp, 0.0).sum(-1)


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    return 0 * torch.where(mask != 0, logp, 0.0).sum()
"""


def unreliable(report: Report) -> bool:
    """A crash or timeout may be the shared machine starving a correct worker: worth one
    retry. A grader error never is: that is our fault, and the test fails on it at once."""
    assert report.grader_error is None, f"grader error: {report.grader_error}"
    error = report.submission_error
    return error is not None and error.kind in ("crash", "timeout")


def grade_all(grader: Grader, jobs: dict[str, tuple[str, str]]) -> dict[str, Report]:
    """Grade {name: (source, mode)} two at a time; retry once a grading the machine spoiled."""

    def one(name: str) -> Report:
        source, mode = jobs[name]
        filename = f"{name.split('/')[-1].replace(' ', '_')}.py"
        report = grader.grade(source, mode=mode, filename=filename)
        if unreliable(report):
            report = grader.grade(source, mode=mode, filename=filename)
            assert report.grader_error is None, f"{name}: grader error {report.grader_error}"
        return report

    with ThreadPoolExecutor(max_workers=grader.pool_size) as pool:
        return dict(zip(jobs, pool.map(one, jobs), strict=True))


def caught_by(report: Report) -> list[str]:
    return [tier.id for tier in report.tiers if not tier.passed]


def print_table(reports: dict[str, Report], seconds: float) -> None:
    """Which tiers caught which implementation, and how many of each tier's tests failed."""
    print(f"\n{'implementation':45s} {'verdict':8s} tiers failing (failed tests)")
    for name, report in reports.items():
        failing = [
            f"{t.id}({sum(x.outcome != 'passed' for x in t.tests)})"
            for t in report.tiers
            if not t.passed
        ]
        verdict = "PASS" if report.passed else "fail"
        print(f"{name:45s} {verdict:8s} {' '.join(failing) or '-'}")
    print(f"{len(reports)} gradings in {seconds:.1f} s")


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    """Every implementation, the starter, the constant stub and the reference, graded once."""
    exercise = default_exercise()
    jobs = {f"{p.parent.name}/{p.stem}": (p.read_text(encoding="utf-8"), "submit") for p in WRONG}
    jobs |= {f"correct/{p.stem}": (p.read_text(encoding="utf-8"), "submit") for p in CORRECT}
    jobs["starter"] = (exercise.starter.read_text(encoding="utf-8"), "submit")
    jobs["constant stub"] = (CONSTANT_STUB, "submit")
    jobs["reference"] = (exercise.reference.read_text(encoding="utf-8"), "submit")
    jobs["reference (run mode)"] = (exercise.reference.read_text(encoding="utf-8"), "run")
    start = time.perf_counter()
    with Grader(pool_size=2) as grader:
        found = grade_all(grader, jobs)
    print_table(found, time.perf_counter() - start)
    return found


def test_collection_is_large_enough():
    """At least 25 wrong and 6 correct implementations, each stating its point in a docstring."""
    assert len(WRONG) >= 25, f"only {len(WRONG)} wrong implementations"
    assert len(CORRECT) >= 6, f"only {len(CORRECT)} correct implementations"
    for path in WRONG + CORRECT:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{path.name} has no module docstring"
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert {"sequence_ratio", "gspo_loss"} <= names, f"{path.name} lacks a function"


def test_reference_passes_every_test_within_budget(reports):
    """The reference passes every test, within the student-call budget of the sandbox."""
    report = reports["reference"]
    failed = [x.id for t in report.tiers for x in t.tests if x.outcome != "passed"]
    assert report.passed and not failed, f"the reference fails {failed}: {report.grader_error}"
    assert report.score == report.max_score > 0
    calls = report.metrics.get("student_calls", 0)
    assert 0 < calls <= CALL_BUDGET, f"a submit grading makes {calls} student calls"


def test_run_mode_shows_every_tier_without_hidden_tests(reports):
    """Run gives feedback in every tier and holds back the hidden tests."""
    run, submit = reports["reference (run mode)"], reports["reference"]
    assert [t.id for t in run.tiers] == [t.id for t in submit.tiers]
    for tier in run.tiers:
        assert tier.tests, f"tier {tier.id} shows no test on Run"
        assert not any(x.hidden for x in tier.tests), f"tier {tier.id} shows a hidden test on Run"
    hidden = sum(x.hidden for t in submit.tiers for x in t.tests)
    assert hidden >= 5, f"only {hidden} hidden tests on Submit"


@pytest.mark.parametrize("path", WRONG, ids=lambda p: p.stem)
def test_wrong_implementation_fails_a_tier(reports, path):
    """Each wrong implementation fails at least one tier, and by a failed test, not an error."""
    report = reports[f"wrong/{path.stem}"]
    assert report.grader_error is None, f"grader error: {report.grader_error}"
    assert caught_by(report), f"{path.name} passes every tier"
    assert not report.passed


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.stem)
def test_correct_implementation_passes_every_tier(reports, path):
    """Each correct variant passes every test of every tier in submit mode."""
    report = reports[f"correct/{path.stem}"]
    failed = {x.id: x.message for t in report.tiers for x in t.tests if x.outcome != "passed"}
    assert report.passed and not failed, f"{path.name} fails: {failed} {report.grader_error}"


def test_starter_fails_every_test(reports):
    """The starter (NotImplementedError) fails every single test: none passes a stub."""
    report = reports["starter"]
    submit = reports["reference"]
    assert report.grader_error is None, f"grader error: {report.grader_error}"
    passed = [x.id for t in report.tiers for x in t.tests if x.outcome == "passed"]
    assert not passed, f"the starter passes {passed}"
    count = sum(len(t.tests) for t in report.tiers)
    assert count == sum(len(t.tests) for t in submit.tiers), "the starter ran fewer tests"


def test_constant_stub_fails_every_tier(reports):
    """Ratio 1 and loss 0, both with a gradient path, fail every tier."""
    report = reports["constant stub"]
    assert report.grader_error is None, f"grader error: {report.grader_error}"
    assert caught_by(report) == [t.id for t in report.tiers]
