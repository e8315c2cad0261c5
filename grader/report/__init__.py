"""The report every front end shows, and its writers."""

from grader.report.model import (
    REPORT_VERSION,
    Artifacts,
    GraderError,
    Plot,
    Report,
    SubmissionError,
    Table,
    TableRow,
    TestResult,
    TierResult,
    Timings,
    score_text,
)
