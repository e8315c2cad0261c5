"""TierState: every way a grading can leave state in a collected session changes the
fingerprint; a grading that leaves none does not."""

from __future__ import annotations

import textwrap
import types
from pathlib import Path

import pytest

from grader.judge.engine import TierState

TIER_MODULE = """
import collections
import functools

import pytest
import torch

pytestmark = pytest.mark.tier("T0")
CASES = (0.5, 1.0, 2.0)
SEEN = []
BY_KEY = {"rows": []}
WEIGHTS = torch.ones(3)
LEAF = torch.ones(2, requires_grad=True)
GENERATOR = torch.Generator().manual_seed(0)
RECENT = collections.deque(maxlen=4)
COUNT = 0


class Holder:
    items = []


class Case:
    def __init__(self):
        self.result = None


CASE = Case()


@functools.cache
def expensive(x):
    return x * 2


def remember(x, memo={}):
    memo[x] = x
    return x


def counter():
    state = {"n": 0}

    def step():
        state["n"] += 1
        return state["n"]

    return step


STEP = counter()


@pytest.fixture
def batch():
    return torch.zeros(2)


def test_uses_constants_only(batch):
    assert CASES[0] * 2 == 1.0
"""


@pytest.fixture
def tier(tmp_path: Path):
    """A tier folder with one module holding every kind of state, executed as a module."""
    (tmp_path / "test_state.py").write_text(textwrap.dedent(TIER_MODULE), encoding="utf-8")
    module = types.ModuleType("test_state")
    module.__file__ = str(tmp_path / "test_state.py")
    exec(compile(TIER_MODULE, module.__file__, "exec"), module.__dict__)
    return tmp_path, module


def state(tier, items=()) -> TierState:
    folder, module = tier
    return TierState.of(folder, [module], list(items))


def test_reading_the_state_twice_and_calling_constant_code_changes_nothing(tier):
    before = state(tier)
    _, module = tier
    module.test_uses_constants_only(module.torch.zeros(2))
    _ = (module.CASES, module.WEIGHTS + 1, module.LEAF * 2)  # reads, and out-of-place ops
    assert state(tier) == before


MUTATIONS = {
    "a module list grows": lambda m: m.SEEN.append("student A"),
    "a nested list grows": lambda m: m.BY_KEY["rows"].append(1),
    "a global is rebound": lambda m: setattr(m, "COUNT", m.COUNT + 1),
    "a new global appears": lambda m: setattr(m, "LAST", object()),
    "a tensor changes in place": lambda m: m.WEIGHTS.mul_(2),
    "a gradient accumulates": lambda m: (m.LEAF * 3).sum().backward(),
    "a generator draws": lambda m: m.torch.rand(1, generator=m.GENERATOR),
    "a deque takes an item": lambda m: m.RECENT.append(1),
    "a class attribute grows": lambda m: m.Holder.items.append(1),
    "an object's attribute is set": lambda m: setattr(m.CASE, "result", 0.5),
    "a functools cache fills": lambda m: m.expensive(3),
    "a mutable default fills": lambda m: m.remember(3),
    "a closure's state changes": lambda m: m.STEP(),
}


@pytest.mark.parametrize("change", MUTATIONS, ids=list(MUTATIONS))
def test_every_kind_of_state_a_grading_leaves_is_seen(tier, change):
    before = state(tier)
    MUTATIONS[change](tier[1])
    assert state(tier) != before, change


def test_a_parametrized_value_and_a_test_instance_are_seen(tier):
    value, instance = [], types.SimpleNamespace()
    items = [
        types.SimpleNamespace(nodeid="t::a", callspec=types.SimpleNamespace(params={"x": value})),
        types.SimpleNamespace(nodeid="T::b", instance=instance),
    ]
    before = state(tier, items)
    value.append("from a grading")
    after_param = state(tier, items)
    instance.seen = True
    assert before != after_param != state(tier, items)


def test_an_edited_tier_file_is_seen(tier):
    folder, _ = tier
    before = state(tier)
    path = folder / "test_state.py"
    path.write_text(path.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert state(tier) != before
    edited = state(tier)
    (folder / "test_new.py").write_text("", encoding="utf-8")
    assert state(tier) != edited
    (folder / "more").mkdir()
    added = state(tier)
    (folder / "more" / "test_deeper.py").write_text("", encoding="utf-8")
    assert state(tier) != added
