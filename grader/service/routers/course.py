"""A course's term over the API: the instructor's schedule, extensions, quota and regrades
(the instructor token, or an LTI instructor's session for its own course: where `course`
is left out it is `default` with the token, the session's course with a session), and
GET /api/term: what a Submit would earn now, for the page. Read from the database per
request, so changes made by the CLI show at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from grader.service import regrading
from grader.service.deps import Service, StudentKey, key_matches
from grader.service.instructor_access import InstructorAccess, InstructorOrLti
from grader.service.views import known_exercise
from grader.store import Store
from grader.term import (
    DEFAULT_COURSE,
    Quota,
    TermError,
    at,
    credit_for,
    quota_frees_at,
    schedule_dict,
    schedule_of,
)

router = APIRouter(tags=["course"])
Course = Annotated[str, Query(description="An LTI context (lti:<id>) or a course name.")]
AskedCourse = Annotated[
    str | None, Query(description="An LTI context (lti:<id>) or a course name; see above.")
]


class ScheduleBody(BaseModel):
    exercise: str
    course: str | None = None
    opens_at: str | None = None
    due_at: str
    late: list[dict] = Field(default_factory=list, description='[{"until", "credit"}]')
    after: str = "practice"
    policy: str = "best"


class ExtensionBody(BaseModel):
    exercise: str
    course: str | None = None
    student: str
    due_at: str


class QuotaBody(BaseModel):
    exercise: str
    course: str | None = None
    submits: int = Field(ge=1)
    per_seconds: int = Field(ge=1)


class ExerciseCourse(BaseModel):
    exercise: str
    course: str | None = None


async def _call(function, *args):
    """Run a store operation; a TermError is the request's fault (422, nothing changed)."""
    try:
        return await asyncio.to_thread(function, *args)
    except TermError as error:
        raise HTTPException(422, f"{error}; nothing changed") from None


def term_view(store: Store, course: str, exercise: str) -> dict:
    known_exercise(exercise)  # 422 for an unknown one: nothing is stored for a typo
    term = store.term(course, exercise)
    quota = term.quota
    return {
        "course": course,
        "exercise": exercise,
        "schedule": schedule_dict(term.schedule) if term.schedule else None,
        "extensions": [{"student": s, "due_at": d.isoformat()} for s, d in term.extensions.items()],
        "quota": {"submits": quota.submits, "per_seconds": quota.per_seconds} if quota else None,
        "suggested_due_at": term.suggested_due_at,
    }


@router.get("/api/instructor/course")
async def get_course(access: InstructorOrLti, exercise: str, course: AskedCourse = None) -> dict:
    """An exercise's schedule, extensions and quota in a course (an LMS's due date too)."""
    return await _call(term_view, access.service.store, access.course_of(course), exercise)


@router.put("/api/instructor/course/schedule")
async def put_schedule(access: InstructorOrLti, body: ScheduleBody) -> dict:
    known_exercise(body.exercise)
    course, store = access.course_of(body.course), access.service.store
    data = body.model_dump(include={"opens_at", "due_at", "late", "after", "policy"})
    schedule = await _call(schedule_of, data)
    await _call(store.set_term, course, body.exercise, {"schedule": schedule})
    return term_view(store, course, body.exercise)


@router.put("/api/instructor/course/extension")
async def put_extension(access: InstructorOrLti, body: ExtensionBody) -> dict:
    known_exercise(body.exercise)
    course, store = access.course_of(body.course), access.service.store
    due = await _call(at, body.due_at)
    await _call(store.set_extension, course, body.exercise, body.student, due)
    return term_view(store, course, body.exercise)


@router.put("/api/instructor/course/quota")
async def put_quota(access: InstructorOrLti, body: QuotaBody) -> dict:
    known_exercise(body.exercise)
    course, store = access.course_of(body.course), access.service.store
    quota = {"quota": Quota(body.submits, body.per_seconds)}
    await _call(store.set_term, course, body.exercise, quota)
    return term_view(store, course, body.exercise)


@router.post("/api/instructor/regrades")
async def start_regrade(access: InstructorOrLti, body: ExerciseCourse) -> dict:
    """Queue a preview's gradings; poll GET /api/instructor/regrades/{preview_id}."""
    store, course = access.service.store, access.course_of(body.course)
    preview_id = await _call(regrading.start_preview, store, course, body.exercise)
    access.service.queued()
    return await _call(regrading.preview, store, preview_id)


async def _own_preview(access: InstructorAccess, preview_id: str) -> dict:
    """The preview, where it belongs to a course the request may reach (422: none such)."""
    found = await _call(regrading.preview, access.service.store, preview_id)
    access.course_of(found["course"])
    return found


@router.get("/api/instructor/regrades/{preview_id}")
async def get_regrade(access: InstructorOrLti, preview_id: str) -> dict:
    return await _own_preview(access, preview_id)


@router.post("/api/instructor/regrades/rollback")
async def rollback_regrade(access: InstructorOrLti, body: ExerciseCourse) -> dict:
    store, course = access.service.store, access.course_of(body.course)
    return await _call(regrading.rollback, store, course, body.exercise)


@router.post("/api/instructor/regrades/{preview_id}/apply")
async def apply_regrade(access: InstructorOrLti, preview_id: str) -> dict:
    await _own_preview(access, preview_id)
    return await _call(regrading.apply_preview, access.service.store, preview_id)


@router.get("/api/term")
async def standing(
    service: Service,
    exercise: str,
    student: str | None = None,
    course: Course = DEFAULT_COURSE,
    x_student_key: StudentKey = None,
) -> dict:
    """What a Submit now would earn: the due date, the credit, and (for the student, with
    their key) how many Submits the quota leaves."""
    store = service.store
    term = await asyncio.to_thread(store.term, course, exercise)
    schedule = term.schedule_for(student)
    credit = credit_for(schedule, datetime.now(UTC))
    out = {
        "due_at": schedule.due_at.isoformat() if schedule else None,
        "credit": credit.percent,
        "counted": credit.counted,
        "refused": credit.refused,
        "remaining": None,
        "next_frees_at": None,
    }
    key_hash = await asyncio.to_thread(store.student_key_hash, student) if student else None
    if term.quota and key_hash and key_matches(x_student_key, key_hash):
        times = await asyncio.to_thread(store.quota_times, course, exercise, student, term.quota)
        frees = quota_frees_at(times, term.quota, datetime.now(UTC))
        out["remaining"] = max(0, term.quota.submits - len(times))
        out["next_frees_at"] = frees.isoformat() if frees else None
    return out
