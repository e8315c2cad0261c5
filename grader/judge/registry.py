"""The tier registry: which tiers exist, what they are worth, who may see them.

Tiers are declared in tests/tiers/tiers.toml, one `[[tier]]` table each:

    [[tier]]
    id = "T0"
    title = "Contract"
    description = "One line a student understands."
    points = 10
    visibility = "visible"   # visible: Run and Submit; hidden: Submit only
    order = 0

Tests bind to a tier with `@pytest.mark.tier("T0")`. Adding a tier is declaring it here and
writing a test file; no grader code changes. Mistakes in the file are reported with the file,
the tier and the field, because an instructor, not a programmer of the grader, will read them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Visibility = Literal["visible", "hidden"]
VISIBILITIES = ("visible", "hidden")
FIELDS = ("id", "title", "description", "points", "visibility", "order")


class TierRegistryError(ValueError):
    """tiers.toml is missing, unreadable or declares something invalid."""


@dataclass(frozen=True)
class Tier:
    """One declared tier."""

    id: str
    title: str
    description: str
    points: float
    visibility: Visibility
    order: int

    @property
    def hidden(self) -> bool:
        return self.visibility == "hidden"


def load_tiers(path: Path | str) -> list[Tier]:
    """Read and validate tiers.toml; return the tiers sorted by `order` (then id)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TierRegistryError(f"{path}: no such file; declare the tiers there") from None
    except tomllib.TOMLDecodeError as error:
        raise TierRegistryError(f"{path}: not valid TOML: {error}") from None
    tables = data.get("tier")
    if not isinstance(tables, list) or not tables:
        raise TierRegistryError(f"{path}: declares no tier; add [[tier]] tables")
    tiers = [_parse_tier(path, index, table) for index, table in enumerate(tables)]
    _check_unique(path, tiers)
    return sorted(tiers, key=lambda tier: (tier.order, tier.id))


def _parse_tier(path: Path, index: int, table: object) -> Tier:
    """Validate one [[tier]] table; errors name the file, the tier and the field."""
    where = f"{path}: tier #{index + 1}"
    if not isinstance(table, dict):
        raise TierRegistryError(f"{where} is not a table")
    if isinstance(table.get("id"), str):
        where = f"{path}: tier {table['id']!r}"
    missing = [name for name in FIELDS if name not in table]
    if missing:
        raise TierRegistryError(f"{where} is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise TierRegistryError(f"{where} has unknown field(s): {', '.join(unknown)}")
    for name in ("id", "title", "description"):
        if not isinstance(table[name], str) or (name != "description" and not table[name]):
            raise TierRegistryError(f"{where}: {name} must be a non-empty string")
    points = table["points"]
    if isinstance(points, bool) or not isinstance(points, int | float) or points < 0:
        raise TierRegistryError(f"{where}: points must be a number >= 0; got {points!r}")
    if table["visibility"] not in VISIBILITIES:
        raise TierRegistryError(
            f"{where}: visibility must be 'visible' or 'hidden'; got {table['visibility']!r}"
        )
    if isinstance(table["order"], bool) or not isinstance(table["order"], int):
        raise TierRegistryError(f"{where}: order must be an integer; got {table['order']!r}")
    return Tier(
        id=table["id"],
        title=table["title"],
        description=table["description"],
        points=float(points),
        visibility=table["visibility"],
        order=table["order"],
    )


def _check_unique(path: Path, tiers: list[Tier]) -> None:
    seen: set[str] = set()
    for tier in tiers:
        if tier.id in seen:
            raise TierRegistryError(f"{path}: tier id {tier.id!r} is declared twice")
        seen.add(tier.id)


def parse_tier_list(text: str | None, tiers: list[Tier]) -> list[str] | None:
    """Turn "T0,T2" into ["T0", "T2"], refusing ids that are not declared."""
    if text is None or not text.strip():
        return None
    wanted = [part.strip() for part in text.split(",") if part.strip()]
    declared = [tier.id for tier in tiers]
    unknown = [tier_id for tier_id in wanted if tier_id not in declared]
    if unknown:
        raise TierRegistryError(
            f"unknown tier(s) {', '.join(unknown)}; declared: {', '.join(declared)}"
        )
    return wanted


def runs(tier: Tier, hidden_test: bool, mode: str, wanted: list[str] | None) -> bool:
    """Whether a grading in `mode` runs a test of `tier`: Run leaves hidden tests and hidden
    tiers out; a tier list keeps only those tiers. The one tier selector of the grader."""
    if mode == "run" and (tier.hidden or hidden_test):
        return False
    return wanted is None or tier.id in wanted
