"""Shared fixtures for the grader's own tests of the exercise core, and the strict mode.

The exercise files (reference, starter, experiment.py) are loaded by path, exactly as the
grader loads them, never imported as installed packages. The fixture names carry a prefix so
they cannot collide with the judge plugin's `student`, `reference` and `experiment`.

Strict mode: with GSPO_GRADER_SANDBOX_REQUIRE set (CI sets it to bwrap), a test marked
`sandbox` that skips fails instead, so a host that cannot build the sandbox cannot make the
sandbox's tests pass by not running them.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest

from grader.exercise import REPO_ROOT, load_module
from grader.sandbox import REQUIRE_ENV


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    strict = os.environ.get(REQUIRE_ENV, "").strip()
    if strict and report.skipped and item.get_closest_marker("sandbox") is not None:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"a sandbox test skipped while {REQUIRE_ENV}={strict}: {reason}"
    return report


def load_exercise_file(relative: str, name: str) -> ModuleType:
    """Import one file of the repository's exercise by path under a private module name."""
    return load_module(REPO_ROOT / relative, name)


@pytest.fixture(scope="session")
def ref_impl() -> ModuleType:
    return load_exercise_file("reference/gspo.py", "_core_tests_reference")


@pytest.fixture(scope="session")
def starter_impl() -> ModuleType:
    return load_exercise_file("starter/gspo.py", "_core_tests_starter")


@pytest.fixture(scope="session")
def toy() -> ModuleType:
    return load_exercise_file("experiment.py", "_core_tests_experiment")
