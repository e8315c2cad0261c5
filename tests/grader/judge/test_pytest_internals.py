"""The private pytest names the judge drives its sessions with are still there, as used.

grader/judge/engine/pytest_private.py is the one module that uses them; when a pytest upgrade
moves or reshapes one, this test names it before any grading breaks in a stranger way.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from grader.judge.engine import PRIVATE_NAMES

# the parameters each private callable is called with (pytest_private.py)
PARAMETERS = {
    "_pytest.config._prepareconfig": ["args", "plugins"],
    "_pytest.config.Config._do_configure": ["self"],
    "_pytest.config.Config._ensure_unconfigure": ["self"],
    "_pytest.assertion.rewrite.rewrite_asserts": ["mod", "source", "module_path", "config"],
    "_pytest.assertion.rewrite.AssertionRewritingHook": None,  # a class: isinstance only
    "_pytest.runner.runtestprotocol": ["item", "log", "nextitem"],
    "_pytest.nodes.Item._report_sections": "attribute",  # set by Item.__init__
    "_pytest.main.Session._setupstate": ("set by", "_pytest.runner.pytest_sessionstart"),
    "_pytest.runner.SetupState.stack": "attribute",
    "_pytest.runner.SetupState.teardown_exact": ["self", "nextitem"],
    "_pytest.main.Session._shouldstop": "attribute",
    "_pytest.main.Session._shouldfail": "attribute",
}


def resolve(dotted: str) -> object:
    module_name, _, rest = dotted.partition(".")
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable prefix is the module
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(module_name + rest)


def test_every_private_name_is_checked():
    assert set(PRIVATE_NAMES) == set(PARAMETERS)


@pytest.mark.parametrize("dotted", PRIVATE_NAMES)
def test_a_private_pytest_name_is_still_there_with_the_parameters_used(dotted):
    expected = PARAMETERS[dotted]
    if isinstance(expected, tuple):  # an attribute another module's function sets
        owner, _, name = dotted.rpartition(".")
        setter = resolve(expected[1])
        assert f"session.{name} =" in inspect.getsource(setter), (
            f"pytest {pytest.__version__}: {expected[1]} no longer sets {owner}.{name}; "
            "adapt grader/judge/engine/pytest_private.py"
        )
        return
    if expected == "attribute":  # an instance attribute: its class's __init__ sets it
        owner, _, name = dotted.rpartition(".")
        assert f"self.{name}" in inspect.getsource(resolve(owner).__init__), (
            f"pytest {pytest.__version__}: {owner} no longer sets {name}; "
            "adapt grader/judge/engine/pytest_private.py"
        )
        return
    try:
        found = resolve(dotted)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"pytest {pytest.__version__} no longer has {dotted} ({error}); "
                    "adapt grader/judge/engine/pytest_private.py")  # fmt: skip
    if expected is None:
        assert inspect.isclass(found), f"{dotted} is no longer a class"
        return
    names = list(inspect.signature(found).parameters)[: len(expected)]
    assert names == expected, (
        f"pytest {pytest.__version__}: {dotted} takes {names}, the judge passes {expected}; "
        "adapt grader/judge/engine/pytest_private.py"
    )
