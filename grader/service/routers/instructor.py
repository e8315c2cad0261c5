"""Instructor endpoints: every submission, and a gradebook as CSV. Bearer-token protected;
they do not exist (404) when no token is configured."""

from __future__ import annotations

import csv
import io

from fastapi import APIRouter
from fastapi.responses import Response

from grader.service.deps import Instructor
from grader.service.schemas import InstructorItem, InstructorList
from grader.service.store import SubmissionSummary

router = APIRouter(prefix="/api/instructor", tags=["instructor"])

GRADEBOOK_COLUMNS = (
    "student",
    "submissions",
    "best_score",
    "max_score",
    "latest_score",
    "latest_passed",
    "latest_submission_id",
    "latest_at",
)


@router.get("/submissions", response_model=InstructorList)
def all_submissions(service: Instructor) -> InstructorList:
    """Every submission of every student, newest first."""
    items = [InstructorItem(**vars(s)) for s in service.store.list_submissions()]
    return InstructorList(submissions=items)


@router.get(
    "/gradebook.csv", response_class=Response, responses={200: {"content": {"text/csv": {}}}}
)
def gradebook(service: Instructor) -> Response:
    """One row per student: best and latest score."""
    headers = {"Content-Disposition": 'attachment; filename="gradebook.csv"'}
    text = gradebook_csv(service.store.list_submissions())
    return Response(text, media_type="text/csv; charset=utf-8", headers=headers)


def gradebook_csv(summaries: list[SubmissionSummary]) -> str:
    """`summaries` newest first, as the store lists them."""
    rows: dict[str, dict] = {}
    for s in summaries:
        row = rows.get(s.student)
        if row is None:  # the first seen is the latest
            row = rows[s.student] = {
                "student": s.student,
                "submissions": 0,
                "best_score": s.score,
                "max_score": s.max_score,
                "latest_score": s.score,
                "latest_passed": s.passed,
                "latest_submission_id": s.submission_id,
                "latest_at": s.created_at,
            }
        row["submissions"] += 1
        row["best_score"] = max(row["best_score"], s.score)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=GRADEBOOK_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(sorted(rows.values(), key=lambda r: r["student"]))
    return out.getvalue()
