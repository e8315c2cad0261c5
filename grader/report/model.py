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
from typing import Literal

from pydantic import BaseModel, Field

REPORT_VERSION = "1.0"

Outcome = Literal["passed", "failed", "error", "skipped"]
Mode = Literal["run", "submit"]
SubmissionErrorKind = Literal[
    "syntax_error",
    "missing_function",
    "import_error",
    "timeout",
    "memory_limit",
    "crash",
    "output_limit",
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


class Artifacts(BaseModel):
    """The toy experiment (T3) as run through the student's code."""

    ratios: list[float | None] = Field(default_factory=list)  # [3]
    loss: float | None = None
    grad_matrix: list[list[float | None]] = Field(default_factory=list)  # [3, L]
    mask: list[list[int]] = Field(default_factory=list)  # [3, L], which cells are valid tokens
    row_labels: list[str] = Field(default_factory=list)
    curves: dict[str, list[float | None]] = Field(default_factory=dict)
    checks: dict[str, bool] = Field(default_factory=dict)
    plots: dict[str, str] = Field(default_factory=dict)  # plot name -> URL or file path


class Timings(BaseModel):
    total_s: float = 0.0
    sandbox_start_s: float = 0.0
    tests_s: float = 0.0


class Report(BaseModel):
    schema_version: str = REPORT_VERSION
    exercise: str = "gspo"
    mode: Mode = "submit"
    submission: str | None = None  # a file name (CLI) or a submission id (service)
    passed: bool
    score: float
    max_score: float
    tiers: list[TierResult] = Field(default_factory=list)
    submission_error: SubmissionError | None = None
    grader_error: GraderError | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    artifacts: Artifacts | None = None
    output: str = ""  # the student's captured stdout/stderr, truncated; never parsed
    output_truncated: bool = False
    isolation: str = ""  # the sandbox level this grading ran under
    timings: Timings = Field(default_factory=Timings)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
