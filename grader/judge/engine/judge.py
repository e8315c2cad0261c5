"""The judge's engine: pytest sessions over an exercise's tier suites, run in this process.

    judge = Judge(limits, pool)
    report = judge.grade(request)          # a GradingRequest -> its Report
    judge.prepare(request.exercise)        # collect the next session ahead, while idle

A grading is one pytest session, made explicit in two steps (`PreparedRun`): `collect`
configures pytest and collects the tier modules, which needs no submission; `grade(request)`
selects the tests the request asks for, runs them, and returns the Report. A warm judge
collects the next session right after it answers, so a grading pays only for its tests.
Every session imports the tier modules afresh (nothing a module holds passes from one
student's grading to the next); only their compiled code is kept (tiercode.py), and the
exercise's reference and toy modules, which are trusted and never change while the judge
lives, are loaded once. Student code never runs here: the `student` fixture talks to a
sandboxed worker.

Driving a session in two steps uses pytest's session machinery below `pytest.main`
(`_prepareconfig`, `Config._do_configure`, `Config._ensure_unconfigure`), pinned by the
pytest version in pyproject.toml and exercised by every grading test.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _pytest.config import _prepareconfig

from grader.exercise import Exercise, find_exercise, load_module
from grader.judge import plugin
from grader.judge.failures import failed_report, grader_error
from grader.judge.grading import Grading, TestRecord, Trusted
from grader.judge.link import GradingRequest
from grader.judge.plugin import GradingPlugin
from grader.judge.reference_memo import RememberedReference
from grader.judge.registry import Tier, TierRegistryError, load_tiers
from grader.judge.tiercode import TierCode
from grader.report import Report
from grader.sandbox import Limits
from grader.sandbox.forecast import Forecast

# every plugin a grading never asks for is left out: each loaded plugin is registered and
# scanned again on every grading
_UNUSED_PLUGINS = (
    "cacheprovider",
    "unraisableexception",  # its end-of-session gc.collect() over torch's heap: ~1 s
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
        "-q",
        "--no-header",
        "--tb=no",
        "--capture=no",  # the tier tests print nothing worth keeping; capture costs per phase
        f"--rootdir={exercise.root}",
        # the grader's own modules are imported before the session, so pytest cannot
        # rewrite their asserts (they have none that matter)
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        *blocked,
    ]


@dataclass
class ExerciseRuntime:
    """What a judge keeps of one exercise between gradings: its tiers, the compiled tier
    code, and its trusted modules."""

    exercise: Exercise
    tiers: list[Tier]
    tier_code: TierCode
    trusted: Trusted
    forecasts: dict[tuple, Forecast] = field(default_factory=dict)  # kept between gradings

    @classmethod
    def load(cls, exercise: Exercise) -> ExerciseRuntime:
        """TierRegistryError when tiers.toml is broken."""
        tiers = load_tiers(exercise.tiers_file)
        trusted = Trusted(
            reference=RememberedReference(
                load_module(exercise.reference, f"{exercise.id}_reference"),
                exercise.function_names,
            ),
            experiment=load_module(exercise.experiment, f"{exercise.id}_experiment"),
        )
        return cls(exercise, tiers, TierCode(exercise.tiers_dir), trusted)


@dataclass
class PreparedRun:
    """One pytest session, configured and collected; `grade` runs it once."""

    runtime: ExerciseRuntime
    grading: Grading
    config: pytest.Config | None = None
    session: pytest.Session | None = None
    _saved: tuple[dict, list] = field(default_factory=lambda: (dict(sys.modules), list(sys.path)))

    @classmethod
    def collect(cls, runtime: ExerciseRuntime, limits: Limits, pool) -> PreparedRun:
        grading = Grading(
            runtime.exercise, runtime.tiers, runtime.trusted, limits, pool,
            forecasts=runtime.forecasts,
        )  # fmt: skip
        prepared = cls(runtime, grading)
        began = time.process_time()
        try:
            plugins = [plugin, GradingPlugin(grading), runtime.tier_code]
            prepared.config = _prepareconfig(pytest_args(runtime.exercise), plugins)
            prepared.session = pytest.Session.from_config(prepared.config)
            prepared.config._do_configure()
            prepared.config.hook.pytest_sessionstart(session=prepared.session)
            prepared.config.hook.pytest_collection(session=prepared.session)
        except (pytest.UsageError, Exception) as error:  # a broken suite: the instructor's
            grading.problems.append(f"{type(error).__name__}: {error}")
        grading.collect_cpu_s = time.process_time() - began
        return prepared

    def grade(self, request: GradingRequest) -> Report:
        """Run the selected tests for `request`; every failure of ours becomes a grader error."""
        try:
            if self.grading.problems or self.session is None:
                return self._not_collected(request)
            keep, drop = self.grading.select(request, self.session.items)
            self.session.items = keep
            self.config.hook.pytest_deselected(items=drop)
            self.config.hook.pytest_runtestloop(session=self.session)
            return self.grading.report()
        except Exception as error:  # pytest itself failed: ours, not the student's
            problem = f"{type(error).__name__}: {error}"
            return failed_report(self.runtime.exercise, request.mode, request.wanted,
                                 request.name, grader_error=grader_error("pytest failed",
                                 [problem]))  # fmt: skip
        finally:
            self.discard()

    def discard(self) -> None:
        """End the session (run or not) and put the process back as it was."""
        try:
            if self.session is not None:
                self.config.hook.pytest_sessionfinish(session=self.session, exitstatus=0)
        finally:
            if self.config is not None:
                self.config._ensure_unconfigure()
            self.runtime.tier_code.uninstall()
            self._forget_tier_modules()
            self.config = self.session = None

    def _not_collected(self, request: GradingRequest) -> Report:
        error = grader_error("the tier suites could not be collected", self.grading.problems)
        return failed_report(self.runtime.exercise, request.mode, request.wanted, request.name,
                             grader_error=error)  # fmt: skip

    def _forget_tier_modules(self) -> None:
        """Drop modules imported from the tier folder during the session; library modules
        imported for the first time stay."""
        saved_modules, saved_path = self._saved
        tiers_dir = self.runtime.exercise.tiers_dir
        for name, module in list(sys.modules.items()):
            location = getattr(module, "__file__", None)
            if name not in saved_modules and location and Path(location).is_relative_to(tiers_dir):
                del sys.modules[name]
        sys.path[:] = saved_path


class Judge:
    """Grades requests in this (trusted) process, one at a time, for any exercise."""

    def __init__(self, limits: Limits, pool) -> None:
        self.limits, self.pool = limits, pool
        self._runtimes: dict[Path, ExerciseRuntime] = {}
        self._prepared: PreparedRun | None = None

    def grade(self, request: GradingRequest) -> Report:
        """The Report of one request (an unknown exercise raises ExerciseError)."""
        exercise = find_exercise(request.exercise)
        try:
            self._prepare(exercise)
        except Exception as error:  # tiers.toml, the reference or the toy is broken
            problem = grader_error("the exercise could not be loaded", [f"{error}"])
            return failed_report(exercise, request.mode, request.wanted, request.name,
                                 grader_error=problem)  # fmt: skip
        prepared, self._prepared = self._prepared, None
        return prepared.grade(request)

    def prepare(self, exercise_id: str | None) -> None:
        """Collect the next session for this exercise now, while nobody waits."""
        with contextlib.suppress(Exception):  # grade() meets the same error and reports it
            self._prepare(find_exercise(exercise_id))

    def close(self) -> None:
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.discard()

    def _prepare(self, exercise: Exercise) -> None:
        if self._prepared is not None and self._prepared.runtime.exercise.root == exercise.root:
            return
        self.close()
        runtime = self._runtimes.get(exercise.root) or ExerciseRuntime.load(exercise)
        self._runtimes[exercise.root] = runtime
        self._prepared = PreparedRun.collect(runtime, self.limits, self.pool)


def inventory(exercise: Exercise) -> list[TestRecord]:
    """Collect the tier suites without running a test: every test, bound to its tier.
    TierRegistryError names a broken suite (a file that does not import, a test without a
    tier) before any student is graded against it."""
    runtime = ExerciseRuntime.load(exercise)
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        prepared = PreparedRun.collect(runtime, Limits(), pool=None)
        problems, records = prepared.grading.problems, list(prepared.grading.records.values())
        prepared.discard()
    if problems:
        raise TierRegistryError("\n".join(problems))
    return records
