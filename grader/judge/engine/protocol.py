"""pytest's per-test protocol as a grading needs it: the same phases, none of the terminal's work.

A grading runs ~45 tests per Submit, and pytest's own protocol spends per test what only its
terminal output reads: the test's location (paths made relative, its module path walked) for
logstart and logfinish, and for a failure a formatted traceback (every frame's path filtered,
its source read, the fixture values repr'd: tensors included) in `report.longrepr`. The judge
reads neither: a verdict comes from the exception itself (verdicts.py), and the terminal
reporter is not loaded (pytest_session.py).

Its `pytest_runtest_protocol` runs setup, call and teardown through pytest's own runner
(pytest_private.py: the same hooks in the same order, so fixtures of every scope, yield
fixtures and their finalizers, skip/xfail marks and conftest.py hooks behave exactly as under
`pytest`), and calls logstart and logfinish only when some conftest.py implements them.

Its `pytest_runtest_makereport` stands in for the runner's and builds the TestReport without
formatting anything. A failure's `longrepr` is the exception's one-line summary
(`excinfo.exconly()`, "Failed: <the check's message>" for grader.checks), its location is
read from the node id (no line number); a skip keeps pytest's own report (its (path, line,
reason) tuple). Wrappers of the hook (skipping's xfail handling, the GradingPlugin's
verdicts) see the report as before.

Its wrappers of the three phases keep one tier test from ending the whole grading: a
KeyboardInterrupt or `pytest.exit` (which pytest's runner lets through, to end the run) and a
`session.shouldstop` or `shouldfail` set by the test become a TierStoppedRun in that phase,
an ordinary grader error of that test. The judge process runs in a session of its own, so no
terminal's Ctrl-C reaches it: such an interrupt can only come from tier code.

The two hooks stand in for the runner's because this module is registered after it (plain
hooks run last registered first); a conftest.py's own, registered later still, runs before
them, as under `pytest`.
"""

from __future__ import annotations

import pytest

from grader.judge.engine.pytest_private import report_sections, run_phases, withdraw_stop
from grader.judge.engine.verdicts import TierStoppedRun

_RUN_ENDERS = (KeyboardInterrupt, pytest.exit.Exception)  # pytest's runner re-raises these
RUN_STOPPED = pytest.StashKey[str]()  # in the session's stash: how a test tried to end the run


def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """One test's setup, call and teardown, as the runner's pytest_runtest_protocol runs them."""
    hook = item.ihook
    if hook.pytest_runtest_logstart.get_hookimpls():  # a conftest.py's: pytest's has none here
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    run_phases(item, nextitem)
    if hook.pytest_runtest_logfinish.get_hookimpls():
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    return (yield from _kept_to_the_test(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _kept_to_the_test(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    return (yield from _kept_to_the_test(item))


def _kept_to_the_test(item: pytest.Item):
    """A phase's wrapper: what ends a run under `pytest` becomes TierStoppedRun, and the
    session says so (RUN_STOPPED): pytest leaves a fixture that raised KeyboardInterrupt
    half set up, so no later grading may reuse this session."""
    try:
        result = yield
    except _RUN_ENDERS as exc:
        how = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        item.session.stash[RUN_STOPPED] = how
        raise TierStoppedRun(how) from exc
    asked = withdraw_stop(item.session)
    if asked:
        how = item.session.stash[RUN_STOPPED] = f"session.shouldstop or shouldfail = {asked!r}"
        raise TierStoppedRun(how)
    return result


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    """The phase's report, with nothing formatted that nobody reads."""
    excinfo = call.excinfo
    if excinfo is not None and _skipped(excinfo.value):
        return pytest.TestReport.from_item_and_call(item, call)
    outcome, longrepr = ("passed", None) if excinfo is None else ("failed", excinfo.exconly())
    return pytest.TestReport(
        item.nodeid,
        _location(item),
        _keywords(item),
        outcome,
        longrepr,
        call.when,
        [(f"Captured {key} {when}", content) for when, key, content in report_sections(item)],
        call.duration,
        call.start,
        call.stop,
        user_properties=item.user_properties,
    )


_KEYWORDS = pytest.StashKey[dict]()


def _keywords(item: pytest.Item) -> dict:
    """The test's keywords as a report holds them, gathered once for its three phases."""
    keywords = item.stash.get(_KEYWORDS, None)
    if keywords is None:
        keywords = item.stash[_KEYWORDS] = dict.fromkeys(item.keywords, 1)
    return keywords


def _location(item: pytest.Item) -> tuple[str, None, str]:
    """(path, line, domain) read from the node id, without the line: pytest's own finds the
    function's code and makes its file relative to the invocation folder, for output nobody
    reads here. A conftest hook that asks `item.location` still gets pytest's."""
    path, _, domain = item.nodeid.partition("::")
    return path, None, domain.replace("::", ".")


def _skipped(error: BaseException) -> bool:
    """A skip, or a group of skips only (pytest reports both as skipped)."""
    if isinstance(error, BaseExceptionGroup):
        return error.split(pytest.skip.Exception)[1] is None
    return isinstance(error, pytest.skip.Exception)
