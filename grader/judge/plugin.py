"""pytest plugin for the tier suites (TEMPORARY minimal version, to be replaced by the judge).

Fixtures the tier tests use:
    student          the submission, called through the sandbox proxy
    reference        the trusted reference module
    experiment       the toy experiment module (experiment.py)
    record_artifacts a callable that stores the toy's result dict in the report
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from grader.exercise import default_exercise


def load_by_path(name: str, path: Path) -> ModuleType:
    """Import a trusted exercise file by path, without installing it as a package."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gspo-grader")
    group.addoption("--submission", default=None, help="submission file to grade")


@pytest.fixture(scope="session")
def reference() -> ModuleType:
    return load_by_path("gspo_reference", default_exercise().reference)


@pytest.fixture(scope="session")
def experiment() -> ModuleType:
    return load_by_path("gspo_experiment", default_exercise().experiment)


@pytest.fixture(scope="session")
def student(request: pytest.FixtureRequest) -> ModuleType:
    # TEMPORARY: in-process import; the judge replaces this with the sandbox proxy.
    path = request.config.getoption("--submission") or default_exercise().reference
    return load_by_path("gspo_submission", Path(path))


@pytest.fixture
def record_artifacts():
    store: dict = {}

    def record(result: dict) -> None:
        store.update(result)

    return record
