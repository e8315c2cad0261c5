"""The report every front end shows, and its writers."""

from grader.report.model import (
    REPORT_VERSION,
    Artifacts,
    GraderError,
    Report,
    SubmissionError,
    TestResult,
    TierResult,
    Timings,
)

__all__ = [
    "REPORT_VERSION",
    "Artifacts",
    "GraderError",
    "Report",
    "SubmissionError",
    "TestResult",
    "TierResult",
    "Timings",
]
