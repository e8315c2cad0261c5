"""Instructor endpoints: every submission, and the class gradebook as CSV (written by
grader/report/gradebook.py, like every gradebook). Bearer-token protected; they do not
exist (404) when no token is configured. Both can be narrowed to one exercise."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from grader.report.gradebook import class_gradebook_csv
from grader.service.credits import credited_rows, gradebook_rows
from grader.service.deps import Instructor
from grader.service.schemas import InstructorItem, InstructorList

router = APIRouter(prefix="/api/instructor", tags=["instructor"])

ExerciseFilter = Annotated[str | None, Query(description="Only this exercise's.")]


@router.get("/submissions", response_model=InstructorList)
async def all_submissions(service: Instructor, exercise: ExerciseFilter = None) -> InstructorList:
    """Every submission of every student, newest first."""
    found = await asyncio.to_thread(service.store.list_submissions, None, exercise)
    rows = await asyncio.to_thread(credited_rows, service.store, found)
    items = [InstructorItem.model_validate(row) for row in rows]
    return InstructorList(submissions=items)


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
