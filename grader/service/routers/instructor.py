"""Instructor endpoints: every submission, one with its code, and the class gradebook as CSV
(written by grader/report/gradebook.py, like every gradebook). Bearer-token protected; they do not
exist (404) when no token is configured. Both can be narrowed to one exercise."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response

from grader.report import class_gradebook_csv
from grader.service.credits import credited_rows, gradebook_rows
from grader.service.deps import Instructor, is_id
from grader.service.schemas import InstructorItem, InstructorList, InstructorSubmission
from grader.service.views import view_of

router = APIRouter(prefix="/api/instructor", tags=["instructor"])

ExerciseFilter = Annotated[str | None, Query(description="Only this exercise's.")]


@router.get("/submissions", response_model=InstructorList)
async def all_submissions(service: Instructor, exercise: ExerciseFilter = None) -> InstructorList:
    """Every submission of every student, newest first."""
    found = await asyncio.to_thread(service.store.list_submissions, None, exercise)
    rows = await asyncio.to_thread(credited_rows, service.store, found)
    items = [InstructorItem.model_validate(row) for row in rows]
    return InstructorList(submissions=items)


@router.get("/submissions/{submission_id}", response_model=InstructorSubmission)
async def submission_with_code(submission_id: str, service: Instructor) -> InstructorSubmission:
    """One submission with its code (for the instructor's view and regrade scripts)."""
    get = service.store.get
    found = await asyncio.to_thread(get, submission_id) if is_id(submission_id) else None
    if found is None or found.submission.kind != "submit":
        raise HTTPException(404, f"There is no submission {submission_id!r}.")
    view = await view_of(service, found)
    return InstructorSubmission(**view.model_dump(), code=found.submission.code)


@router.get(
    "/gradebook.csv", response_class=Response, responses={200: {"content": {"text/csv": {}}}}
)
async def gradebook(service: Instructor, exercise: ExerciseFilter = None) -> Response:
    """One row per student and exercise: best and latest credited score (practice Submits
    are left out)."""
    headers = {"Content-Disposition": 'attachment; filename="gradebook.csv"'}
    found = await asyncio.to_thread(service.store.list_submissions, None, exercise)
    rows = await asyncio.to_thread(credited_rows, service.store, found)
    text = class_gradebook_csv(gradebook_rows(rows))
    return Response(text, media_type="text/csv; charset=utf-8", headers=headers)
