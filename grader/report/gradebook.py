"""The gradebooks, as CSV: every gradebook the grader writes is written here.

gradebook_csv(reports)         one row per graded Report (the CLI's `grade --csv`):
                               submission, passed, score, max_score, one column per tier id
                               (that tier's score), error (the submission error's kind and
                               message, or the grader error, or empty)
class_gradebook_csv(attempts)  one row per student and exercise (the instructor's
                               gradebook.csv): graded and ungradable counts, best and
                               latest score
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

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


# ---- the class gradebook: one row per student and exercise --------------------------------
CLASS_COLUMNS = (
    "student",
    "exercise",
    "submissions",
    "ungradable",
    "best_score",
    "max_score",
    "latest_score",
    "latest_passed",
    "latest_submission_id",
    "latest_at",
)


class Attempt(Protocol):
    """One stored submission as the class gradebook reads it (the service's store lists
    these). `status` is done, ungradable, queued or grading; only done ones have a score."""

    submission_id: str
    student: str
    exercise: str
    created_at: str
    status: str
    passed: bool | None
    score: float | None
    max_score: float | None


def class_gradebook_csv(attempts: Iterable[Attempt]) -> str:
    """`attempts` newest first. Best and latest count graded submissions only: an ungradable
    one (the grader's fault) is counted apart and never scores, and one still in flight is
    left out."""
    rows: dict[tuple[str, str], dict] = {}
    for a in attempts:
        if a.status not in ("done", "ungradable"):
            continue
        row = rows.setdefault((a.student, a.exercise), _empty_row(a.student, a.exercise))
        if a.status == "ungradable":
            row["ungradable"] += 1
            continue
        row["submissions"] += 1
        if row["latest_submission_id"] == "":  # the first graded one seen is the latest
            row |= {
                "latest_score": a.score,
                "latest_passed": a.passed,
                "latest_submission_id": a.submission_id,
                "latest_at": a.created_at,
                "max_score": a.max_score,
            }
        best = row["best_score"]
        row["best_score"] = a.score if best == "" else max(best, a.score)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CLASS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: score_text(v) if k.endswith("_score") and isinstance(v, float | int)
                      else v for k, v in rows[key].items()} for key in sorted(rows))  # fmt: skip
    return out.getvalue()


def _empty_row(student: str, exercise: str) -> dict:
    row = dict.fromkeys(CLASS_COLUMNS, "")
    return row | {"student": student, "exercise": exercise, "submissions": 0, "ungradable": 0}
