"""Run one grading in this (trusted judge) process: pytest.main over the tier suites.

Called once per grading by a long-lived judge process, the way pytester's inline_run works:
torch, pytest and the plugin stay imported between gradings, while the modules loaded from
the tier folder (test files, their helpers, conftest) and sys.path are put back as they were
after each run, so every grading collects fresh test modules. Only their compiled code is
kept between gradings (tiercode.py). Student code never runs here: the `student` fixture
talks to a sandboxed worker.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from grader.exercise import Exercise, default_exercise
from grader.judge import plugin
from grader.judge.failures import grader_error_report
from grader.judge.plugin import GradingRequest
from grader.judge.session import Submission
from grader.judge.tiercode import TierCode
from grader.report import Report


def _plugins() -> list[ModuleType]:
    """A judge process turns entry-point autoloading off (scanning every installed
    distribution cost ~0.15 s a grading), so it hands pytest the one plugin the tiers need.
    It hands over the module itself: `-p grader.judge.plugin` would scan the entry points
    once more (~5 ms) to look the name up."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return [plugin]
    return []


def _blocked(*plugins: str) -> list[str]:
    return [arg for plugin in plugins for arg in ("-p", f"no:{plugin}")]


def pytest_args(exercise: Exercise) -> list[str]:
    return [
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
        # features a grading never asks for (command-line options, junit, subtests, pdb): each
        # loaded plugin is registered and scanned for fixtures again on every grading
        *_blocked(
            "stepwise",
            "pastebin",
            "junitxml",
            "setuponly",
            "setupplan",
            "subtests",
            "faulthandler",
            "debugging",
        ),
        # the tier tests print nothing worth keeping; capturing fds costs per test phase
        "--capture=no",
        f"--rootdir={exercise.root}",
        # the plugin's package is imported before this run, so pytest cannot rewrite it
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
    ]


_TIER_CODE: dict[Path, TierCode] = {}  # per tier folder: code compiled by earlier gradings


def run_grading(
    submission: Submission | Callable[[], Submission | None], exercise: Exercise | None = None
) -> Report | None:
    """Grade in-process; every failure of the machinery becomes a grader_error Report.

    Given a function instead of a Submission, pytest starts at once and calls it once the
    tests are collected (see GradingRequest); None comes back if it returned None (stop).
    """
    exercise = exercise or default_exercise()
    request = GradingRequest(submission)
    tier_code = _TIER_CODE.setdefault(exercise.tiers_dir, TierCode(exercise.tiers_dir))
    saved_modules, saved_path = dict(sys.modules), list(sys.path)
    try:
        code = pytest.main(pytest_args(exercise), plugins=[*_plugins(), request, tier_code])
    except Exception as error:  # pytest itself crashed: the grader's fault
        return grader_error_report("pytest crashed", [f"{type(error).__name__}: {error}"])
    finally:
        tier_code.uninstall()
        _forget_exercise_modules(saved_modules, exercise.tiers_dir)
        sys.path[:] = saved_path
    if request.stopped:
        return None
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
