"""Instructor endpoints: every submission, one with its code, the class gradebook as CSV
(written by grader/report/gradebook.py, like every gradebook), and the class's statistics
(JSON or one table as CSV). Bearer-token protected (the statistics also take an LTI
instructor's session); without a configured token the token's way in does not exist (404)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.responses import Response

from grader.report import class_gradebook_csv
from grader.service.class_report import TABLES, class_stats, stats_csv
from grader.service.credits import credited_rows, gradebook_rows
from grader.service.deps import Instructor, bearer_token, get_service, is_id, require_instructor
from grader.service.lti.credentials import Session
from grader.service.lti.routes import lti_session
from grader.service.schemas import InstructorItem, InstructorList, SubmissionView
from grader.service.state import ServiceState
from grader.service.views import known_exercise, view_of

router = APIRouter(prefix="/api/instructor", tags=["instructor"])

ExerciseFilter = Annotated[str | None, Query(description="Only this exercise's.")]


@router.get("/submissions", response_model=InstructorList)
async def all_submissions(service: Instructor, exercise: ExerciseFilter = None) -> InstructorList:
    """Every submission of every student, newest first."""
    found = await asyncio.to_thread(service.store.list_submissions, None, exercise)
    rows = await asyncio.to_thread(credited_rows, service.store, found)
    items = [InstructorItem.model_validate(row) for row in rows]
    return InstructorList(submissions=items)


@router.get("/submissions/{submission_id}", response_model=SubmissionView)
async def submission_with_code(submission_id: str, service: Instructor) -> SubmissionView:
    """One submission with its code (for the instructor's view and regrade scripts)."""
    get = service.store.get
    found = await asyncio.to_thread(get, submission_id) if is_id(submission_id) else None
    if found is None or found.submission.kind != "submit":
        raise HTTPException(404, f"There is no submission {submission_id!r}.")
    return await view_of(service, found)  # the view carries the code


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


async def instructor_or_lti(
    request: Request,
    x_lti_session: Annotated[str | None, Header(description="An LTI instructor's session.")] = None,
) -> tuple[ServiceState, Session | None]:
    """The instructor token, or an LTI instructor's session (narrowed to its course)."""
    if x_lti_session is None or bearer_token(request) is not None:
        return require_instructor(request), None
    session = await lti_session(request, x_lti_session)
    if session.role != "instructor":
        raise HTTPException(403, "These statistics are for instructors; you launched as a student.")
    return get_service(request), session


@router.get("/stats", responses={200: {"content": {"text/csv": {}}}})
async def stats(
    who: Annotated[tuple[ServiceState, Session | None], Depends(instructor_or_lti)],
    exercise: Annotated[str, Query(description="The exercise's id.")],
    course: Annotated[str | None, Query(description="Only this course's students.")] = None,
    format: Annotated[Literal["json", "csv"], Query()] = "json",
    table: Annotated[Literal[TABLES], Query(description="The CSV's table.")] = "tests",
):
    """The class at a glance: item analysis, common mistakes, stuck students."""
    service, session = who
    if session is not None:
        course = f"lti:{session.course_id}"  # the course LTI Submits are filed under
    found = known_exercise(exercise)
    answer = await asyncio.to_thread(class_stats, service.store, found, service.signatures, course)
    if format == "json":
        return answer
    headers = {"Content-Disposition": f'attachment; filename="{exercise}-{table}.csv"'}
    return Response(stats_csv(answer, table), media_type="text/csv; charset=utf-8", headers=headers)
