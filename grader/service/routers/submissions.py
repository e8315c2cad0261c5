"""GET /api/submissions: a student's history, one submission with its current grading's
status and report, and GET /api/submissions/{id}/gradings: every grading of it.

A submission belonging to someone else answers 404, exactly like an unknown id, and a
history asked for with a wrong key answers 403, exactly like an unknown name: neither
submissions nor names can be enumerated.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request

from grader.service.credits import credited_rows
from grader.service.deps import Service, StudentKey, is_id, is_instructor, key_matches
from grader.service.schemas import (
    GradingList,
    StudentName,
    SubmissionItem,
    SubmissionList,
    SubmissionView,
)
from grader.service.state import ServiceState
from grader.service.views import grading_items, view_of
from grader.store import GradedSubmission

router = APIRouter(prefix="/api/submissions", tags=["submissions"])


@router.get("", response_model=SubmissionList)
async def list_submissions(
    student: Annotated[StudentName, Query()],
    service: Service,
    exercise: Annotated[str | None, Query(description="Only this exercise's.")] = None,
    x_student_key: StudentKey = None,
) -> SubmissionList:
    """The student's submissions, newest first."""
    key_hash = await asyncio.to_thread(service.store.student_key_hash, student)
    if not key_matches(x_student_key, key_hash or ""):  # one answer: no names to enumerate
        raise HTTPException(403, "No student has this name and key (X-Student-Key).")
    found = await asyncio.to_thread(service.store.list_submissions, student, exercise)
    rows = await asyncio.to_thread(credited_rows, service.store, found)
    items = [SubmissionItem.model_validate(row) for row in rows]
    return SubmissionList(student=student, submissions=items)


@router.get("/{submission_id}", response_model=SubmissionView)
async def get_submission(
    submission_id: str, request: Request, service: Service, x_student_key: StudentKey = None
) -> SubmissionView:
    """One submission, for its student (X-Student-Key) or the instructor (bearer token)."""
    found = await visible(submission_id, request, service, x_student_key)
    return await view_of(service, found)


@router.get("/{submission_id}/gradings", response_model=GradingList)
async def gradings(
    submission_id: str, request: Request, service: Service, x_student_key: StudentKey = None
) -> GradingList:
    """Every grading of a submission, oldest first (a regrade adds one)."""
    await visible(submission_id, request, service, x_student_key)
    found = await asyncio.to_thread(service.store.gradings_of, submission_id)
    return GradingList(submission_id=submission_id, gradings=grading_items(found))


async def visible(
    submission_id: str, request: Request, service: ServiceState, key: str | None
) -> GradedSubmission:
    """The submission, if the request may see it; 404 otherwise, as for an unknown id."""
    unknown = HTTPException(404, "No submission with this id is visible to you.")
    get = service.store.get
    found = await asyncio.to_thread(get, submission_id) if is_id(submission_id) else None
    if found is None or found.submission.kind != "submit":
        raise unknown
    if not is_instructor(request, service):
        key_hash = await asyncio.to_thread(service.store.student_key_hash, found.submission.student)
        if not key_matches(key, key_hash or ""):
            raise unknown
    return found
