"""The tier tests of one grading: each bound to its tier, selected, given its verdict, scored.

While pytest collects, every test is bound to its declared tier (`bind`), in the ledger of
the session; each grading of that session works on a `fresh` copy of it. Once the request
is known, the tests that mode and tier list select are kept (`select`); while they run,
each phase's verdict is recorded (`record`); at the end they are scored per tier (`results`).

Scoring: a tier scores points * passed / graded, where graded counts the tier's selected
tests that were not skipped. A tier passes when none of its tests failed or errored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from grader.judge.engine.recording import RecordedCall
from grader.judge.engine.verdicts import TestVerdict, hit_a_limit
from grader.judge.link import GradingRequest
from grader.judge.registry import Tier, runs
from grader.report import TestResult, TierResult


@dataclass
class TestRecord:
    """What the judge learnt about one tier test."""

    __test__ = False  # not a pytest test class

    tier: Tier
    id: str  # node id relative to the tiers folder
    name: str
    hidden: bool  # the test or its whole tier is Submit-only
    outcome: str = "passed"
    message: str = ""
    inputs: str | None = None
    duration_s: float = 0.0
    same_as: tuple | None = None  # the identity of the student error it failed with


class TestLedger:
    """Every tier test of one grading, by pytest node id."""

    __test__ = False  # not a pytest test class

    def __init__(self, tiers: list[Tier], tiers_dir: Path) -> None:
        self.tiers, self.tiers_dir = tiers, tiers_dir
        self.records: dict[str, TestRecord] = {}
        self.problems: list[str] = []  # collection errors: the grader's
        self.grader_problems: list[str] = []  # tests that the grader's own code broke
        self.student_event: BaseException | None = None  # the first limit hit or crash

    def fresh(self) -> TestLedger:
        """A ledger for the next grading of the same collected session: the same tests
        bound and the same collection problems, nothing selected or judged yet."""
        ledger = TestLedger(self.tiers, self.tiers_dir)
        ledger.records = {nodeid: replace(record) for nodeid, record in self.records.items()}
        ledger.problems = list(self.problems)
        return ledger

    def bind(self, items: list[pytest.Item]) -> None:
        """Bind every collected test to its declared tier; pytest.UsageError names a test
        without a tier marker or with an undeclared one (the instructor's mistake)."""
        declared = {tier.id: tier for tier in self.tiers}
        names = ", ".join(declared)
        for item in items:
            marker = item.get_closest_marker("tier")
            if marker is None or not marker.args:
                raise pytest.UsageError(
                    f"{item.nodeid}: no tier marker; add @pytest.mark.tier(...) with one of: "
                    f"{names}"
                )
            tier = declared.get(marker.args[0])
            if tier is None:
                raise pytest.UsageError(
                    f"{item.nodeid}: unknown tier {marker.args[0]!r} in @pytest.mark.tier; "
                    f"declared in tiers.toml: {names}"
                )
            hidden = tier.hidden or item.get_closest_marker("hidden") is not None
            test_id = _relative_id(item, self.tiers_dir)
            self.records[item.nodeid] = TestRecord(tier, test_id, _test_name(item), hidden)

    def select(
        self, request: GradingRequest, items: list[pytest.Item]
    ) -> tuple[list[pytest.Item], list[pytest.Item]]:
        """(tests `request` runs, tests it leaves out); the left out are forgotten."""
        keep, drop = [], []
        for item in items:
            record = self.records[item.nodeid]
            selected = runs(record.tier, record.hidden, request.mode, request.wanted)
            (keep if selected else drop).append(item)
        for item in drop:
            del self.records[item.nodeid]
        return keep, drop

    def record(
        self, nodeid: str, verdict: TestVerdict, duration_s: float, call: RecordedCall | None
    ) -> None:
        """A phase's verdict; the first failure of a test is the one that counts, shown
        with the inputs of `call`, the test's last student call (a visible test's only)."""
        record = self.records.get(nodeid)
        if record is None:
            return
        record.duration_s += duration_s
        if verdict.outcome == "passed" or record.outcome != "passed":
            return
        record.outcome, record.message = verdict.outcome, verdict.message
        record.same_as = verdict.same_as
        if verdict.blame == "grader":
            self.grader_problems.append(f"{record.id}: {verdict.message}")
        if hit_a_limit(verdict.student_error) and self.student_event is None:
            self.student_event = verdict.student_error
        if verdict.outcome in ("failed", "error") and not record.hidden and call is not None:
            record.inputs = call.describe()

    def results(self) -> list[TierResult]:
        return tier_results(self.tiers, list(self.records.values()))


def tier_results(tiers: list[Tier], records: list[TestRecord]) -> list[TierResult]:
    """One scored result per tier that has selected tests, in the registry's order; a test
    that failed with the student error of an earlier one points to it (same_error_as)."""
    first_with: dict[tuple, str] = {}  # student error -> the first test that failed with it
    results = []
    for tier in tiers:
        mine = [record for record in records if record.tier.id == tier.id]
        if mine:
            tests = [_test_result(record, first_with) for record in mine]
            results.append(_tier_result(tier, mine, tests))
    return results


def _test_result(record: TestRecord, first_with: dict[tuple, str]) -> TestResult:
    same_as = None
    if record.outcome == "failed" and record.same_as is not None:
        same_as = first_with.setdefault(record.same_as, record.id)
        same_as = None if same_as == record.id else same_as
    visible_failure = not record.hidden and record.outcome in ("failed", "error")
    return TestResult(
        id=record.id,
        name=record.name,
        outcome=record.outcome,
        message="" if record.outcome == "passed" else record.message,
        hidden=record.hidden,
        inputs=record.inputs if visible_failure else None,
        duration_s=round(record.duration_s, 6),
        same_error_as=same_as,
    )


def _tier_result(tier: Tier, records: list[TestRecord], tests: list[TestResult]) -> TierResult:
    graded = [record for record in records if record.outcome != "skipped"]
    passed = [record for record in graded if record.outcome == "passed"]
    score = tier.points * len(passed) / len(graded) if graded else 0.0
    visibility = "hidden" if tier.hidden else "mixed" if any(r.hidden for r in records) else None
    return TierResult(
        id=tier.id,
        title=tier.title,
        description=tier.description,
        visibility=visibility or "visible",
        passed=len(passed) == len(graded),
        score=score,
        max_score=tier.points,
        tests=tests,
    )


def _relative_id(item: pytest.Item, tiers_dir: Path) -> str:
    """A node id that does not depend on where pytest's rootdir happens to be."""
    _, sep, rest = item.nodeid.partition("::")
    path = item.path
    where = path.relative_to(tiers_dir).as_posix() if path.is_relative_to(tiers_dir) else path.name
    return f"{where}{sep}{rest}"


def _test_name(item: pytest.Item) -> str:
    """The first docstring line of the test function, or its name; parameters in brackets."""
    function = getattr(item, "function", None)
    doc = (getattr(function, "__doc__", None) or "").strip()
    base = doc.splitlines()[0].strip() if doc else getattr(item, "originalname", item.name)
    callspec = getattr(item, "callspec", None)
    return f"{base} [{callspec.id}]" if callspec is not None else base
