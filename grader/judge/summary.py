"""Fold per-test outcomes into tier results and a score.

Scoring: a tier scores points * passed / graded, where graded counts the tier's selected tests
that were not skipped. A tier passes when none of its tests failed or errored. The whole
grading passes when every tier passed and there is no submission error.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.judge.registry import Tier
from grader.report import TestResult, TierResult


@dataclass
class TestRecord:
    """What the judge learnt about one selected tier test."""

    __test__ = False  # not a pytest test class

    tier_id: str
    id: str
    name: str
    hidden: bool
    outcome: str = "passed"
    message: str = ""
    inputs: str | None = None
    duration_s: float = 0.0

    def result(self) -> TestResult:
        visible_failure = not self.hidden and self.outcome in ("failed", "error")
        return TestResult(
            id=self.id,
            name=self.name,
            outcome=self.outcome,
            message="" if self.outcome == "passed" else self.message,
            hidden=self.hidden,
            inputs=self.inputs if visible_failure else None,
            duration_s=round(self.duration_s, 6),
        )


def tier_result(tier: Tier, records: list[TestRecord]) -> TierResult:
    """Score one tier from the records of its selected tests."""
    graded = [record for record in records if record.outcome != "skipped"]
    passed = [record for record in graded if record.outcome == "passed"]
    score = tier.points * len(passed) / len(graded) if graded else 0.0
    some_hidden = any(record.hidden for record in records)
    visibility = "hidden" if tier.hidden else "mixed" if some_hidden else "visible"
    return TierResult(
        id=tier.id,
        title=tier.title,
        description=tier.description,
        visibility=visibility,
        passed=len(passed) == len(graded),
        score=round(score, 4),
        max_score=tier.points,
        tests=[record.result() for record in records],
    )


def tier_results(tiers: list[Tier], records: list[TestRecord]) -> list[TierResult]:
    """One result per tier that has selected tests, in the registry's order."""
    results = []
    for tier in tiers:
        mine = [record for record in records if record.tier_id == tier.id]
        if mine:
            results.append(tier_result(tier, mine))
    return results
