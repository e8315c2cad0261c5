"""The exercise version: a content hash that changes with what decides a grading, and only
with that."""

from __future__ import annotations

import shutil

from grader.exercise import default_exercise, exercise_version, load_exercise


def copy_of_root(tmp_path):
    root = default_exercise().root
    folder = tmp_path / "exercise"
    folder.mkdir()
    for name in ("exercise.toml", "statement.md", "experiment.py"):
        shutil.copy(root / name, folder / name)
    for name in ("starter", "reference", "tests/tiers"):
        shutil.copytree(root / name, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    return load_exercise(folder)


def test_the_same_folder_has_the_same_version_and_a_copy_too(tmp_path):
    exercise = copy_of_root(tmp_path)
    assert exercise_version(exercise) == exercise_version(exercise)
    assert exercise_version(exercise) == exercise_version(default_exercise())
    assert len(exercise_version(exercise)) == 16


def test_a_tier_edit_the_reference_and_the_toy_change_the_version(tmp_path):
    exercise = copy_of_root(tmp_path)
    seen = {exercise_version(exercise)}
    for path in (
        exercise.tiers_dir / "test_t9_new.py",
        exercise.reference,
        exercise.experiment,
        exercise.root / "exercise.toml",
    ):
        with path.open("a", encoding="utf-8") as f:
            f.write("\n# an edit\n")
        seen.add(exercise_version(exercise))
    assert len(seen) == 5


def test_the_statement_the_starter_and_caches_leave_the_version_alone(tmp_path):
    exercise = copy_of_root(tmp_path)
    before = exercise_version(exercise)
    (exercise.root / "statement.md").write_text("reworded", encoding="utf-8")
    exercise.starter.write_text("# another starter\n", encoding="utf-8")
    cache = exercise.tiers_dir / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "test_t0_contract.cpython-311.pyc").write_bytes(b"\0" * 8)
    assert exercise_version(exercise) == before
