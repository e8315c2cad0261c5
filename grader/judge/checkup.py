"""`gspo-grader check-exercise DIR [--corpus]`: what an instructor checks before students see
an exercise, and the rules the grader's own power test holds every exercise to.

Each check is one line: the manifest and the tier registry parse, the statement is there,
every tier has tests and they collect, the reference scores full marks within the call
budget, Run shows a test of every tier and no hidden one, Submit has enough hidden tests,
the starter fails every test, and the toy runs through the reference and draws every plot
the manifest declares. Later checks that need an earlier one's result are skipped when it
failed.

With `corpus`, every file of the exercise's corpus (tests/implementations/) is graded too,
by one warm Grader, and held to the corpus rules:

- its size is the `[corpus]` counts of exercise.toml (a file that vanished is a failure);
- every file states its point in a docstring and defines the exercise's functions;
- a wrong file ends its docstring with `Caught by: <test id>, ...`, is one edit (one hunk of
  the AST-normalized source) from some correct file, and fails exactly the tests it names,
  each with outcome "failed" and no submission error;
- a correct file passes every test; the one it may skip is the one its docstring names on
  an `Inconclusive: <test id>` line (with a GPU nothing is skipped);
- every tier test is named by some wrong file; every stub (stubs/) fails every tier;
- a grading that crashed or timed out is graded once more and counted; the reference and
  the correct files must never need that.
"""

from __future__ import annotations

import ast
import difflib
import re
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from grader.exercise import Exercise, ExerciseError, load_exercise, load_module
from grader.judge.registry import TierRegistryError, load_tiers
from grader.report import Report, score_text

CALL_BUDGET = 250  # student calls of one Submit of the reference (~1 ms each)
MIN_HIDDEN_TESTS = 5  # fewer, and a student can tune for every case they see
KINDS = ("correct", "wrong", "stubs")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Graded:
    """One grading, and how many times it had to be repeated (a crash or timeout)."""

    report: Report
    retries: int = 0


def check_exercise(folder: Path, corpus: bool = False) -> Iterator[Check]:
    try:
        exercise = load_exercise(folder)
    except ExerciseError as error:
        yield Check("manifest", False, str(error))
        return
    names = ", ".join(exercise.function_names)
    yield Check("manifest", True, f"{exercise.id}: {exercise.title} ({names})")
    text = exercise.statement.read_text(encoding="utf-8") if exercise.statement.is_file() else ""
    yield Check("statement", bool(text.strip()), f"{len(text.split())} words in statement.md")
    try:
        tiers = load_tiers(exercise.tiers_file)
    except TierRegistryError as error:
        yield Check("tier registry", False, str(error))
        return
    points = sum(tier.points for tier in tiers)
    yield Check("tier registry", True, f"{len(tiers)} tiers, {points:g} points")
    yield _tests_check(exercise, [tier.id for tier in tiers])
    files = corpus_files(exercise) if corpus else {}
    if corpus:
        yield from _static_corpus_checks(exercise, files)
    graded = grade_corpus(exercise, files)
    yield from _grading_checks(graded)
    if corpus:
        yield from _graded_corpus_checks(files, graded)
    yield _toy_check(exercise)


def _tests_check(exercise: Exercise, tier_ids: list[str]) -> Check:
    from grader.judge.engine import inventory

    try:
        tests = inventory(exercise)
    except (TierRegistryError, ExerciseError) as error:
        return Check("tier tests", False, str(error).splitlines()[0])
    counts = {tier_id: sum(t.tier.id == tier_id for t in tests) for tier_id in tier_ids}
    empty = [tier_id for tier_id, count in counts.items() if count == 0]
    detail = ", ".join(f"{tier_id}: {count}" for tier_id, count in counts.items())
    return Check("tier tests", not empty, detail + (f"; no tests in {empty}" if empty else ""))


# ---- grading --------------------------------------------------------------------------------
def corpus_files(exercise: Exercise) -> dict[str, Path]:
    """The corpus by name ("correct/x", "wrong/y", "stubs/z"), each kind sorted."""
    return {
        f"{kind}/{path.stem}": path
        for kind in KINDS
        for path in sorted((exercise.corpus / kind).glob("*.py"))
    }


def grade_one(grader, exercise: Exercise, source: str, mode: str, name: str) -> Graded:
    """A crash or timeout may be the shared machine starving a worker: graded once more,
    and counted (a grader error never is)."""
    options = {"mode": mode, "exercise": str(exercise.root), "filename": f"{Path(name).name}.py"}
    report = grader.grade(source, **options)
    error = report.submission_error
    if report.grader_error is None and error is not None and error.kind in ("crash", "timeout"):
        return Graded(grader.grade(source, **options), retries=1)
    return Graded(report)


def grade_corpus(exercise: Exercise, files: dict[str, Path]) -> dict[str, Graded]:
    """The reference (Submit and Run), the starter and `files`, graded by one Grader."""
    from grader.judge.grader import Grader

    reference = exercise.reference.read_text(encoding="utf-8")
    jobs = {"reference": (reference, "submit"), "reference (run mode)": (reference, "run")}
    jobs["starter"] = (exercise.starter.read_text(encoding="utf-8"), "submit")
    jobs |= {name: (path.read_text(encoding="utf-8"), "submit") for name, path in files.items()}
    with Grader(pool_size=2 if files else 1, warm=False) as grader:

        def one(name: str) -> Graded:
            return grade_one(grader, exercise, *jobs[name], name)

        with ThreadPoolExecutor(max_workers=grader.pool_size) as pool:
            return dict(zip(jobs, pool.map(one, jobs), strict=True))


def outcomes(report: Report) -> dict[str, str]:
    return {test.id: test.outcome for tier in report.tiers for test in tier.tests}


def _grading_checks(graded: dict[str, Graded]) -> Iterator[Check]:
    result, run = graded["reference"], graded["reference (run mode)"].report
    reference = result.report
    calls = reference.metrics.get("student_calls", 0)
    full = reference.passed and reference.score == reference.max_score > 0
    left = {k: v for k, v in outcomes(reference).items() if v != "passed"}
    problems = [f"{_summary(reference)} {left or ''}".strip()] * (not full or bool(left))
    problems += ["it needed a second grading (crash or timeout)"] * result.retries
    problems += [f"{calls:g} student calls, over the budget of {CALL_BUDGET}"] * (
        calls > CALL_BUDGET
    )
    detail = "; ".join(problems) or f"{_summary(reference)}, {calls:g} student calls"
    yield Check("reference scores full marks", not problems, detail)
    shown = {tier.id: tier.tests for tier in run.tiers}
    bare = [tier.id for tier in reference.tiers if not shown.get(tier.id)]
    leaked = [test.id for tests in shown.values() for test in tests if test.hidden]
    hidden = sum(test.hidden for tier in reference.tiers for test in tier.tests)
    problems = [f"tiers without a test on Run: {bare}"] * bool(bare)
    problems += [f"hidden tests shown on Run: {leaked}"] * bool(leaked)
    yield Check("every tier shows a test on Run", not problems, "; ".join(problems) or "yes")
    yield Check(
        f"at least {MIN_HIDDEN_TESTS} hidden tests",
        hidden >= MIN_HIDDEN_TESTS,
        f"{hidden} hidden test(s) on Submit",
    )
    starter = graded["starter"].report
    not_failed = {k: v for k, v in outcomes(starter).items() if v != "failed"}
    missing = len(outcomes(reference)) - len(outcomes(starter))
    problems = [f"{_summary(starter)}; not failed: {not_failed}"] * bool(not_failed)
    problems += [f"{missing} test(s) did not run"] * bool(missing)
    if starter.grader_error is not None:
        problems = [_summary(starter)]
    detail = "; ".join(problems) or f"{_summary(starter)}, every test failed"
    yield Check("starter fails every test", not problems, detail)


def _summary(report: Report) -> str:
    text = f"{score_text(report.score)}/{score_text(report.max_score)}"
    failed = [test.id for tier in report.tiers for test in tier.tests if test.outcome != "passed"]
    if report.grader_error is not None:
        return f"{text}; grader error: {report.grader_error.detail or report.grader_error.message}"
    return text + (f", {len(failed)} tests not passed" if failed else ", every test passed")


# ---- the corpus -----------------------------------------------------------------------------
def named(path: Path, label: str) -> set[str]:
    """The test ids on the docstring's `label: a, b` line (empty when there is none)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    found = re.search(rf"^{label}: (.+)$", docstring, re.MULTILINE)
    return {name.strip() for name in found.group(1).split(",")} if found else set()


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


def _of(files: dict[str, Path], kind: str) -> dict[str, Path]:
    return {name: path for name, path in files.items() if name.startswith(f"{kind}/")}


def _verdict(name: str, problems: list[str], total: int, what: str) -> Check:
    """One rule over `total` files: its failures one per line, or how many hold."""
    detail = "\n    ".join([f"{len(problems)} of {total}:", *problems]) if problems else what
    return Check(name, not problems, detail)


def _static_corpus_checks(exercise: Exercise, files: dict[str, Path]) -> Iterator[Check]:
    sizes = {kind: len(_of(files, kind)) for kind in ("correct", "wrong")}
    want = exercise.corpus_counts
    declared = dict(zip(("correct", "wrong"), want, strict=True)) if want else None
    detail = f"{sizes['correct']} correct, {sizes['wrong']} wrong in {exercise.corpus}"
    if sizes != declared:
        detail += f"; exercise.toml's [corpus] says {declared or 'nothing'}: update it"
    yield Check("corpus size", sizes == declared, detail)
    problems = []
    for name, path in files.items():
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        lacking = sorted(set(exercise.function_names) - defined)
        last = docstring.splitlines()[-1] if docstring else ""
        problems += [f"{name}: no module docstring"] * (not docstring)
        problems += [f"{name}: does not define {lacking}"] * bool(lacking)
        if name.startswith("wrong/") and docstring and not last.startswith("Caught by: "):
            problems.append(f"{name}: the docstring must end with a `Caught by: ` line")
    yield _verdict("corpus docstrings", problems, len(files), "every file states its point")
    correct = [code_lines(path) for path in _of(files, "correct").values()]
    problems = []
    for name, path in _of(files, "wrong").items():
        mine = code_lines(path)
        nearest = min((edits(other, mine) for other in correct), default=0)
        problems += [f"{name}: {nearest} edits from the nearest correct file"] * (nearest != 1)
    yield _verdict("wrong files are one edit from a correct one", problems,
                   sizes["wrong"], "every one")  # fmt: skip


def _graded_corpus_checks(files: dict[str, Path], graded: dict[str, Graded]) -> Iterator[Check]:
    import torch

    tests = set(outcomes(graded["reference"].report))
    wrong, problems = _of(files, "wrong"), []
    for name, path in wrong.items():
        report = graded[name].report
        if report.submission_error is not None or report.grader_error is not None:
            error = report.submission_error or report.grader_error
            problems.append(f"{name}: not a catch: {error.kind}: {error.message}")
            continue
        want = named(path, "Caught by")
        got = {k for k, v in outcomes(report).items() if v == "failed"}
        errors = {k: v for k, v in outcomes(report).items() if v not in ("passed", "failed")}
        if got != want or errors or report.passed:
            problems.append(f"{name}: named but passed: {sorted(want - got)}; failed, not "
                            f"named: {sorted(got - want)}; other outcomes: {errors}")  # fmt: skip
    yield _verdict("wrong files fail exactly the named tests", problems, len(wrong),
                   f"each of {len(wrong)} is caught by the tests it names")  # fmt: skip
    correct, problems = _of(files, "correct"), []
    for name, path in correct.items():
        result = graded[name]
        left = {k: v for k, v in outcomes(result.report).items() if v != "passed"}
        inconclusive = set() if torch.cuda.is_available() else named(path, "Inconclusive")
        wrongly = {k: v for k, v in left.items() if v != "skipped" or k not in inconclusive}
        problems += [f"{name}: {wrongly} {result.report.grader_error or ''}"] * bool(wrongly)
        problems += [f"{name}: needed a second grading (crash or timeout)"] * result.retries
    yield _verdict("correct files pass every test", problems, len(correct),
                   f"each of {len(correct)} passes")  # fmt: skip
    caught = set().union(*(named(path, "Caught by") for path in wrong.values()))
    problems = [f"named by a wrong file, no such test: {sorted(caught - tests)}"] * bool(
        caught - tests
    )
    problems += [f"caught no wrong file: {sorted(tests - caught)}"] * bool(tests - caught)
    yield _verdict("every test catches a wrong file", problems, len(tests),
                   f"each of {len(tests)} tests")  # fmt: skip
    stubs = _of(files, "stubs")
    problems = [name for name in stubs if any(t.passed for t in graded[name].report.tiers)]
    problems = [f"{name}: passes a tier" for name in problems]
    yield _verdict("stubs fail every tier", problems, len(stubs), f"each of {len(stubs)}"
                   if stubs else "no stubs/ folder")  # fmt: skip


def _toy_check(exercise: Exercise) -> Check:
    try:
        toy = load_module(exercise.experiment, f"{exercise.id}_experiment")
        reference = load_module(exercise.reference, f"{exercise.id}_reference")
        result = toy.run_toy(reference)
        with tempfile.TemporaryDirectory() as folder:
            toy.render_plots({k: v for k, v in result.items() if k != "tables"}, folder)
            drawn = {path.stem for path in Path(folder).glob("*.png")}
    except Exception as error:  # the toy is the instructor's code: report whatever it raised
        return Check("toy runs and renders", False, f"{type(error).__name__}: {error}")
    missing = [plot.name for plot in exercise.plots if plot.name not in drawn]
    tables = result.get("tables") or {}
    absent = [table.name for table in exercise.tables if table.name not in tables]
    problems = [f"plots not drawn: {missing}"] * bool(missing)
    problems += [f"tables missing: {absent}"] * bool(absent)
    detail = f"{counted(len(drawn), 'plot')}, {counted(len(tables), 'table')}"
    return Check("toy runs and renders", not problems, "; ".join(problems) or detail)


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
