"""The page's API for a student who came from an LMS (X-LTI-Session instead of a name and key).

    GET  /api/lti/session             who is signed in, the exercise, and a renewed token
    POST /api/lti/submit              grade every tier; the score goes back to the LMS
    GET  /api/lti/submissions         the student's submissions through this link
    GET  /api/lti/submissions/{id}    one of them, with its status and report

Submit is the service's own (intake.accept); the one addition is the passback outbox row,
written in the submission's transaction.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Request, Response
from pydantic import BaseModel

from grader.service.credits import credited_rows
from grader.service.deps import Service, is_id
from grader.service.intake import Intake, accept
from grader.service.lti.outbox import row_writer
from grader.service.lti.service import get_lti
from grader.service.lti.session import SESSION_HEADER, Session, issue, verify
from grader.service.schemas import RunRequest, SubmissionItem, SubmissionList, SubmissionView
from grader.service.views import view_of

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
    outbox_row = row_writer(session.user_id, session.link_id)
    intake = Intake("submit", body.code, session.exercise, session.student, also=outbox_row,
                    shown_name=session.name, course=f"lti:{session.course_id}")  # fmt: skip
    view = await accept(service, response, intake)
    if view.status in ("done", "ungradable"):
        get_lti(request).passback.wake()
    return view


@router.get("/submissions", response_model=SubmissionList)
async def submissions(session: LtiSession, service: Service) -> SubmissionList:
    found = await asyncio.to_thread(
        service.store.list_submissions, session.student, session.exercise
    )
    rows = await asyncio.to_thread(credited_rows, service.store, found)
    items = [SubmissionItem.model_validate(row) for row in rows]
    return SubmissionList(student=session.name, submissions=items)


@router.get("/submissions/{submission_id}", response_model=SubmissionView)
async def one_submission(
    submission_id: str, session: LtiSession, service: Service
) -> SubmissionView:
    get = service.store.get
    found = await asyncio.to_thread(get, submission_id) if is_id(submission_id) else None
    if found is None or found.submission.student != session.student:
        raise HTTPException(404, "No submission with this id is visible to you.")
    return await view_of(service, found, session.name)
