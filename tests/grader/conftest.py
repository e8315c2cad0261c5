"""Shared fixtures for the grader's own tests of the exercise core.

The exercise files (reference, starter, experiment.py) are loaded by path, exactly as the
grader loads them, never imported as installed packages. The fixture names carry a prefix so
they cannot collide with the judge plugin's `student`, `reference` and `experiment`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from grader.exercise import REPO_ROOT


def load_exercise_file(relative: str, name: str) -> ModuleType:
    """Import one file of the repository's exercise by path under a private module name."""
    spec = importlib.util.spec_from_file_location(name, Path(REPO_ROOT) / relative)
    assert spec is not None and spec.loader is not None, f"cannot load {relative}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def ref_impl() -> ModuleType:
    return load_exercise_file("reference/gspo.py", "_core_tests_reference")


@pytest.fixture(scope="session")
def starter_impl() -> ModuleType:
    return load_exercise_file("starter/gspo.py", "_core_tests_starter")


@pytest.fixture(scope="session")
def toy() -> ModuleType:
    return load_exercise_file("experiment.py", "_core_tests_experiment")
