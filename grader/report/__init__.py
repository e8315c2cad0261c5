"""The report every front end shows, and its writers."""

from grader.report.gradebook import class_gradebook_csv, gradebook_csv, write_gradebook
from grader.report.gradescope import gradescope_results, write_gradescope
from grader.report.junit import junit_xml, write_junit
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
from grader.report.text import render_text, use_colour
