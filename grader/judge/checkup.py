"""`gspo-grader check-exercise DIR`: what an instructor checks before students see an exercise.

Each check is one line: the manifest and the tier registry parse, the statement is there,
every tier has tests and they collect, the reference scores full marks, the starter fails
every tier, and the toy runs through the reference and draws every plot the manifest
declares. Later checks that need an earlier one's result are skipped when it failed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.exercise import Exercise, ExerciseError, load_exercise, load_module
from grader.judge.registry import TierRegistryError, load_tiers
from grader.report import Report, score_text


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def check_exercise(folder: Path) -> Iterator[Check]:
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
    yield from _grading_checks(exercise)
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


def _grading_checks(exercise: Exercise) -> Iterator[Check]:
    from grader.judge.grader import Grader

    with Grader(pool_size=1, warm=False) as grader:
        reference = grader.grade(exercise.reference.read_text(encoding="utf-8"),
                                 exercise=str(exercise.root), name="reference")  # fmt: skip
        starter = grader.grade(exercise.starter.read_text(encoding="utf-8"),
                               exercise=str(exercise.root), name="starter")  # fmt: skip
    full = reference.passed and reference.score == reference.max_score > 0
    yield Check("reference scores full marks", full, _summary(reference))
    passing = [tier.id for tier in starter.tiers if tier.passed]
    fails_all = bool(starter.tiers) and not passing and starter.grader_error is None
    detail = _summary(starter) + (f"; passes {', '.join(passing)}" if passing else "")
    yield Check("starter fails every tier", fails_all, detail)


def _summary(report: Report) -> str:
    text = f"{score_text(report.score)}/{score_text(report.max_score)}"
    failed = [test.id for tier in report.tiers for test in tier.tests if test.outcome != "passed"]
    if report.grader_error is not None:
        return f"{text}; grader error: {report.grader_error.detail or report.grader_error.message}"
    return text + (f", {len(failed)} tests not passed" if failed else ", every test passed")


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
