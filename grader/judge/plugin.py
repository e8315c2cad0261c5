"""The pytest plugin the tier suites run under (entry point `gspo_grader`).

Fixtures the tier tests use:
    student          the submission, behind the sandbox's remote-autograd proxy
    reference        the trusted reference module
    experiment       the toy experiment module (experiment.py)
    record_artifacts a callable that stores the toy's result dict in the report

Options: --submission PATH (default: the reference), --grader-mode run|submit,
--grader-tiers T0,T2, --grader-report FILE (the Report as JSON).

The plugin is installed for every pytest run in the environment, so it stays inert unless
the session collects tier tests (tests under tests/tiers, or tests with a tier marker).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from grader.exercise import default_exercise
from grader.judge.binding import bind, is_tier_item, selected, unused_tiers
from grader.judge.failures import grader_error_report
from grader.judge.registry import TierRegistryError, load_tiers, parse_tier_list
from grader.judge.session import JudgeSession, Submission
from grader.judge.verdicts import Verdict, judge_exception
from grader.report import Report

JUDGE = pytest.StashKey[JudgeSession]()
PROBLEMS = pytest.StashKey[list[str]]()  # usage and collection errors, for the report
_TRUSTED_MODULES: dict[Path, ModuleType] = {}


class GradingRequest:
    """Handed to pytest.main(plugins=[...]) by the runner: what to grade; gets the Report.

    `submission` may also be a function that waits for it and returns None to stop: a warm
    judge starts each pytest run before its request arrives, and the run asks for the
    submission only once its tests are collected, when it needs the mode and the tiers.
    """

    def __init__(self, submission: Submission | Callable[[], Submission | None]):
        self._submission = submission
        self.report: Report | None = None
        self.stopped = False  # the waiting function said stop: no grading, no report

    @property
    def submission(self) -> Submission:
        if callable(self._submission):
            self._submission = self._submission()
            if self._submission is None:
                self.stopped = True
                pytest.exit("the judge is stopping", returncode=0)
        return self._submission


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gspo-grader")
    group.addoption("--submission", default=None, help="submission file (default: reference)")
    group.addoption(
        "--grader-mode", default="submit", choices=("run", "submit"), help="run: visible only"
    )
    group.addoption("--grader-tiers", default=None, help="comma-separated tier ids, e.g. T0,T2")
    group.addoption("--grader-report", default=None, help="write the Report JSON to this file")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tier(id): binds a test to a tier of tiers.toml")
    config.addinivalue_line("markers", "hidden: a Submit-only test whose inputs stay secret")
    config.stash[PROBLEMS] = []


def _request(config: pytest.Config) -> GradingRequest | None:
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, GradingRequest):
            return plugin
    return None


def _usage_error(config: pytest.Config, message: str) -> pytest.UsageError:
    config.stash[PROBLEMS].append(message)
    return pytest.UsageError(message)


def _new_session(config: pytest.Config) -> JudgeSession:
    """The grading this pytest run performs, from the runner's request or the options."""
    exercise = default_exercise()
    try:
        tiers = load_tiers(exercise.tiers_file)
        request = _request(config)
        if request is not None:
            return JudgeSession(request.submission, exercise, tiers)
        path = Path(config.getoption("--submission") or exercise.reference)
        if not path.is_file():
            raise _usage_error(config, f"--submission {path}: no such file")
        submission = Submission(
            source=path.read_text(encoding="utf-8", errors="replace"),
            filename=path.name,
            mode=config.getoption("--grader-mode"),
            tiers=parse_tier_list(config.getoption("--grader-tiers"), tiers),
            name=str(path),
        )
        return JudgeSession(submission, exercise, tiers)
    except TierRegistryError as error:
        raise _usage_error(config, str(error)) from None


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Bind tier tests to tiers; deselect what this mode and tier list leave out."""
    tiers_dir = default_exercise().tiers_dir
    tier_items = [item for item in items if is_tier_item(item, tiers_dir)]
    if not tier_items and _request(config) is None and not config.getoption("--grader-report"):
        return
    judge = _new_session(config)
    config.stash[JUDGE] = judge
    try:
        bindings = {item.nodeid: bind(item, judge.tiers, tiers_dir) for item in tier_items}
    except pytest.UsageError as error:
        raise _usage_error(config, str(error)) from None
    for tier in unused_tiers(judge.tiers, list(bindings.values())):
        judge.warnings.append(f"tier {tier.id} ({tier.title}) is declared but has no tests")
    mode, wanted = judge.submission.mode, judge.submission.tiers
    keep, drop = [], []
    for item in items:
        binding = bindings.get(item.nodeid)
        if binding is None or selected(binding, mode, wanted):
            keep.append(item)
            if binding is not None:
                judge.add(item.nodeid, binding)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _judge(config: pytest.Config) -> JudgeSession | None:
    return config.stash.get(JUDGE, None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Stop running tests once the grading is out of time; remember the running test."""
    judge = _judge(item.config)
    if judge is None or item.nodeid not in judge.records:
        return None
    if judge.out_of_time():
        judge.mark_not_run(item.nodeid)
        return True
    judge.begin(item.nodeid)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    judge = _judge(item.config)
    if judge is not None and item.nodeid in judge.records:
        if call.excinfo is None:
            verdict = Verdict("passed")
        elif report.skipped:
            verdict = Verdict("skipped", str(getattr(report, "wasxfail", "")) or "skipped")
        else:
            verdict = judge_exception(call.excinfo.value, call.when)
        judge.verdict(item.nodeid, verdict, call.duration if call.when == "call" else 0.0)
    return report


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _COLLECT_ERRORS.append(f"{report.nodeid}: {str(report.longrepr).strip()[-600:]}")


_COLLECT_ERRORS: list[str] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _COLLECT_ERRORS.clear()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Build the Report; hand it to the runner and/or write it to --grader-report."""
    config = session.config
    judge = _judge(config)
    problems = config.stash[PROBLEMS] + _COLLECT_ERRORS
    request = _request(config)
    if judge is None and not problems and request is None:
        return
    report = judge.finish() if judge is not None else None
    if problems:
        report = grader_error_report("the tier suites could not be collected", problems, report)
    if request is not None:
        request.report = report
    path = config.getoption("--grader-report")
    if path and report is not None:
        Path(path).write_text(report.model_dump_json(indent=2), encoding="utf-8")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    judge = _judge(config)
    if judge is None:
        return
    for warning in judge.warnings:
        terminalreporter.write_line(f"gspo-grader warning: {warning}", yellow=True)


# ---- fixtures --------------------------------------------------------------------------
def load_trusted(name: str, path: Path) -> ModuleType:
    """Import a trusted exercise file by path (never installed); cached per process."""
    path = path.resolve()
    if path not in _TRUSTED_MODULES:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _TRUSTED_MODULES[path] = module
    return _TRUSTED_MODULES[path]


class TrustedReference:
    """The reference module as the tier tests see it: its attributes, plus `remember`.

    The reference and the seeded tier inputs never change while a judge process lives, so
    what a test derives from them alone (the reference's value and gradient on a batch) can
    be computed once per process instead of once per grading (~20 ms a grading). Only such
    trusted results are kept: nothing a student's code returned is ever stored.
    """

    MAX_RESULTS = 256  # a tier that draws fresh inputs every grading cannot grow it forever

    def __init__(self, module: ModuleType):
        self.module = module
        self._results: dict[tuple, object] = {}

    def __getattr__(self, name: str):
        module = self.__dict__.get("module")  # absent while copy or pickle builds an instance
        if module is None:
            raise AttributeError(name)
        return getattr(module, name)

    def remember(self, key: tuple, compute):
        """`compute()` the first time `key` (plain values, digests of the inputs) is asked
        for, after that the same result: the caller must not change it in place."""
        if key not in self._results:
            if len(self._results) >= self.MAX_RESULTS:
                self._results.clear()
            self._results[key] = compute()
        return self._results[key]


_REFERENCES: dict[Path, TrustedReference] = {}


@pytest.fixture(scope="session")
def reference() -> TrustedReference:
    path = default_exercise().reference.resolve()
    if path not in _REFERENCES:
        _REFERENCES[path] = TrustedReference(load_trusted("gspo_reference", path))
    return _REFERENCES[path]


@pytest.fixture(scope="session")
def experiment() -> ModuleType:
    return load_trusted("gspo_experiment", default_exercise().experiment)


@pytest.fixture(scope="session")
def student(request: pytest.FixtureRequest):
    """The submission behind the sandbox proxy: one fresh worker for the whole grading."""
    judge = _judge(request.config)
    if judge is None:
        raise pytest.UsageError("the `student` fixture is only available to tier tests")
    return judge.student()


@pytest.fixture
def record_artifacts(request: pytest.FixtureRequest):
    """T3 calls this with experiment.run_toy's result; it lands in Report.artifacts."""
    judge = _judge(request.config)

    def record(result: dict) -> None:
        if judge is not None:
            judge.artifacts = dict(result)

    return record
