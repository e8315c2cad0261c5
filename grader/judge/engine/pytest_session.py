"""The tier suites as one collected pytest session, run for one grading after another.

`CollectedSession.collect` configures pytest and collects the tier modules, which needs no
submission; `grade(request)` selects the tests the request asks for, runs them, and returns
the Report. Collecting costs a judge about a fifth of a grading's CPU, so a session is kept
for the next grading of its exercise, as long as nothing a grading did can reach the next:

- every fixture, of every scope, is torn down after each grading (`teardown_all`), so the
  next gets a new `student` and new fixture values;
- the tier folder's modules, the parametrized values and test class instances, and the tier
  files are fingerprinted (tier_state.py) after collecting and after each grading; a grading
  that changed any of them, that pytest itself failed, or that stopped the session ends it
  (`reusable` is False), and the judge collects a new one, with the tier modules imported
  afresh, before its next grading.

A session ahead is collected while the judge is idle (judge.py), so a grading never waits
for collection. Driving a session in steps uses pytest's machinery below `pytest.main`,
through pytest_private.py, the one module that touches pytest's private names.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grader.exercise import Exercise
from grader.judge.engine import plugin, protocol
from grader.judge.engine.grading_run import GradingRun
from grader.judge.engine.ledger import TestLedger
from grader.judge.engine.plugin import GradingPlugin
from grader.judge.engine.protocol import RUN_STOPPED
from grader.judge.engine.pytest_private import (
    configure,
    prepare_config,
    set_up_nodes,
    teardown_all,
    unconfigure,
)
from grader.judge.engine.runtime import ExerciseRuntime
from grader.judge.engine.tier_state import TierState
from grader.judge.failures import failed_report, grader_error
from grader.judge.link import GradingRequest
from grader.judge.stats import GradingStats
from grader.report import Report
from grader.sandbox import Limits

log = logging.getLogger(__name__)

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
class CollectedSession:
    """One pytest session over an exercise's tier suites, collected once; `grade` runs it
    for a request, again and again while `reusable`."""

    runtime: ExerciseRuntime
    limits: Limits
    pool: Any
    stop: Callable[[], bool] | None
    tests: TestLedger  # every collected test bound to its tier; each grading copies it
    plugin: GradingPlugin
    config: pytest.Config | None = None
    session: pytest.Session | None = None
    items: list[pytest.Item] = field(default_factory=list)  # every collected test
    collect_cpu_s: float | None = None  # until the first grading, which is charged for it
    reusable: bool = True
    _state: TierState | None = None  # after collecting: what no grading may change
    _saved: tuple[dict, list] = field(default_factory=lambda: (dict(sys.modules), list(sys.path)))

    @classmethod
    def collect(
        cls, runtime: ExerciseRuntime, limits: Limits, pool, stop: Callable[[], bool] | None = None
    ) -> CollectedSession:
        """`stop`: asked before each test; once True, the rest is not run (GradingRun.begin)."""
        tests = TestLedger(runtime.tiers, runtime.exercise.tiers_dir)
        prepared = cls(runtime, limits, pool, stop, tests, GradingPlugin(tests))
        began = time.process_time()
        try:
            plugins = [plugin, protocol, prepared.plugin, runtime.tier_code]
            prepared.config = prepare_config(pytest_args(runtime.exercise), plugins)
            prepared.session = pytest.Session.from_config(prepared.config)
            configure(prepared.config)
            prepared.config.hook.pytest_sessionstart(session=prepared.session)
            prepared.config.hook.pytest_collection(session=prepared.session)
            prepared.items = list(prepared.session.items)
        except (pytest.UsageError, Exception) as error:  # a broken suite: the instructor's
            tests.problems.append(f"{type(error).__name__}: {error}")
        prepared._state = prepared._tier_state()
        prepared.collect_cpu_s = time.process_time() - began
        return prepared

    def grade(self, request: GradingRequest) -> tuple[Report, GradingStats]:
        """Run the selected tests for `request`; every failure of ours becomes a grader
        error. Afterwards `reusable` says whether the session may run another grading."""
        grading = GradingRun(
            self.runtime.exercise, self.tests.fresh(), self.runtime.trusted, self.limits,
            self.pool, self.runtime.forecasts, self.stop, self.collect_cpu_s,
        )  # fmt: skip
        self.collect_cpu_s = None  # the next grading reuses what this one paid for
        self.reusable = False  # until this grading is known to have left nothing behind
        if grading.tests.problems or self.session is None:
            return self._not_collected(request)
        self.plugin.grading = grading
        try:
            keep, drop = grading.select(request, self.items)
            self.session.items, self.session.testsfailed = keep, 0
            self.config.hook.pytest_deselected(items=drop)
            self.config.hook.pytest_runtestloop(session=self.session)
            self.reusable = self._cleaned_up()
            return grading.report()
        except (Exception, KeyboardInterrupt) as error:  # pytest, or a tier's hook beside
            # the tests' phases (protocol.py keeps those to their test): ours, not the student's
            self.reusable = False
            problem = f"{type(error).__name__}: {error}"
            return self._failed(request, grader_error("pytest failed", [problem]))
        finally:
            self.plugin.grading = None

    def _cleaned_up(self) -> bool:
        """Tear down what a grading stopped early left set up; True when nothing the
        grading did can reach the next one (see the module docstring)."""
        session, name = self.session, self.runtime.exercise.id
        try:
            teardown_all(session)
        except Exception:  # a tier fixture's teardown failed: a new session starts clean
            log.exception("a fixture of %s failed to tear down after a grading", name)
            return False
        if RUN_STOPPED in session.stash:
            log.info("a test of %s tried to end the run (%s): collecting a new session",
                     name, session.stash[RUN_STOPPED])  # fmt: skip
            return False
        if session.shouldstop or session.shouldfail or set_up_nodes(session):
            log.info("a grading of %s stopped its pytest session: collecting a new one", name)
            return False
        if self._state is None or self._tier_state() != self._state:
            log.info("a grading of %s changed the tier modules' state or the tier files: "
                     "collecting a new session", name)  # fmt: skip
            return False
        return True

    def _tier_state(self) -> TierState | None:
        """The fingerprint of what a grading could change; None when it cannot be read
        (then no grading reuses the session)."""
        tiers_dir = self.runtime.exercise.tiers_dir
        try:
            return TierState.of(
                tiers_dir, _tier_modules(tiers_dir, self._saved[0]).values(), self.items
            )
        except Exception:
            log.exception("the tier state of %s could not be read", self.runtime.exercise.id)
            return None

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
        problems = self.tests.problems
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
        sys.path[:] = saved_path
        for name in _tier_modules(self.runtime.exercise.tiers_dir, saved_modules):
            sys.modules.pop(name, None)


def _tier_modules(tiers_dir: Path, before: dict) -> dict:
    """The modules imported from the tier folder since `before` (sys.modules then), by name.

    Other threads import and drop modules meanwhile (a rehearsal's worker thread drops its
    `submission` module as it ends, in the background), so this reads one copy of
    sys.modules, taken at once, never the live dict name by name."""
    inside = os.path.join(tiers_dir, "")
    now = sys.modules.copy()  # one C call: no other thread runs during it
    found = {}
    for name in now.keys() - before.keys():
        location = getattr(now[name], "__file__", None)
        if isinstance(location, str) and location.startswith(inside):
            found[name] = now[name]
    return found
