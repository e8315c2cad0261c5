"""The tier suites' power: every wrong submission is caught, every correct one passes.

An exercise's corpus (`Exercise.corpus`, tests/implementations/ for the root exercise) holds
complete submissions: correct/ (the same mathematics in many styles) and wrong/ (one mistake
each, from student code and from the formulations RL libraries use). `grade_corpus` grades all
of them, the starter and the reference through the judge's real path (warm `Grader`,
sandboxed workers, submit mode), and the tests below hold the suites to these rules:

- a wrong file ends its docstring with `Caught by: <test id>, ...`; exactly those tests fail,
  each with outcome "failed", and the grading has no submission error: a timeout, a crash or
  a grader error is not a kill, and a test failing that the file does not name is a second
  mistake (or a test that changed);
- a wrong file is one edit away from a correct one (one hunk of the AST-normalized source);
- a correct file passes every test; the only test it may skip (an inconclusive check) is the
  one its docstring names on an `Inconclusive: <test id>` line (on a machine with a GPU the
  check runs on `cuda` too and decides, so nothing is skipped);
- every tier test is named by at least one wrong file: no test is dead weight;
- a grading that crashed or timed out is graded once more and counted; the reference and the
  correct files must never need that.

Run with -s to see which tests caught each wrong file.
"""

from __future__ import annotations

import ast
import difflib
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from grader.exercise import Exercise, catalog, default_exercise
from grader.judge import Grader
from grader.report import Report

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

EXERCISES = catalog()  # every exercise this installation serves: each has its corpus
COUNTS = {"gspo": {"correct": 19, "wrong": 71}, "dpo": {"correct": 10, "wrong": 46}}  # README
CALL_BUDGET = 250  # student calls of one submit grading of the reference (~1 ms each)

CONSTANT_STUB = """
import torch


def sequence_ratio(logp, old_logp, mask):
    return torch.ones_like(logp[:, 0]) + 0 * torch.where(mask != 0, logp, 0.0).sum(-1)


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    return 0 * torch.where(mask != 0, logp, 0.0).sum()
"""
EXTRA = {"gspo": {"constant stub": CONSTANT_STUB}}  # graded beside the corpus


def corpus(exercise: Exercise, kind: str) -> list[Path]:
    return sorted((exercise.corpus / kind).glob("*.py"))


def cases(kind: str) -> list:
    return [
        pytest.param(exercise, path, id=f"{exercise.id}/{path.stem}")
        for exercise in EXERCISES.values()
        for path in corpus(exercise, kind)
    ]


def named(path: Path, label: str) -> set[str]:
    """The test ids on the docstring's `label: a, b` line (empty when there is none)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    found = re.search(rf"^{label}: (.+)$", docstring, re.MULTILINE)
    return {name.strip() for name in found.group(1).split(",")} if found else set()


# ---- grading ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Graded:
    """One grading, and how many times it had to be repeated (a crash or timeout)."""

    report: Report
    retries: int = 0


def spoiled(report: Report) -> bool:
    """A crash or timeout may be the shared machine starving a worker: graded once more,
    and counted. A grader error never is: the test fails on it at once."""
    assert report.grader_error is None, f"grader error: {report.grader_error}"
    error = report.submission_error
    return error is not None and error.kind in ("crash", "timeout")


def grade_one(grader: Grader, exercise: Exercise, source: str, mode: str, name: str) -> Graded:
    filename = f"{name.split('/')[-1].replace(' ', '_')}.py"
    chosen = {} if exercise.id == default_exercise().id else {"exercise": exercise.id}
    report = grader.grade(source, mode=mode, filename=filename, **chosen)
    if not spoiled(report):
        return Graded(report)
    report = grader.grade(source, mode=mode, filename=filename, **chosen)
    assert report.grader_error is None, f"{name}: grader error {report.grader_error}"
    return Graded(report, retries=1)


def grade_corpus(exercise: Exercise) -> dict[str, Graded]:
    """Every corpus file (as "correct/x", "wrong/y"), the starter, the reference in both modes
    and the exercise's extra submissions, graded once (two at a time)."""
    jobs = {
        f"{kind}/{path.stem}": (path.read_text(encoding="utf-8"), "submit")
        for kind in ("correct", "wrong")
        for path in corpus(exercise, kind)
    }
    jobs["starter"] = (exercise.starter.read_text(encoding="utf-8"), "submit")
    reference = exercise.reference.read_text(encoding="utf-8")
    jobs["reference"] = (reference, "submit")
    jobs["reference (run mode)"] = (reference, "run")
    jobs |= {name: (source, "submit") for name, source in EXTRA.get(exercise.id, {}).items()}
    start = time.perf_counter()
    with Grader(pool_size=2) as grader:

        def one(name: str) -> Graded:
            return grade_one(grader, exercise, *jobs[name], name)

        with ThreadPoolExecutor(max_workers=grader.pool_size) as pool:
            found = dict(zip(jobs, pool.map(one, jobs), strict=True))
    print_table(exercise, found, time.perf_counter() - start)
    return found


def failed(report: Report) -> set[str]:
    return {x.id for t in report.tiers for x in t.tests if x.outcome == "failed"}


def not_passed(report: Report) -> dict[str, str]:
    return {x.id: x.outcome for t in report.tiers for x in t.tests if x.outcome != "passed"}


def print_table(exercise: Exercise, graded: dict[str, Graded], seconds: float) -> None:
    print(f"\n{exercise.id}: {'submission':44s} {'verdict':7s} failed  retries  tiers failing")
    for name, result in graded.items():
        report = result.report
        verdict = "PASS" if report.passed else "fail"
        tiers = " ".join(t.id for t in report.tiers if not t.passed) or "-"
        print(f"  {name:50s} {verdict:7s} {len(failed(report)):6d}  {result.retries:7d}  {tiers}")
    retried = [name for name, result in graded.items() if result.retries]
    print(f"{len(graded)} gradings in {seconds:.1f} s; graded again after a crash or timeout: "
          f"{', '.join(retried) or 'none'}")  # fmt: skip


_GRADED: dict[str, dict[str, Graded]] = {}


@pytest.fixture(scope="module")
def graded():
    """grade_corpus(exercise), once per exercise for the whole module."""

    def of(exercise: Exercise) -> dict[str, Graded]:
        if exercise.id not in _GRADED:
            _GRADED[exercise.id] = grade_corpus(exercise)
        return _GRADED[exercise.id]

    yield of
    _GRADED.clear()


def test_grade_one_grades_again_and_counts_a_spoiled_grading():
    """A crash is graded once more and counted; a clean grading is not repeated."""

    class Flaky:
        def __init__(self, reports):
            self.reports, self.calls = list(reports), 0

        def grade(self, source, **options):
            self.calls += 1
            return self.reports.pop(0)

    crash = Report.model_validate(
        {"passed": False, "score": 0, "max_score": 100,
         "submission_error": {"kind": "crash", "message": "the worker died"}}
    )  # fmt: skip
    clean = Report(passed=True, score=100, max_score=100)
    flaky = Flaky([crash, clean])
    assert grade_one(flaky, default_exercise(), "", "submit", "x") == Graded(clean, retries=1)
    steady = Flaky([clean])
    assert grade_one(steady, default_exercise(), "", "submit", "x").retries == 0
    assert steady.calls == 1


# ---- the corpus, without grading ----------------------------------------------------------
@pytest.mark.parametrize("exercise", EXERCISES.values(), ids=EXERCISES)
def test_corpus_has_the_stated_size_and_docstrings(exercise):
    """Exact counts; every file states its point and defines the exercise's functions; every
    wrong file names the tests that catch it."""
    sizes = {kind: len(corpus(exercise, kind)) for kind in ("correct", "wrong")}
    assert sizes == COUNTS[exercise.id], f"corpus sizes {sizes}; update COUNTS and the README"
    for path in corpus(exercise, "correct") + corpus(exercise, "wrong"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{path.name} has no module docstring"
        functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert set(exercise.function_names) <= functions, f"{path.name} lacks a function"
    for path in corpus(exercise, "wrong"):
        last = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))).splitlines()[-1]
        assert last.startswith("Caught by: "), f"{path.name}: the docstring must end with it"


def code_lines(path: Path) -> list[str]:
    """The source without docstrings and comments, one statement layout (ast.unparse)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            node.body = body[1:] or [ast.Pass()]  # a docstring (or a bare constant)
    return ast.unparse(tree).splitlines()


def edits(a: list[str], b: list[str]) -> int:
    """How many separate places (hunks) differ between two sources."""
    opcodes = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    return sum(tag != "equal" for tag, *_ in opcodes)


@pytest.mark.parametrize(("exercise", "path"), cases("wrong"))
def test_wrong_implementation_is_one_edit_from_a_correct_one(exercise, path):
    """Wrong in one way by construction: a single hunk away from some correct file."""
    mine = code_lines(path)
    nearest = min(
        (edits(code_lines(other), mine), other.stem) for other in corpus(exercise, "correct")
    )
    assert nearest[0] == 1, f"{path.name} is {nearest[0]} edits from {nearest[1]}.py"


# ---- the gradings -------------------------------------------------------------------------
@pytest.mark.parametrize("exercise", EXERCISES.values(), ids=EXERCISES)
def test_reference_passes_every_test_within_budget(graded, exercise):
    """The reference passes every test without a retry, within the student-call budget."""
    result = graded(exercise)["reference"]
    report = result.report
    assert result.retries == 0, "the reference needed a second grading (crash or timeout)"
    assert report.passed and not not_passed(report), f"{not_passed(report)} {report.grader_error}"
    assert report.score == report.max_score > 0
    calls = report.metrics.get("student_calls", 0)
    assert 0 < calls <= CALL_BUDGET, f"a submit grading makes {calls} student calls"


@pytest.mark.parametrize("exercise", EXERCISES.values(), ids=EXERCISES)
def test_run_mode_shows_every_tier_without_hidden_tests(graded, exercise):
    """Run gives feedback in every tier and holds back the hidden tests."""
    run, submit = graded(exercise)["reference (run mode)"].report, graded(exercise)["reference"]
    assert [t.id for t in run.tiers] == [t.id for t in submit.report.tiers]
    for tier in run.tiers:
        assert tier.tests, f"tier {tier.id} shows no test on Run"
        assert not any(x.hidden for x in tier.tests), f"tier {tier.id} shows a hidden test on Run"
    hidden = sum(x.hidden for t in submit.report.tiers for x in t.tests)
    assert hidden >= 5, f"only {hidden} hidden tests on Submit"


@pytest.mark.parametrize(("exercise", "path"), cases("wrong"))
def test_wrong_implementation_fails_exactly_the_named_tests(graded, exercise, path):
    """The tests the file names fail (outcome "failed", no submission error), and no other."""
    report = graded(exercise)[f"wrong/{path.stem}"].report
    assert report.grader_error is None, f"grader error: {report.grader_error}"
    assert report.submission_error is None, f"not a kill: {report.submission_error}"
    assert not report.passed
    want, got = named(path, "Caught by"), failed(report)
    assert got == want, (
        f"named but passed: {sorted(want - got)}; failed, not named: {sorted(got - want)}"
    )
    errors = {k: v for k, v in not_passed(report).items() if v not in ("failed", "skipped")}
    assert not errors, f"{path.name}: outcomes that are not failures: {errors}"


@pytest.mark.parametrize(("exercise", "path"), cases("correct"))
def test_correct_implementation_passes_every_test(graded, exercise, path):
    """Every test passes, without a retry; only the declared inconclusive check may skip."""
    result = graded(exercise)[f"correct/{path.stem}"]
    report = result.report
    assert result.retries == 0, f"{path.name} needed a second grading (crash or timeout)"
    outcomes = not_passed(report)
    skipped = {k for k, v in outcomes.items() if v == "skipped"}
    assert set(outcomes) == skipped, f"{path.name}: {outcomes} {report.grader_error}"
    inconclusive = set() if torch.cuda.is_available() else named(path, "Inconclusive")
    assert skipped == inconclusive, f"{path.name} skipped {sorted(skipped)}"
    assert report.passed and report.score == report.max_score


@pytest.mark.parametrize("exercise", EXERCISES.values(), ids=EXERCISES)
def test_every_test_catches_a_wrong_implementation(graded, exercise):
    """Each tier test is named by at least one wrong file of the corpus."""
    tests = {x.id for t in graded(exercise)["reference"].report.tiers for x in t.tests}
    caught = set().union(*(named(path, "Caught by") for path in corpus(exercise, "wrong")))
    assert caught <= tests, f"unknown test ids named: {sorted(caught - tests)}"
    assert tests <= caught, f"tests no wrong implementation names: {sorted(tests - caught)}"


@pytest.mark.parametrize("exercise", EXERCISES.values(), ids=EXERCISES)
def test_starter_fails_every_test(graded, exercise):
    """The starter (NotImplementedError) fails every single test: none passes a stub."""
    report = graded(exercise)["starter"].report
    assert report.grader_error is None, f"grader error: {report.grader_error}"
    outcomes = {x.id: x.outcome for t in report.tiers for x in t.tests}
    assert set(outcomes.values()) == {"failed"}, f"the starter: {outcomes}"
    reference = graded(exercise)["reference"].report
    assert len(outcomes) == sum(len(t.tests) for t in reference.tiers), "fewer tests ran"


def test_constant_stub_fails_every_tier(graded):
    """Ratio 1 and loss 0, both with a gradient path, fail every tier of the GSPO exercise."""
    report = graded(EXERCISES["gspo"])["constant stub"].report
    assert report.grader_error is None, f"grader error: {report.grader_error}"
    assert [t.id for t in report.tiers if not t.passed] == [t.id for t in report.tiers]
