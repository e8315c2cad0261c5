"""A grading as one pytest session, driven in two steps.

A grading is one pytest session, made explicit in two steps (`PreparedRun`): `collect`
configures pytest and collects the tier modules, which needs no submission; `grade(request)`
selects the tests the request asks for, runs them, and returns the Report. A warm judge
collects the next session right after it answers, so a grading pays only for its tests.

Driving a session in two steps uses pytest's machinery below `pytest.main`, through
pytest_private.py, the one module that touches pytest's private names.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.exercise import Exercise
from grader.judge.engine import plugin, protocol
from grader.judge.engine.grading_run import GradingRun
from grader.judge.engine.plugin import GradingPlugin
from grader.judge.engine.pytest_private import configure, prepare_config, unconfigure
from grader.judge.engine.runtime import ExerciseRuntime
from grader.judge.failures import failed_report, grader_error
from grader.judge.link import GradingRequest
from grader.judge.stats import GradingStats
from grader.report import Report
from grader.sandbox import Limits

# every plugin a grading never asks for is left out: each loaded plugin is registered and
# scanned again on every grading
_UNUSED_PLUGINS = (
    "cacheprovider",
    "unraisableexception",  # its end-of-session gc.collect() over torch's heap: ~1 s
    "threadexception",  # a hook around every phase for threads the tier tests never start
    "logging",  # per-test log capture: ~70 ms a grading
    "doctest",
    "stepwise",
    "pastebin",
    "junitxml",
    "setuponly",
    "setupplan",
    "subtests",
    "faulthandler",
    "debugging",
    "terminal",  # its output went to /dev/null: per test, a location, a status, a write
)


def pytest_args(exercise: Exercise) -> list[str]:
    """The whole pytest configuration of a grading. No ini file is read: pytest would take
    the first one above the tiers folder (for the exercises in this repository, the
    grader's own pyproject.toml, whose `filterwarnings = error` turned a warning in a tier
    test into a grader error, so nobody got a grade), and a grading must not depend on
    where the exercise lies. An exercise's own settings go in a conftest.py in its tiers folder."""
    blocked = [arg for name in _UNUSED_PLUGINS for arg in ("-p", f"no:{name}")]
    return [
        str(exercise.tiers_dir),
        f"--config-file={os.devnull}",
        "--strict-markers",  # a mistyped @pytest.mark.hiden breaks the suite, not the secret
        "--capture=no",  # the tier tests print nothing worth keeping; capture costs per phase
        f"--rootdir={exercise.root}",
        # the grader's own modules are imported before the session, so pytest cannot
        # rewrite their asserts (they have none that matter)
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        *blocked,
    ]


@dataclass
class PreparedRun:
    """One pytest session, configured and collected; `grade` runs it once."""

    runtime: ExerciseRuntime
    grading: GradingRun
    config: pytest.Config | None = None
    session: pytest.Session | None = None
    _saved: tuple[dict, list] = field(default_factory=lambda: (dict(sys.modules), list(sys.path)))

    @classmethod
    def collect(
        cls, runtime: ExerciseRuntime, limits: Limits, pool, stop: Callable[[], bool] | None = None
    ) -> PreparedRun:
        """`stop`: asked before each test; once True, the rest is not run (GradingRun.begin)."""
        grading = GradingRun(
            runtime.exercise, runtime.tiers, runtime.trusted, limits, pool, runtime.forecasts, stop
        )
        prepared = cls(runtime, grading)
        began = time.process_time()
        try:
            plugins = [plugin, protocol, GradingPlugin(grading), runtime.tier_code]
            prepared.config = prepare_config(pytest_args(runtime.exercise), plugins)
            prepared.session = pytest.Session.from_config(prepared.config)
            configure(prepared.config)
            prepared.config.hook.pytest_sessionstart(session=prepared.session)
            prepared.config.hook.pytest_collection(session=prepared.session)
        except (pytest.UsageError, Exception) as error:  # a broken suite: the instructor's
            grading.tests.problems.append(f"{type(error).__name__}: {error}")
        grading.collect_cpu_s = time.process_time() - began
        return prepared

    def grade(self, request: GradingRequest) -> tuple[Report, GradingStats]:
        """Run the selected tests for `request`; every failure of ours becomes a grader error."""
        try:
            if self.grading.tests.problems or self.session is None:
                return self._not_collected(request)
            keep, drop = self.grading.select(request, self.session.items)
            self.session.items = keep
            self.config.hook.pytest_deselected(items=drop)
            self.config.hook.pytest_runtestloop(session=self.session)
            return self.grading.report()
        except Exception as error:  # pytest itself failed: ours, not the student's
            problem = f"{type(error).__name__}: {error}"
            return self._failed(request, grader_error("pytest failed", [problem]))
        finally:
            self.discard()

    def discard(self) -> None:
        """End the session (run or not) and put the process back as it was."""
        try:
            if self.session is not None:
                self.config.hook.pytest_sessionfinish(session=self.session, exitstatus=0)
        finally:
            if self.config is not None:
                unconfigure(self.config)
            self.runtime.tier_code.uninstall()
            self._forget_tier_modules()
            self.config = self.session = None

    def _not_collected(self, request: GradingRequest) -> tuple[Report, GradingStats]:
        problems = self.grading.tests.problems
        error = grader_error("the tier suites could not be collected", problems)
        return self._failed(request, error)

    def _failed(self, request: GradingRequest, error) -> tuple[Report, GradingStats]:
        exercise, wanted = self.runtime.exercise, request.wanted
        report = failed_report(exercise, request.mode, wanted, request.name, grader_error=error)
        return report, GradingStats()

    def _forget_tier_modules(self) -> None:
        """Drop modules imported from the tier folder during the session; library modules
        imported for the first time stay."""
        saved_modules, saved_path = self._saved
        tiers_dir = self.runtime.exercise.tiers_dir
        for name in sys.modules.keys() - saved_modules.keys():  # new since the session began
            location = getattr(sys.modules[name], "__file__", None)
            if location and Path(location).is_relative_to(tiers_dir):
                del sys.modules[name]
        sys.path[:] = saved_path
