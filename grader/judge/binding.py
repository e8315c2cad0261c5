"""Bind collected tier tests to declared tiers, and choose which of them a grading runs.

Every test under tests/tiers must carry `@pytest.mark.tier("<id>")` with a declared id; a
mistake there is the instructor's and stops the run at collection with a message that names
the test, the tier it asked for and the tiers that exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.judge.registry import Tier


@dataclass(frozen=True)
class Binding:
    """Where one collected test belongs."""

    tier: Tier
    hidden: bool  # the test or its whole tier is Submit-only
    id: str  # node id relative to the tiers folder
    name: str


def is_tier_item(item: pytest.Item, tiers_dir: Path) -> bool:
    """A test belongs to the exercise when it lives under tests/tiers or carries a tier."""
    return item.get_closest_marker("tier") is not None or item.path.is_relative_to(tiers_dir)


def bind(item: pytest.Item, tiers: list[Tier], tiers_dir: Path) -> Binding:
    """The tier of one test; pytest.UsageError when it has none or an undeclared one."""
    declared = {tier.id: tier for tier in tiers}
    names = ", ".join(declared)
    marker = item.get_closest_marker("tier")
    if marker is None or not marker.args:
        raise pytest.UsageError(
            f"{item.nodeid}: no tier marker; add @pytest.mark.tier(...) with one of: {names}"
        )
    tier_id = marker.args[0]
    if tier_id not in declared:
        raise pytest.UsageError(
            f"{item.nodeid}: unknown tier {tier_id!r} in @pytest.mark.tier; "
            f"declared in tiers.toml: {names}"
        )
    tier = declared[tier_id]
    hidden = tier.hidden or item.get_closest_marker("hidden") is not None
    return Binding(tier=tier, hidden=hidden, id=relative_id(item, tiers_dir), name=test_name(item))


def relative_id(item: pytest.Item, tiers_dir: Path) -> str:
    """A node id that does not depend on where pytest's rootdir happens to be."""
    _, sep, rest = item.nodeid.partition("::")
    path = item.path
    where = path.relative_to(tiers_dir).as_posix() if path.is_relative_to(tiers_dir) else path.name
    return f"{where}{sep}{rest}"


def test_name(item: pytest.Item) -> str:
    """The first docstring line of the test function, or its name; parameters in brackets."""
    function = getattr(item, "function", None)
    doc = (getattr(function, "__doc__", None) or "").strip()
    base = doc.splitlines()[0].strip() if doc else getattr(item, "originalname", item.name)
    callspec = getattr(item, "callspec", None)
    return f"{base} [{callspec.id}]" if callspec is not None else base


test_name.__test__ = False  # a helper, not a pytest test


def selected(binding: Binding, mode: str, wanted: list[str] | None) -> bool:
    """Run mode keeps hidden tests and tiers out; a tier list keeps only those tiers."""
    if mode == "run" and binding.hidden:
        return False
    return wanted is None or binding.tier.id in wanted


def unused_tiers(tiers: list[Tier], bindings: list[Binding]) -> list[Tier]:
    used = {binding.tier.id for binding in bindings}
    return [tier for tier in tiers if tier.id not in used]
