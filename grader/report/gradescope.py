"""Write a Report as Gradescope's autograder `results.json`.

Each tier test becomes one Gradescope test worth its share of the tier's points (a tier of
30 points with 6 graded tests gives 5 points a test), so Gradescope's total equals ours.
Hidden tests are published with visibility "after_published": the student sees the verdict
once grades are released, never the inputs (our reports carry none for hidden tests).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.report.model import (
    Report,
    TestResult,
    TierResult,
    more_text,
    repeated_errors,
    score_text,
)

STATUS = {"passed": "passed", "failed": "failed", "error": "failed", "skipped": "passed"}


def gradescope_results(report: Report) -> dict[str, Any]:
    """The results.json object."""
    repeats = repeated_errors(report)
    tests = [_test(tier, test, repeats) for tier in report.tiers for test in tier.tests]
    return {
        "score": round(report.score, 2),
        "max_score": round(report.max_score, 2),
        "output": _summary(report),
        "stdout_visibility": "visible",
        "visibility": "visible",
        "tests": tests,
    }


def write_gradescope(report: Report, path: Path | str) -> None:
    Path(path).write_text(json.dumps(gradescope_results(report), indent=2), encoding="utf-8")


def _test(tier: TierResult, test: TestResult, repeats: dict[str, list[TestResult]]) -> dict:
    graded = [t for t in tier.tests if t.outcome != "skipped"]
    share = tier.max_score / len(graded) if graded else 0.0
    max_score = 0.0 if test.outcome == "skipped" else share
    output = test.message
    if test.same_error_as is not None:
        output = f"Failed with the same error as test {test.same_error_as}."
    elif test.inputs:
        output += f"\n\nInputs of the failing call:\n{test.inputs}"
    if repeats.get(test.id):
        output += f"\n\n{more_text(len(repeats[test.id]))}"
    return {
        "name": f"{tier.id} {tier.title}: {test.name}",
        "number": tier.id,
        "score": round(max_score if test.outcome == "passed" else 0.0, 2),
        "max_score": round(max_score, 2),
        "status": STATUS[test.outcome],
        "output": output,
        "visibility": "after_published" if test.hidden else "visible",
    }


def _summary(report: Report) -> str:
    """The top-level text: errors first, then the student's own printed output."""
    parts = []
    if report.submission_error is not None:
        error = report.submission_error
        where = f" (line {error.line})" if error.line else ""
        parts.append(f"Your submission could not be graded normally{where}: {error.message}")
        if error.detail:
            parts.append(error.detail)
    if report.grader_error is not None:
        parts.append(report.grader_error.message)
    parts.append(f"Score: {score_text(report.score)} / {score_text(report.max_score)}")
    if report.output:
        cut = " (truncated)" if report.output_truncated else ""
        parts.append(f"Output of your code{cut}:\n{report.output}")
    return "\n\n".join(parts)
