"""Write many Reports as one CSV gradebook row each.

Columns: submission, passed, score, max_score, one per tier id (that tier's score), error
(the submission error's kind and message, or the grader error, or empty).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from grader.report.model import Report, score_text


def tier_columns(reports: Iterable[Report]) -> list[str]:
    """Tier ids in the order they first appear."""
    ids: list[str] = []
    for report in reports:
        ids += [tier.id for tier in report.tiers if tier.id not in ids]
    return ids


def error_text(report: Report) -> str:
    if report.submission_error is not None:
        return f"{report.submission_error.kind}: {report.submission_error.message}"
    if report.grader_error is not None:
        return f"grader_error: {report.grader_error.message}"
    return ""


def gradebook_csv(reports: list[Report], tiers: list[str] | None = None) -> str:
    tiers = tiers if tiers is not None else tier_columns(reports)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["submission", "passed", "score", "max_score", *tiers, "error"])
    for report in reports:
        scores = {tier.id: score_text(tier.score) for tier in report.tiers}
        writer.writerow(
            [
                report.submission or "",
                "true" if report.passed else "false",
                score_text(report.score),
                score_text(report.max_score),
                *(scores.get(tier_id, "") for tier_id in tiers),
                error_text(report),
            ]
        )
    return out.getvalue()


def write_gradebook(reports: list[Report], path: Path | str) -> None:
    Path(path).write_text(gradebook_csv(reports), encoding="utf-8", newline="")
