"""Count the tests of each tier by collecting the suites (nothing runs, no sandbox starts).

`gspo-grader tiers` shows the counts; a test bound to an undeclared tier, a test without a
tier and a test file that does not import all surface here as TierRegistryError, with
pytest's own words, before any student is graded against a broken suite.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter
from dataclasses import dataclass, field

import pytest

from grader.exercise import Exercise, default_exercise
from grader.judge.registry import TierRegistryError


@dataclass
class Inventory:
    """Per tier id: how many tests, and how many of them are hidden."""

    tests: Counter = field(default_factory=Counter)
    hidden: Counter = field(default_factory=Counter)


class _Collector:
    def __init__(self) -> None:
        self.inventory = Inventory()
        self.errors: list[str] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, session, config, items):
        try:
            return (yield)
        except pytest.UsageError as error:
            self.errors.append(str(error))
            raise

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.errors.append(f"{report.nodeid}: {str(report.longrepr).strip()[-800:]}")

    def pytest_collection_finish(self, session) -> None:
        for item in session.items:
            marker = item.get_closest_marker("tier")
            if marker is not None and marker.args:
                self.inventory.tests[marker.args[0]] += 1
                self.inventory.hidden[marker.args[0]] += (
                    item.get_closest_marker("hidden") is not None
                )


def collect_tiers(exercise: Exercise | None = None) -> Inventory:
    """Collect tests/tiers; TierRegistryError with the reason when the suites are broken."""
    exercise = exercise or default_exercise()
    collector = _Collector()
    args = [str(exercise.tiers_dir), "--collect-only", "-q", "-p", "no:cacheprovider"]
    args += [f"--rootdir={exercise.root}", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = pytest.main(args, plugins=[collector])
    if collector.errors:
        raise TierRegistryError("\n".join(collector.errors))
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise TierRegistryError(f"collecting {exercise.tiers_dir} failed:\n{sink.getvalue()}")
    return collector.inventory
