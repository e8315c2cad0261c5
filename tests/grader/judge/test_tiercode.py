"""The tier folder's code is compiled once, but every grading runs its modules afresh."""

from __future__ import annotations

import importlib
import marshal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _pytest.assertion.rewrite import _rewrite_test

from grader.judge.engine import TierCode

MODULE = "tier_state_probe"


@pytest.fixture
def folder(tmp_path: Path):
    """A tier folder holding one module with module-level state, importable by name."""
    (tmp_path / f"{MODULE}.py").write_text("SEEN = []\n", encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.modules.pop(MODULE, None)


def import_fresh(finder: TierCode):
    """Import the probe through `finder` the way a grading does, then forget it."""
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module(MODULE)
    finally:
        sys.meta_path.remove(finder)
        sys.modules.pop(MODULE, None)


def test_each_grading_gets_new_module_state_from_the_same_code(folder):
    finder = TierCode(folder)
    first = import_fresh(finder)
    first.SEEN.append("a student's grading")
    second = import_fresh(finder)
    assert second is not first and second.SEEN == []
    assert second.__spec__.loader is finder and second.__file__ == str(folder / f"{MODULE}.py")
    assert finder.code(folder / f"{MODULE}.py", False) is finder.code(
        folder / f"{MODULE}.py", False
    )


def test_an_edited_module_is_compiled_again(folder):
    finder = TierCode(folder)
    assert import_fresh(finder).SEEN == []
    (folder / f"{MODULE}.py").write_text("SEEN = ['edited']\n", encoding="utf-8")
    assert import_fresh(finder).SEEN == ["edited"]


def test_modules_outside_the_folder_are_left_to_the_usual_finders(folder, tmp_path_factory):
    finder = TierCode(tmp_path_factory.mktemp("elsewhere"))
    assert finder.find_spec(MODULE) is None
    assert finder.find_spec("json") is None


def test_rewritten_code_is_what_pytest_itself_compiles(request):
    """Test modules get pytest's assertion rewriting, byte for byte."""
    path = Path(__file__).resolve().parents[2] / "tiers" / "test_t3_toy.py"
    finder = TierCode(path.parent)
    finder._rewriter = SimpleNamespace(config=request.config)
    _, expected = _rewrite_test(path, request.config)
    assert marshal.dumps(finder.code(path, True)) == marshal.dumps(expected)
