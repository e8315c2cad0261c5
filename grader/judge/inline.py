"""Run one grading in this (trusted judge) process: pytest.main over the tier suites.

Called once per grading by a long-lived judge process, the way pytester's inline_run works:
torch, pytest and the plugin stay imported between gradings, while the modules loaded from
the tier folder (test files, their helpers, conftest) and sys.path are put back as they were
after each run, so every grading collects fresh test modules. Student code never runs here:
the `student` fixture talks to a sandboxed worker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader.exercise import Exercise, default_exercise
from grader.judge.failures import grader_error_report
from grader.judge.plugin import GradingRequest
from grader.judge.session import Submission
from grader.report import Report


def _plugin_args() -> list[str]:
    """A judge process turns entry-point autoloading off (scanning every installed
    distribution cost ~0.15 s a grading), so it names the one plugin the tiers need."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return ["-p", "grader.judge.plugin"]
    return []


def pytest_args(exercise: Exercise) -> list[str]:
    return [
        *_plugin_args(),
        str(exercise.tiers_dir),
        "-q",
        "--no-header",
        "--tb=no",
        "-p",
        "no:cacheprovider",
        # its end-of-session gc.collect() over torch's heap cost ~1 s a grading here
        "-p",
        "no:unraisableexception",
        # per-test log capture (handlers added and removed 9,000 times) cost ~70 ms a grading
        "-p",
        "no:logging",
        "-p",
        "no:doctest",
        f"--rootdir={exercise.root}",
        # the plugin's package is imported before this run, so pytest cannot rewrite it
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
    ]


def run_grading(submission: Submission, exercise: Exercise | None = None) -> Report:
    """Grade in-process; every failure of the machinery becomes a grader_error Report."""
    exercise = exercise or default_exercise()
    request = GradingRequest(submission)
    saved_modules, saved_path = dict(sys.modules), list(sys.path)
    try:
        code = pytest.main(pytest_args(exercise), plugins=[request])
    except Exception as error:  # pytest itself crashed: the grader's fault
        return grader_error_report("pytest crashed", [f"{type(error).__name__}: {error}"])
    finally:
        _forget_exercise_modules(saved_modules, exercise.tiers_dir)
        sys.path[:] = saved_path
    if request.report is None:
        return grader_error_report(f"pytest ended with {code!r} and no report", [])
    return request.report


def _forget_exercise_modules(saved: dict, tiers_dir: Path) -> None:
    """Drop modules imported from the tier folder during the run (library modules stay)."""
    for name, module in list(sys.modules.items()):
        if name in saved:
            continue
        location = getattr(module, "__file__", None)
        if location and Path(location).is_relative_to(tiers_dir):
            del sys.modules[name]
