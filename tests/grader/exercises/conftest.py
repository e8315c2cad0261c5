"""Fixtures for the grader's own tests of the exercise folders under exercises/.

Each exercise's files (reference, starter, experiment.py) are loaded by path with
grader.exercise.load_module, exactly as the grader loads them, under private module names.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from grader.exercise import REPO_ROOT, Exercise, load_exercise, load_module


@pytest.fixture(scope="session")
def dpo() -> Exercise:
    return load_exercise(REPO_ROOT / "exercises" / "dpo")


@pytest.fixture(scope="session")
def dpo_reference(dpo: Exercise) -> ModuleType:
    return load_module(dpo.reference, "_exercise_tests_dpo_reference")


@pytest.fixture(scope="session")
def dpo_starter(dpo: Exercise) -> ModuleType:
    return load_module(dpo.starter, "_exercise_tests_dpo_starter")


@pytest.fixture(scope="session")
def dpo_toy(dpo: Exercise) -> ModuleType:
    return load_module(dpo.experiment, "_exercise_tests_dpo_experiment")
