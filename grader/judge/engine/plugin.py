"""The pytest plugin the tier suites run under: hooks that feed one Grading, and fixtures.

Fixtures the tier tests use:
    student          the submission, behind the sandbox's remote-autograd proxy
    reference        the exercise's trusted reference module, its declared functions
                     remembering their results between gradings (reference_memo.py)
    experiment       the exercise's toy (experiment.py)
    record_artifacts a callable that stores the toy's result dict in the report

For every pytest session the judge registers this module (the fixtures) and one
GradingPlugin (the hooks), which binds the collected tests in the session's TestLedger and
hands each grading's events to that grading's GradingRun; the plugin is in the config's
stash, where the fixtures find the grading now running. Nothing here holds state of its own.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from grader.judge.engine.grading_run import GradingRun
from grader.judge.engine.ledger import TestLedger
from grader.judge.engine.recording import RecordingStudent
from grader.judge.engine.reference_memo import RememberedReference
from grader.judge.engine.verdicts import TestVerdict, judge_exception, shorten


class GradingPlugin:
    """pytest's events for the gradings of one session: collection binds the tests in
    `tests` (the session's ledger); while a grading runs, `grading` is its GradingRun (set
    by the session, pytest_session.py), which gets every test's events."""

    def __init__(self, tests: TestLedger) -> None:
        self.tests = tests
        self.grading: GradingRun | None = None

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[PLUGIN] = self
        config.addinivalue_line("markers", "tier(id): binds a test to a tier of tiers.toml")
        config.addinivalue_line("markers", "hidden: a Submit-only test whose inputs stay secret")

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Bind every tier test to its tier (a missing or unknown tier stops the run)."""
        self.tests.bind(items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.tests.problems.append(f"{report.nodeid}: {str(report.longrepr)[-600:]}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> bool | None:
        """Skip the test (recorded as not run) once the grading is out of time."""
        return None if self.grading.begin(item.nodeid) else True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if call.excinfo is None and report.failed:  # xfail(strict=True), and it passed
            verdict = TestVerdict(
                "failed", shorten(f"expected to fail, but passed: {report.longrepr}"), "student"
            )
        elif call.excinfo is None:
            verdict = TestVerdict("passed")
        elif report.skipped and hasattr(report, "wasxfail"):
            verdict = TestVerdict("skipped", str(report.wasxfail) or "expected to fail")
        else:  # a skip keeps its reason: it is the note the student reads
            verdict = judge_exception(call.excinfo.value, call.when)
        duration = call.duration if call.when == "call" else 0.0
        self.grading.verdict(item.nodeid, verdict, duration)
        if call.when == "teardown":  # the test ran, teardown included: the proxy learns it ended
            self.grading.end(item.nodeid)
        return report


PLUGIN = pytest.StashKey[GradingPlugin]()


def _grading(request: pytest.FixtureRequest) -> GradingRun:
    return request.config.stash[PLUGIN].grading


@pytest.fixture(scope="session")
def student(request: pytest.FixtureRequest) -> RecordingStudent:
    """The submission behind the sandbox proxy: one fresh worker for the whole grading."""
    return _grading(request).student()


@pytest.fixture(scope="session")
def reference(request: pytest.FixtureRequest) -> RememberedReference:
    return _grading(request).trusted.reference


@pytest.fixture(scope="session")
def experiment(request: pytest.FixtureRequest) -> ModuleType:
    return _grading(request).trusted.experiment


@pytest.fixture
def record_artifacts(request: pytest.FixtureRequest):
    """T3 calls this with experiment.run_toy's result; it lands in Report.artifacts."""
    return _grading(request).record_artifacts
