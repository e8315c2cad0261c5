"""The versioned report: one pydantic model for the CLI, the API and the web page.

Other tools rely on these exact names: `passed`, `score`, `max_score`, `tiers` (each with
`id`, `title`, `passed`, `score`, `max_score`, `tests`), and each test's `id`, `name`,
`outcome` and `message`. Add fields freely; rename none without bumping REPORT_VERSION.

Two kinds of failure are kept apart on purpose:
    submission_error  the student's code could not be graded normally (syntax error, missing
                      function, import-time exception, timeout, crash): gradable, explained;
    grader_error      our own fault (a bug, a broken install): never blamed on the student.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

# 2.0: generic toy artifacts (tables, plots, data), same_error_as; 3.0: no `metrics` (the
# grader's own counters are GradingStats, beside the report: grader/judge/stats.py)
REPORT_VERSION = "3.0"

Outcome = Literal["passed", "failed", "error", "skipped"]
Mode = Literal["run", "submit"]
SubmissionErrorKind = Literal[
    "syntax_error",
    "missing_function",
    "import_error",
    "timeout",
    "memory_limit",
    "crash",
]


class TestResult(BaseModel):
    """One pytest test of a tier."""

    __test__ = False  # not a pytest test class

    id: str  # stable pytest node id relative to the tiers folder
    name: str  # human-readable name (the test's docstring first line or its function name)
    outcome: Outcome
    message: str = ""  # what was expected and what came; empty when passed
    hidden: bool = False  # hidden tests run on Submit only and never reveal their inputs
    inputs: str | None = None  # for visible failed tests: the inputs of the failing call
    duration_s: float = 0.0
    # the id of an earlier test that failed with this very student error (type, message and
    # line): readers show the first in full and count the rest; each keeps its own outcome
    same_error_as: str | None = None


class TierResult(BaseModel):
    id: str  # "T0", "T1", ...
    title: str
    description: str = ""
    visibility: Literal["visible", "hidden", "mixed"] = "visible"
    passed: bool
    score: float
    max_score: float
    tests: list[TestResult] = Field(default_factory=list)


class SubmissionError(BaseModel):
    kind: SubmissionErrorKind
    message: str  # one plain sentence a student understands
    line: int | None = None  # 1-based line in the student's file, when known
    detail: str = ""  # the student's part of the traceback, or the caret excerpt


class GraderError(BaseModel):
    message: str  # says plainly that the fault is the grader's
    detail: str = ""


class TableRow(BaseModel):
    label: str
    cells: list[float | str | None]  # None: not a finite number
    muted: list[bool] = Field(default_factory=list)  # cells shown greyed (e.g. padding)


class Table(BaseModel):
    """A table of the toy's results, as the exercise's manifest declares it."""

    name: str
    title: str
    caption: str = ""
    columns: list[str] = Field(default_factory=list)
    rows: list[TableRow] = Field(default_factory=list)
    heatmap: bool = False  # colour the numbers on a diverging scale (e.g. a gradient matrix)


class Plot(BaseModel):
    """A plot the toy's data draws (the exercise's render_plots); where its image lives (a
    URL, a file) is said beside the report, by whoever drew it."""

    name: str
    title: str
    alt: str


class Artifacts(BaseModel):
    """The toy experiment (T3) as run through the student's code."""

    tables: list[Table] = Field(default_factory=list)
    plots: list[Plot] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)  # run_toy's result, JSON-ready, as shown

    @classmethod
    def of_toy(cls, exercise, toy: dict) -> Artifacts:
        """run_toy's result with the tables and plots `exercise`'s manifest declares, its
        numbers as shown (TOY_SIGNIFICANT_DIGITS); raises TypeError or ValueError when the
        toy broke its exercise's contract."""
        data = dict(toy)
        given = data.pop("tables", None) or {}
        tables = [
            Table(name=spec.name, title=spec.title, caption=spec.text, **given[spec.name])
            for spec in exercise.tables
            if spec.name in given
        ]
        plots = [Plot(name=p.name, title=p.title, alt=p.text) for p in exercise.plots]
        return cls(tables=tables, plots=plots, data=_as_shown(data))


# The toy's numbers as a report keeps them: 8 significant digits, more than a plot or the
# page shows (4 decimals below 1e4), and zero without a sign. Two correct solutions whose
# sums differ only in a float64's last bits, or in the sign of a zero gradient, then keep the
# same numbers, and the plots, which are keyed by these numbers (store.artifacts_key) and
# cost more CPU than the grading, are drawn once for both instead of once each.
TOY_SIGNIFICANT_DIGITS = 8


def _as_shown(value: Any) -> Any:
    """`value` with every float rounded to TOY_SIGNIFICANT_DIGITS and -0.0 made 0.0."""
    if isinstance(value, float):
        return float(f"{value:.{TOY_SIGNIFICANT_DIGITS}g}") + 0.0
    if isinstance(value, list | tuple):
        return [_as_shown(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_shown(v) for k, v in value.items()}
    return value


class Timings(BaseModel):
    total_s: float = 0.0
    sandbox_start_s: float = 0.0
    tests_s: float = 0.0


class Report(BaseModel):
    schema_version: str = REPORT_VERSION
    exercise: str = ""  # the exercise's id
    mode: Mode = "submit"
    submission: str | None = None  # a file name (CLI) or a submission id (service)
    passed: bool
    score: float
    max_score: float
    tiers: list[TierResult] = Field(default_factory=list)
    submission_error: SubmissionError | None = None
    grader_error: GraderError | None = None
    artifacts: Artifacts | None = None
    output: str = ""  # the student's captured stdout/stderr, truncated; never parsed
    output_truncated: bool = False
    isolation: str = ""  # the sandbox level this grading ran under
    timings: Timings = Field(default_factory=Timings)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @classmethod
    def from_json(cls, text: str | bytes) -> Report:
        """A stored report of any version: fields an older version had and this one dropped
        (2.0's `metrics`) are ignored; its schema_version says which it was."""
        return cls.model_validate_json(text)


def score_text(value: float) -> str:
    """A score as a person reads it: at most two decimals, no trailing zeros (45.43, 100).
    The report keeps the exact value."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def repeated_errors(report: Report) -> dict[str, list[TestResult]]:
    """For each test whose student error others repeat: those others (same_error_as)."""
    repeats: dict[str, list[TestResult]] = {}
    for tier in report.tiers:
        for test in tier.tests:
            if test.same_error_as is not None:
                repeats.setdefault(test.same_error_as, []).append(test)
    return repeats


def more_text(count: int) -> str:
    noun = "test" if count == 1 else "tests"
    return f"and {count} more {noun} failed with this same error"
