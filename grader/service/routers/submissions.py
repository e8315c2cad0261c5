"""GET /api/submissions: a student's history, and one stored submission with its report.

A submission belonging to someone else answers 404, exactly like an unknown id, so its
existence is not revealed.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request

from grader.report import Report
from grader.service.deps import Service, StudentKey, is_id, is_instructor, key_matches
from grader.service.routers.grading import plot_urls
from grader.service.schemas import SubmissionItem, SubmissionList, SubmissionView

router = APIRouter(prefix="/api/submissions", tags=["submissions"])


@router.get("", response_model=SubmissionList)
def list_submissions(
    student: Annotated[str, Query(min_length=1, max_length=64)],
    service: Service,
    x_student_key: StudentKey = None,
) -> SubmissionList:
    """The student's submissions, newest first."""
    key_hash = service.store.student_key_hash(student)
    if key_hash is None:
        raise HTTPException(404, f"No student is named {student!r}.")
    if not key_matches(x_student_key, key_hash):
        raise HTTPException(403, f"The student key for {student!r} is missing or wrong.")
    items = [
        SubmissionItem(
            submission_id=s.submission_id,
            created_at=s.created_at,
            passed=s.passed,
            score=s.score,
            max_score=s.max_score,
        )
        for s in service.store.list_submissions(student)
    ]
    return SubmissionList(student=student, submissions=items)


@router.get("/{submission_id}", response_model=SubmissionView)
def get_submission(
    submission_id: str,
    request: Request,
    service: Service,
    x_student_key: StudentKey = None,
) -> SubmissionView:
    """One submission, for its student (X-Student-Key) or the instructor (bearer token)."""
    unknown = HTTPException(404, "No submission with this id is visible to you.")
    record = service.store.get_submission(submission_id) if is_id(submission_id) else None
    if record is None:
        raise unknown
    if not is_instructor(request, service):
        key_hash = service.store.student_key_hash(record.student) or ""
        if not key_matches(x_student_key, key_hash):
            raise unknown
    report = Report.model_validate_json(record.report_json)
    return SubmissionView(
        submission_id=record.submission_id,
        report_id=record.report_id,
        student=record.student,
        report=report,
        plots=plot_urls(service, record.report_id, report),
    )
