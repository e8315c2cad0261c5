"""The tier suites' power: `check-exercise --corpus` over every exercise this installation
serves (its rules are in grader/judge/checkup.py): every wrong submission is caught by the
tests it names, every correct one passes, the starter and the stubs fail, and the reference
passes within the call budget with enough hidden tests.

An exercise joins by being in the catalog with a corpus and a `[corpus]` table in its
exercise.toml; nothing here names one. Run with -s to see each exercise's check lines.
"""

from __future__ import annotations

import shutil

import pytest

from grader.cli import main
from grader.exercise import catalog, default_exercise
from grader.judge import check_exercise, grade_one
from grader.report import Report

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

EXERCISES = catalog()


@pytest.mark.parametrize("exercise", EXERCISES.values(), ids=EXERCISES)
def test_check_exercise_with_its_corpus_holds(exercise):
    checks = list(check_exercise(exercise.root, corpus=True))
    for check in checks:
        print(f"[{'ok' if check.ok else 'FAIL'}] {check.name}: {check.detail}")
    failed = [f"{check.name}: {check.detail}" for check in checks if not check.ok]
    assert not failed, "\n".join(failed)
    assert len(checks) == 16, [check.name for check in checks]


def test_check_exercise_names_a_removed_hidden_test(tmp_path, capsys):
    """A copy of DPO with another id and one hidden test removed: `check-exercise --corpus`
    fails, naming the test the wrong files still name and the hidden tests left."""
    folder = tmp_path / "dpo2"
    shutil.copytree(default_exercise().root / "exercises" / "dpo", folder)
    manifest = folder / "exercise.toml"
    manifest.write_text(manifest.read_text().replace('id = "dpo"', 'id = "dpo2"'))
    tier = folder / "tests" / "tiers" / "test_t2_padding.py"
    test = "def test_padding_mixture_never_matters("
    assert test in tier.read_text(), "the DPO hidden test this test removes was renamed"
    tier.write_text(tier.read_text().replace(test, "def removed_padding_mixture("))
    assert main(["check-exercise", str(folder), "--corpus"]) == 1
    out = capsys.readouterr().out
    lines = {line.split(":")[0]: line for line in out.splitlines() if line.startswith("[")}
    assert lines["[ok] manifest"].startswith("[ok] manifest: dpo2: ")
    assert lines["[FAIL] at least 5 hidden tests"].endswith(": 4 hidden test(s) on Submit")
    missing = "test_t2_padding.py::test_padding_mixture_never_matters"
    caught = out.split("[FAIL] every test catches a wrong file")[1].split("\n[")[0]
    assert f"named by a wrong file, no such test: ['{missing}']" in caught
    assert "[ok] correct files pass every test" in out
    assert out.rstrip().endswith("check(s) failed")


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
    assert grade_one(flaky, default_exercise(), "", "submit", "x") == (clean, 1)
    steady = Flaky([clean])
    assert grade_one(steady, default_exercise(), "", "submit", "x") == (clean, 0)
    assert steady.calls == 1
