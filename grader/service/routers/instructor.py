"""Instructor endpoints: every submission, one with its code, the class gradebook as CSV
(written by grader/report/gradebook.py, like every gradebook), and the class's statistics
(JSON or one table as CSV). Reached with the instructor token (every course; without a
configured token that way in does not exist: 404) or an LTI instructor's session (its own
course only: grader/service/instructor_access.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response

from grader.report import class_gradebook_csv
from grader.service.class_report import TABLES, class_stats, stats_csv
from grader.service.credits import credited_rows, gradebook_rows
from grader.service.deps import is_id
from grader.service.instructor_access import EVERY_COURSE, InstructorAccess, InstructorOrLti
from grader.service.schemas import InstructorItem, InstructorList, SubmissionView
from grader.service.views import known_exercise, view_of

router = APIRouter(prefix="/api/instructor", tags=["instructor"])

ExerciseFilter = Annotated[str | None, Query(description="Only this exercise's.")]
CourseFilter = Annotated[str | None, Query(description="Only this course's students.")]


async def _submissions(access: InstructorAccess, exercise: str | None, course: str | None):
    """The submissions the request may read, with their credit (an LTI session's: its
    course's only)."""
    course = access.course_of(course, default=EVERY_COURSE)
    store = access.service.store
    found = await asyncio.to_thread(store.list_submissions, None, exercise)
    found = [s for s in found if course in (None, s.course)]
    return await asyncio.to_thread(credited_rows, store, found)


@router.get("/submissions", response_model=InstructorList)
async def all_submissions(
    access: InstructorOrLti, exercise: ExerciseFilter = None, course: CourseFilter = None
) -> InstructorList:
    """Every submission of every student, newest first."""
    rows = await _submissions(access, exercise, course)
    return InstructorList(submissions=[InstructorItem.model_validate(row) for row in rows])


@router.get("/submissions/{submission_id}", response_model=SubmissionView)
async def submission_with_code(submission_id: str, access: InstructorOrLti) -> SubmissionView:
    """One submission with its code (for the instructor's view and regrade scripts)."""
    get = access.service.store.get
    found = await asyncio.to_thread(get, submission_id) if is_id(submission_id) else None
    if found is None or found.submission.kind != "submit":
        raise HTTPException(404, f"There is no submission {submission_id!r}.")
    access.course_of(found.submission.course)
    return await view_of(access.service, found)  # the view carries the code


@router.get(
    "/gradebook.csv", response_class=Response, responses={200: {"content": {"text/csv": {}}}}
)
async def gradebook(
    access: InstructorOrLti, exercise: ExerciseFilter = None, course: CourseFilter = None
) -> Response:
    """One row per student and exercise: best and latest credited score (practice Submits
    are left out)."""
    headers = {"Content-Disposition": 'attachment; filename="gradebook.csv"'}
    rows = await _submissions(access, exercise, course)
    text = class_gradebook_csv(gradebook_rows(rows))
    return Response(text, media_type="text/csv; charset=utf-8", headers=headers)


@router.get("/stats", responses={200: {"content": {"text/csv": {}}}})
async def stats(
    access: InstructorOrLti,
    exercise: Annotated[str, Query(description="The exercise's id.")],
    course: CourseFilter = None,
    format: Annotated[Literal["json", "csv"], Query()] = "json",
    table: Annotated[Literal[TABLES], Query(description="The CSV's table.")] = "tests",
):
    """The class at a glance: item analysis, common mistakes, stuck students."""
    service, course = access.service, access.course_of(course, default=EVERY_COURSE)
    found = known_exercise(exercise)
    answer = await asyncio.to_thread(class_stats, service.store, found, service.signatures, course)
    if format == "json":
        return answer
    headers = {"Content-Disposition": f'attachment; filename="{exercise}-{table}.csv"'}
    return Response(stats_csv(answer, table), media_type="text/csv; charset=utf-8", headers=headers)
