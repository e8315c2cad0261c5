"""Compile the tier folder's modules once per judge process; run them afresh every session.

A judge collects the tier suites again whenever a grading left state in its session, and
the tier modules are dropped with the session (pytest_session.py), so nothing a test module
holds passes from one student's grading to the next. Without a cache, each new session also
re-parses, assert-rewrites and compiles every module of the folder (~50 ms, since the judge
may not write .pyc files).

`TierCode` is a meta path finder that a grading puts in front of pytest's own import hook.
For a module that lives in the tier folder it serves code compiled once per file content,
with pytest's assertion rewriting applied exactly where pytest would apply it. The module
object, its globals and everything its body computes are still new in every session: only
the (immutable) code object is reused. Modules elsewhere are left to the usual finders.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

import pytest

from grader.judge.engine.pytest_private import assertion_hook, rewritten


class TierCode(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finder and loader for the modules of one tier folder, with a code cache."""

    def __init__(self, tiers_dir: Path):
        self.tiers_dir = tiers_dir.resolve()
        self._codes: dict[tuple[str, bool], tuple[bytes, CodeType]] = {}
        self._rewriter: Any = None  # pytest's import hook during a run that rewrites asserts

    def find_spec(self, name: str, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        if Path(spec.origin).resolve().parent != self.tiers_dir:
            return None
        rewriter = self._rewriter
        spec.loader_state = rewriter is not None and rewriter.find_spec(name, path) is not None
        spec.loader = self
        return spec

    def create_module(self, spec) -> None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        exec(self.code(Path(spec.origin), spec.loader_state), module.__dict__)

    def code(self, path: Path, rewrite: bool) -> CodeType:
        """The module's code, compiled again only when its source changed."""
        source = path.read_bytes()
        key = (str(path), rewrite)
        cached = self._codes.get(key)
        if cached is not None and cached[0] == source:
            return cached[1]
        tree = ast.parse(source, filename=str(path))
        if rewrite:  # exactly what pytest's hook does to a test module
            tree = rewritten(tree, source, path, self._rewriter)
        code = compile(tree, str(path), "exec", dont_inherit=True)
        self._codes[key] = (source, code)
        return code

    # ---- one grading -------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        """Go in front of every finder for this run (pytest's hook is in place by now)."""
        self.uninstall()
        self._rewriter = assertion_hook()
        sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        """Leave sys.meta_path as it was; safe to call twice."""
        while self in sys.meta_path:
            sys.meta_path.remove(self)
        self._rewriter = None
