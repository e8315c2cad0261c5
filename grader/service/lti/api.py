"""The page's API for a student who came from an LMS (X-LTI-Session instead of a name and key).

    GET  /api/lti/session             who is signed in, the exercise, and a renewed token
    POST /api/lti/submit              grade every tier; the score goes back to the LMS
    GET  /api/lti/submissions         the student's submissions through this link
    GET  /api/lti/submissions/{id}    one of them, with its status and report

Submit is the service's own (grading.py's admission, queue and answer); the one addition is
the passback outbox row, written in the submission's transaction.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Request, Response
from pydantic import BaseModel

from grader.service.deps import Service, is_id, new_id
from grader.service.grading_node import Job
from grader.service.lti.outbox import row_writer
from grader.service.lti.service import get_lti
from grader.service.lti.session import SESSION_HEADER, Session, issue, verify
from grader.service.routers.grading import admit, answered, check_can_grade
from grader.service.schemas import RunRequest, SubmissionItem, SubmissionList, SubmissionView
from grader.service.store import Submission, now
from grader.service.views import submission_view

router = APIRouter(prefix="/api/lti", tags=["lti"])
EXPIRED = "Your course session has expired; open the exercise again from your course."


async def lti_session(
    request: Request,
    x_lti_session: Annotated[str | None, Header(description="The launch's session token.")] = None,
) -> Session:
    session = await asyncio.to_thread(verify, get_lti(request).keys, x_lti_session)
    if session is None:
        raise HTTPException(401, EXPIRED)
    return session


LtiSession = Annotated[Session, Depends(lti_session)]


class SessionInfo(BaseModel):
    name: str
    role: str
    course: str
    exercise: str
    token: str
    expires_at: int
    header: str = SESSION_HEADER


@router.get("/session", response_model=SessionInfo)
async def session_info(request: Request, session: LtiSession) -> SessionInfo:
    token, renewed = await asyncio.to_thread(issue, get_lti(request).keys, session)
    return SessionInfo(
        name=renewed.name,
        role=renewed.role,
        course=renewed.course_title,
        exercise=renewed.exercise,
        token=token,
        expires_at=renewed.expires_at,
    )


@router.post("/submit", response_model=SubmissionView, responses={202: {"description": "Poll."}})
async def submit(
    body: RunRequest, request: Request, session: LtiSession, service: Service, response: Response
) -> SubmissionView:
    """Grade every tier; once graded, the course's score is posted to the LMS."""
    if body.exercise not in (None, session.exercise):
        raise HTTPException(422, f"This link opens exercise {session.exercise!r} only.")
    check_can_grade(service, body.code)
    record = Submission(new_id(), new_id(), session.student, body.code, now(), session.exercise)
    job = Job("submission", record.submission_id)

    def write(enqueue):
        with_row = row_writer(record.submission_id, session.user_id, session.link_id, enqueue)
        service.store.queue_submission(record, service.admission, with_row)

    await admit(service, job, write, owner=session.student)
    finished = await service.queue.wait(job, service.settings.verdict_wait_seconds)
    lti = get_lti(request)
    if finished:
        lti.passback.wake()
    stored = await asyncio.to_thread(service.store.get_submission, record.submission_id)
    view = await submission_view(service, stored)
    return answered(service, response, finished, view.model_copy(update={"student": session.name}))


@router.get("/submissions", response_model=SubmissionList)
async def submissions(session: LtiSession, service: Service) -> SubmissionList:
    found = await asyncio.to_thread(
        service.store.list_submissions, session.student, session.exercise
    )
    items = [SubmissionItem.model_validate(s, from_attributes=True) for s in found]
    return SubmissionList(student=session.name, submissions=items)


@router.get("/submissions/{submission_id}", response_model=SubmissionView)
async def one_submission(
    submission_id: str, session: LtiSession, service: Service
) -> SubmissionView:
    get = service.store.get_submission
    record = await asyncio.to_thread(get, submission_id) if is_id(submission_id) else None
    if record is None or record.student != session.student:
        raise HTTPException(404, "No submission with this id is visible to you.")
    view = await submission_view(service, record)
    return view.model_copy(update={"student": session.name})
