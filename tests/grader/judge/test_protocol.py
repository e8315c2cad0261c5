"""The judge runs tier tests as pytest does: fixtures of every scope, yield fixtures and
finalizers in pytest's order, parametrize, marks, skip and xfail, conftest.py; its lean
reports (engine/protocol.py) change no outcome and no message."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from judge_helpers import build_exercise

from grader.judge import GradingRequest
from grader.judge.engine import Judge
from grader.sandbox import Limits

TIERS = """
[[tier]]
id = "T0"
title = "Semantics"
description = "pytest's own behaviour."
points = 10
visibility = "visible"
order = 0
"""

CONFTEST = """
from pathlib import Path

import pytest

EVENTS = Path(__file__).with_name("events.txt")


def note(event):
    with EVENTS.open("a") as file:
        file.write(event + "\\n")


def pytest_configure(config):  # for plain pytest; the judge declares its markers itself
    config.addinivalue_line("markers", "tier(id): a tier")


def pytest_runtest_logstart(nodeid):
    note(f"start {nodeid.split('::')[-1]}")


def pytest_runtest_logreport(report):
    note(f"report {report.nodeid.split('::')[-1]} {report.when} {report.outcome}")


@pytest.fixture(scope="session")
def session_thing():
    note("session up")
    yield "session"
    note("session down")


@pytest.fixture(autouse=True)
def every_test(request):
    note(f"auto up {request.node.name}")
    yield
    note(f"auto down {request.node.name}")
"""

SUITE = """
import warnings

import pytest

from conftest import note
from grader.checks import fail

pytestmark = pytest.mark.tier("T0")


@pytest.fixture(scope="module")
def module_thing(session_thing):
    note("module up")
    yield session_thing + "+module"
    note("module down")


@pytest.fixture
def with_finalizer(request, module_thing):
    note("finalizer up")
    request.addfinalizer(lambda: note("finalizer down"))
    return module_thing


@pytest.fixture(params=["a", "b"])
def letter(request):
    note(f"letter {request.param} up")
    yield request.param
    note(f"letter {request.param} down")


@pytest.fixture
def broken_setup():
    raise RuntimeError("setup broke")


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")


def test_fixtures_of_every_scope(with_finalizer):
    assert with_finalizer == "session+module"


@pytest.mark.parametrize("n", [1, 2])
def test_parametrized(n, letter):
    note(f"test {n}{letter}")


@pytest.mark.skip(reason="skipped by a mark")
def test_skip_mark():
    note("never runs")


@pytest.mark.skipif(True, reason="skipped by a condition")
def test_skipif_mark():
    note("never runs")


def test_skips_itself():
    pytest.skip("skipped from inside")


@pytest.mark.xfail(reason="known to fail")
def test_xfail_that_fails():
    assert False


@pytest.mark.xfail(reason="must not pass", strict=True)
def test_strict_xfail_that_passes():
    pass


def test_failing_check():
    fail("came out 2; expected 3 (differs by 1.0e+00)")


def test_failing_assert():
    assert 1 + 1 == 3, "one and one make two"


def test_setup_error(broken_setup):
    note("never runs")


def test_teardown_error(broken_teardown):
    note("ran before a broken teardown")


@pytest.mark.filterwarnings("error")
def test_warning_made_an_error():
    warnings.warn("careful", UserWarning)


def test_builtin_fixtures(capsys, monkeypatch, tmp_path):
    print("printed")
    monkeypatch.setenv("TIER_PROBE", "1")
    (tmp_path / "f").write_text("x")
    assert capsys.readouterr().out == "printed\\n"


class TestAClass:
    def setup_method(self):
        note("setup_method")

    def teardown_method(self):
        note("teardown_method")

    @pytest.mark.usefixtures("module_thing")
    def test_in_a_class(self):
        note("test in a class")
"""

EXPECTED = {  # test id -> (outcome, message or a part of it)
    "test_semantics.py::test_fixtures_of_every_scope": ("passed", ""),
    "test_semantics.py::test_parametrized[a-1]": ("passed", ""),
    "test_semantics.py::test_parametrized[a-2]": ("passed", ""),
    "test_semantics.py::test_parametrized[b-1]": ("passed", ""),
    "test_semantics.py::test_parametrized[b-2]": ("passed", ""),
    "test_semantics.py::test_skip_mark": ("skipped", "skipped by a mark"),
    "test_semantics.py::test_skipif_mark": ("skipped", "skipped by a condition"),
    "test_semantics.py::test_skips_itself": ("skipped", "skipped from inside"),
    "test_semantics.py::test_xfail_that_fails": ("skipped", "known to fail"),
    "test_semantics.py::test_strict_xfail_that_passes": ("failed", "must not pass"),
    "test_semantics.py::test_failing_check": (
        "failed", "came out 2; expected 3 (differs by 1.0e+00)"),
    "test_semantics.py::test_failing_assert": ("failed", "one and one make two"),
    "test_semantics.py::test_setup_error": ("error", "RuntimeError: setup broke"),
    "test_semantics.py::test_teardown_error": ("error", "RuntimeError: teardown broke"),
    "test_semantics.py::test_warning_made_an_error": ("error", "UserWarning: careful"),
    "test_semantics.py::test_builtin_fixtures": ("passed", ""),
    "test_semantics.py::TestAClass::test_in_a_class": ("passed", ""),
}  # fmt: skip


@pytest.fixture(scope="module")
def exercise(tmp_path_factory):
    root = tmp_path_factory.mktemp("semantics") / "exercise"
    tests = {"conftest.py": CONFTEST, "test_semantics.py": SUITE}
    return build_exercise(root, TIERS, tests)


def events_of(run, exercise) -> list[str]:
    events = exercise / "tests" / "tiers" / "events.txt"
    events.unlink(missing_ok=True)
    run()
    return events.read_text().splitlines()


def graded(exercise):
    judge = Judge(Limits(), pool=None)
    try:
        request = GradingRequest(source="x = 1\n", exercise=str(exercise), name="probe")
        report, _ = judge.grade(request)
    finally:
        judge.close()
    return report


def test_outcomes_and_messages_are_pytests(exercise):
    report = graded(exercise)
    assert report.grader_error is not None  # the errors above are the grader's, as they must
    tests = {test.id: test for tier in report.tiers for test in tier.tests}
    assert set(tests) == set(EXPECTED)
    for test_id, (outcome, message) in EXPECTED.items():
        assert (tests[test_id].outcome, message in tests[test_id].message) == (outcome, True), (
            test_id, tests[test_id].outcome, tests[test_id].message)  # fmt: skip
    assert tests["test_semantics.py::test_failing_check"].message == EXPECTED[
        "test_semantics.py::test_failing_check"][1]  # fmt: skip


def test_fixtures_set_up_and_tear_down_as_under_plain_pytest(exercise):
    """Every setup, finalizer and teardown, in order, is the one `python -m pytest` gives, and
    so is every report a conftest.py hook receives."""
    report = []
    judged = events_of(lambda: report.append(graded(exercise)), exercise)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--rootdir={exercise}", f"--config-file={os.devnull}", "tests/tiers"]  # fmt: skip

    def plain():
        subprocess.run(command, cwd=exercise, env=env, capture_output=True, timeout=300)

    assert judged == events_of(plain, exercise)
    fixtures = [event for event in judged if not event.startswith(("start ", "report "))]
    assert fixtures[0] == "session up" and fixtures[-1] == "session down"
    assert "finalizer down" in judged and "ran before a broken teardown" in judged
    assert "report test_teardown_error teardown failed" in judged
