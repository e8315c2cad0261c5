"""The tier registry reads tiers.toml and explains every mistake in it."""

from __future__ import annotations

import pytest

from grader.exercise import REPO_ROOT
from grader.judge import TierRegistryError, load_tiers, parse_tier_list

TIER = """
[[tier]]
id = "{id}"
title = "Title {id}"
description = "What {id} checks."
points = {points}
visibility = "{visibility}"
order = {order}
"""


def write(tmp_path, *tables: str):
    path = tmp_path / "tiers.toml"
    path.write_text("".join(tables), encoding="utf-8")
    return path


def tier(id="T0", points=10, visibility="visible", order=0):
    return TIER.format(id=id, points=points, visibility=visibility, order=order)


def test_loads_and_sorts_by_order(tmp_path):
    path = write(tmp_path, tier("T1", order=1), tier("T0", 5, "hidden", 0))
    tiers = load_tiers(path)
    assert [t.id for t in tiers] == ["T0", "T1"]
    assert tiers[0].points == 5.0 and tiers[0].hidden and not tiers[1].hidden
    assert tiers[1].title == "Title T1" and tiers[1].description == "What T1 checks."


def test_the_exercise_registry_loads():
    tiers = load_tiers(REPO_ROOT / "tests" / "tiers" / "tiers.toml")
    assert [t.id for t in tiers][:4] == ["T0", "T1", "T2", "T3"]
    assert sum(t.points for t in tiers) > 0


@pytest.mark.parametrize(
    ("tables", "words"),
    [
        ((tier("T0"), tier("T0", order=1)), ["'T0'", "declared twice"]),
        ((tier("T0", visibility="secret"),), ["'T0'", "visibility", "'secret'"]),
        ((tier("T0", points='"ten"'),), ["'T0'", "points", "'ten'"]),
        ((tier("T0", points=-1),), ["points", "-1"]),
        ((tier("T0").replace("order = 0\n", ""),), ["'T0'", "missing", "order"]),
        ((tier("T0") + 'colour = "red"\n',), ["'T0'", "unknown", "colour"]),
        ((tier("T0").replace('title = "Title T0"', 'title = ""'),), ["'T0'", "title"]),
        (("[[tier]\nid=",), ["not valid TOML"]),
        (("",), ["declares no tier"]),
    ],
)
def test_mistakes_are_named(tmp_path, tables, words):
    with pytest.raises(TierRegistryError) as error:
        load_tiers(write(tmp_path, *tables))
    for word in words:
        assert word in str(error.value), str(error.value)
    assert str(tmp_path / "tiers.toml") in str(error.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(TierRegistryError, match="no such file"):
        load_tiers(tmp_path / "nope.toml")


def test_tier_list_accepts_declared_ids_and_refuses_others(tmp_path):
    tiers = load_tiers(write(tmp_path, tier("T0"), tier("T1", order=1)))
    assert parse_tier_list(None, tiers) is None
    assert parse_tier_list(" T1, T0 ", tiers) == ["T1", "T0"]
    with pytest.raises(TierRegistryError, match=r"unknown tier\(s\) T9; declared: T0, T1"):
        parse_tier_list("T0,T9", tiers)
