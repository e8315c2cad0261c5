"""Every private pytest name the judge uses, and nowhere else.

Driving a session in steps and running it for grading after grading (pytest_session.py)
needs pytest's machinery below `pytest.main` and its setup state; serving the tier modules'
compiled code (tiercode.py) needs its assertion rewriter; the judge's lean test protocol
(protocol.py) needs the runner's own per-test protocol, the report sections a test added,
and a way to take back a test's request to end the run. pytest's version is pinned in
pyproject.toml; tests/grader/judge/test_pytest_internals.py fails, naming the one that
changed, when an upgrade moves or reshapes any of them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest
from _pytest.assertion.rewrite import AssertionRewritingHook, rewrite_asserts
from _pytest.config import _prepareconfig
from _pytest.runner import runtestprotocol

PRIVATE_NAMES = (  # what test_pytest_internals.py checks, in one place
    "_pytest.config._prepareconfig",
    "_pytest.config.Config._do_configure",
    "_pytest.config.Config._ensure_unconfigure",
    "_pytest.assertion.rewrite.rewrite_asserts",
    "_pytest.assertion.rewrite.AssertionRewritingHook",
    "_pytest.runner.runtestprotocol",
    "_pytest.nodes.Item._report_sections",
    "_pytest.main.Session._setupstate",
    "_pytest.runner.SetupState.stack",
    "_pytest.runner.SetupState.teardown_exact",
    "_pytest.main.Session._shouldstop",
    "_pytest.main.Session._shouldfail",
)


def prepare_config(args: list[str], plugins: list) -> pytest.Config:
    """The Config `pytest.main(args, plugins)` would make, not yet configured."""
    return _prepareconfig(args, plugins)


def configure(config: pytest.Config) -> None:
    """What `pytest.main` does before the session starts (pytest_configure hooks)."""
    config._do_configure()


def unconfigure(config: pytest.Config) -> None:
    """What `pytest.main` does after the session (pytest_unconfigure; idempotent)."""
    config._ensure_unconfigure()


def assertion_hook() -> Any:
    """pytest's assertion-rewriting import hook of this run, or None (--assert=plain)."""
    for finder in sys.meta_path:
        if isinstance(finder, AssertionRewritingHook):
            return finder
    return None


def rewritten(tree: ast.Module, source: bytes, path: Path, hook: Any) -> ast.Module:
    """`tree` with its asserts rewritten exactly as pytest's hook rewrites a test module's."""
    rewrite_asserts(tree, source, str(path), hook.config)
    return tree


def run_phases(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Setup, call and teardown of one test, each reported (pytest_runtest_makereport and
    pytest_runtest_logreport), exactly as pytest's own pytest_runtest_protocol runs them,
    without its logstart and logfinish."""
    runtestprotocol(item, log=True, nextitem=nextitem)


def report_sections(item: pytest.Item) -> list[tuple[str, str, str]]:
    """What a test added to its report (`item.add_report_section`): (when, key, content)."""
    return item._report_sections


def teardown_all(session: pytest.Session) -> None:
    """Tear down every fixture still set up, of every scope, as pytest's own
    pytest_sessionfinish does (a run that stopped early leaves the session's up)."""
    session._setupstate.teardown_exact(None)


def withdraw_stop(session: pytest.Session) -> str | bool:
    """Take back a request to end the run (`session.shouldstop` or `shouldfail`, which
    pytest's setters refuse to unset): what was asked, False when nothing was."""
    asked = session.shouldstop or session.shouldfail
    session._shouldstop = session._shouldfail = False
    return asked


def set_up_nodes(session: pytest.Session) -> int:
    """How many nodes (the session, a module, a test) have fixtures set up now."""
    return len(session._setupstate.stack)
