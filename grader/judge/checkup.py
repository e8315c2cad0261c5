"""`gspo-grader check-exercise DIR [--corpus]`: what an instructor checks before students see
an exercise, and, with the corpus, every rule the grader's power test holds exercises to.

One line a check (docs/instructors.md lists them); later checks that need an earlier one's
result are skipped when it failed. One Grader grades the reference (Submit and Run), the
starter and, with `corpus`, every file of tests/implementations/ (correct/, wrong/ and
stubs/). A grading that crashed or timed out is graded once more and counted.
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
Corpus = dict[str, dict[str, Path]]  # kind -> "kind/stem" -> file
Graded = dict[str, tuple[Report, int, int]]  # name -> (report, retries, student calls)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


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
    files = corpus_files(exercise) if corpus else {}
    if corpus:
        yield from _static_corpus_checks(exercise, files)
    graded = grade_corpus(exercise, files)
    yield from _grading_checks(graded, [tier.id for tier in tiers])
    if corpus:
        yield from _graded_corpus_checks(files, graded)
    yield _toy_check(exercise)


def _verdict(name: str, problems: list[str], holds: str) -> Check:
    """A rule's line: what holds, or each problem on a line of its own."""
    detail = "\n    ".join(["", *problems]) if len(problems) > 1 else "".join(problems)
    return Check(name, not problems, detail or holds)


# ---- grading --------------------------------------------------------------------------------
def corpus_files(exercise: Exercise) -> Corpus:
    return {
        kind: {f"{kind}/{p.stem}": p for p in sorted((exercise.corpus / kind).glob("*.py"))}
        for kind in ("correct", "wrong", "stubs")
    }


def grade_one(grader, exercise: Exercise, source: str, mode: str, name: str) -> tuple[Report, int]:
    """The report, graded once more after a crash or timeout (the shared machine may have
    starved a worker), and how many times it was graded again."""
    options = {"mode": mode, "exercise": str(exercise.root), "filename": f"{Path(name).name}.py"}
    report = grader.grade(source, **options)
    error = report.submission_error
    if report.grader_error is None and error is not None and error.kind in ("crash", "timeout"):
        return grader.grade(source, **options), 1
    return report, 0


def grade_corpus(exercise: Exercise, files: Corpus) -> Graded:
    from grader.judge.grader import Grader

    reference = exercise.reference.read_text(encoding="utf-8")
    jobs = {"reference": (reference, "submit"), "reference (run mode)": (reference, "run")}
    jobs["starter"] = (exercise.starter.read_text(encoding="utf-8"), "submit")
    for name, path in (item for kind in files.values() for item in kind.items()):
        jobs[name] = (path.read_text(encoding="utf-8"), "submit")
    calls: dict[int, int] = {}  # id(report) -> calls into the student's code (GradingStats)

    def record(report: Report, stats) -> None:
        calls[id(report)] = stats.student_calls

    with Grader(pool_size=2 if files else 1, warm=False, on_stats=record) as grader:

        def one(name: str) -> tuple[Report, int, int]:
            report, retries = grade_one(grader, exercise, *jobs[name], name)
            return report, retries, calls.get(id(report), 0)

        with ThreadPoolExecutor(max_workers=grader.pool_size) as pool:
            return dict(zip(jobs, pool.map(one, jobs), strict=True))


def outcomes(report: Report) -> dict[str, str]:
    return {test.id: test.outcome for tier in report.tiers for test in tier.tests}


def _grading_checks(graded: Graded, tier_ids: list[str]) -> Iterator[Check]:
    (reference, retries, calls), run = graded["reference"], graded["reference (run mode)"][0]
    found = {tier.id: len(tier.tests) for tier in reference.tiers}
    counts = ", ".join(f"{tier_id}: {found.get(tier_id, 0)}" for tier_id in tier_ids)
    empty = [tier_id for tier_id in tier_ids if tier_id not in found]
    problems = [_summary(reference)] if reference.grader_error else [f"no tests in {empty}"]
    yield _verdict("tier tests", problems * bool(reference.grader_error or empty), counts)
    left = {k: v for k, v in outcomes(reference).items() if v != "passed"}
    full = reference.passed and reference.score == reference.max_score > 0 and not left
    problems = [f"{_summary(reference)} {left or ''}".strip()] * (not full)
    problems += ["it needed a second grading (crash or timeout)"] * retries
    problems += [f"{calls:g} student calls, over the budget of {CALL_BUDGET}"] * (
        calls > CALL_BUDGET
    )
    holds = f"{_summary(reference)}, {calls:g} student calls"
    yield _verdict("reference scores full marks", problems, holds)
    shown = {tier.id: tier.tests for tier in run.tiers}
    bare = [tier.id for tier in reference.tiers if not shown.get(tier.id)]
    leaked = [test.id for tests in shown.values() for test in tests if test.hidden]
    problems = [f"tiers without a test on Run: {bare}"] * bool(bare)
    problems += [f"hidden tests shown on Run: {leaked}"] * bool(leaked)
    yield _verdict("every tier shows a test on Run", problems, "yes")
    hidden = sum(test.hidden for tier in reference.tiers for test in tier.tests)
    problems = [f"{hidden} hidden test(s) on Submit"] * (hidden < MIN_HIDDEN_TESTS)
    yield _verdict(f"at least {MIN_HIDDEN_TESTS} hidden tests", problems, f"{hidden} hidden")
    starter = graded["starter"][0]
    not_failed = {k: v for k, v in outcomes(starter).items() if v != "failed"}
    missing = len(outcomes(reference)) - len(outcomes(starter))
    problems = [f"{_summary(starter)}; not failed: {not_failed}"] * bool(not_failed)
    problems += [f"{missing} test(s) did not run"] * bool(missing)
    problems = [_summary(starter)] if starter.grader_error is not None else problems
    yield _verdict("starter fails every test", problems, f"{_summary(starter)}, all failed")


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


def _static_corpus_checks(exercise: Exercise, files: Corpus) -> Iterator[Check]:
    sizes = (len(files["correct"]), len(files["wrong"]))
    detail = f"{sizes[0]} correct, {sizes[1]} wrong in {exercise.corpus}"
    if sizes != exercise.corpus_counts:
        detail += f"; exercise.toml's [corpus] says {exercise.corpus_counts}: update it"
    yield Check("corpus size", sizes == exercise.corpus_counts, detail)
    problems = []
    for kind, name, path in ((k, n, p) for k, found in files.items() for n, p in found.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstring = ast.get_docstring(tree) or ""
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        lacking = sorted(set(exercise.function_names) - defined)
        problems += [f"{name}: no module docstring"] * (not docstring)
        problems += [f"{name}: does not define {lacking}"] * bool(lacking)
        last = (docstring.splitlines() or [""])[-1]
        if kind == "wrong" and not last.startswith("Caught by: "):
            problems.append(f"{name}: the docstring must end with a `Caught by: ` line")
    yield _verdict("corpus docstrings", problems, "every file states its point")
    correct = [code_lines(path) for path in files["correct"].values()]
    problems = []
    for name, path in files["wrong"].items():
        nearest = min((edits(other, code_lines(path)) for other in correct), default=0)
        problems += [f"{name}: {nearest} edits from the nearest correct file"] * (nearest != 1)
    yield _verdict("wrong files are one edit from a correct one", problems, "every one")


def _graded_corpus_checks(files: Corpus, graded: Graded) -> Iterator[Check]:
    import torch

    problems = []
    for name, path in files["wrong"].items():
        report = graded[name][0]
        if error := report.submission_error or report.grader_error:
            problems.append(f"{name}: not a catch: {getattr(error, 'kind', 'grader error')}: "
                            f"{error.message}")  # fmt: skip
            continue
        want, found = named(path, "Caught by"), outcomes(report)
        got = {k for k, v in found.items() if v == "failed"}
        other = {k: v for k, v in found.items() if v not in ("passed", "failed", "skipped")}
        parts = {"named but passed": sorted(want - got), "failed, not named": sorted(got - want)}
        parts |= {"outcomes that are not failures": other} if other else {}
        if got != want or other or report.passed:
            problems.append(f"{name}: " + "; ".join(f"{k}: {v}" for k, v in parts.items() if v))
    each = f"each of {len(files['wrong'])}"
    yield _verdict("wrong files fail exactly the named tests", problems, each)
    problems = []
    for name, path in files["correct"].items():
        report, retries, _ = graded[name]
        left = {k: v for k, v in outcomes(report).items() if v != "passed"}
        inconclusive = set() if torch.cuda.is_available() else named(path, "Inconclusive")
        wrongly = {k: v for k, v in left.items() if v != "skipped" or k not in inconclusive}
        problems += [f"{name}: {wrongly} {report.grader_error or ''}"] * bool(wrongly)
        problems += [f"{name}: needed a second grading (crash or timeout)"] * retries
    yield _verdict("correct files pass every test", problems, f"each of {len(files['correct'])}")
    tests = set(outcomes(graded["reference"][0]))
    caught = set().union(*(named(path, "Caught by") for path in files["wrong"].values()))
    unknown, idle = sorted(caught - tests), sorted(tests - caught)
    problems = [f"named by a wrong file, no such test: {unknown}"] * bool(unknown)
    problems += [f"caught no wrong file: {idle}"] * bool(idle)
    yield _verdict("every test catches a wrong file", problems, f"each of {len(tests)} tests")
    stubs = files["stubs"]
    problems = [f"{n}: passes a tier" for n in stubs if any(t.passed for t in graded[n][0].tiers)]
    yield _verdict("stubs fail every tier", problems, f"each of {len(stubs)}" if stubs else "none")


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
    return _verdict(
        "toy runs and renders", problems, f"{len(drawn)} plot(s), {len(tables)} table(s)"
    )
