"""POST /api/run and POST /api/submit: grade the code through intake.accept, and answer.

Both wait up to `verdict_wait_seconds` for the verdict: 200 with the report, or 202 with the
status (`queued`, with its position, or `grading`) to poll at GET /api/runs/{report_id} or
GET /api/submissions/{submission_id}. A student is a name plus a secret key: the first
Submit under a new name creates the student (in the same transaction) and hands out the key.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException, Request, Response

from grader.service.deps import Service, StudentKey, hash_key, key_matches, new_student_key
from grader.service.intake import Intake, accept, forbidden_message
from grader.service.schemas import RunRequest, RunResponse, SubmitRequest, SubmitResponse

router = APIRouter(prefix="/api", tags=["grading"])
ACCEPTED = {202: {"description": "Not graded yet: poll the status."}}


def address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@router.post("/run", response_model=RunResponse, responses=ACCEPTED)
async def post_run(body: RunRequest, request: Request, service: Service, response: Response):
    """Grade the visible tiers; nothing is kept beyond `run_retention_hours`."""
    intake = Intake("run", body.code, body.exercise, body.student, address(request))
    return await accept(service, response, intake)


@router.post("/submit", response_model=SubmitResponse, responses=ACCEPTED)
async def post_submit(
    body: SubmitRequest,
    request: Request,
    service: Service,
    response: Response,
    x_student_key: StudentKey = None,
) -> SubmitResponse:
    """Grade every tier and keep the submission under the student's name."""
    known_hash = await asyncio.to_thread(service.store.student_key_hash, body.student)
    if known_hash is not None and not key_matches(x_student_key, known_hash):
        raise HTTPException(403, forbidden_message(body.student))
    key = x_student_key if known_hash is not None else new_student_key()
    new_hash = hash_key(key) if known_hash is None else None
    intake = Intake("submit", body.code, body.exercise, body.student, address(request), new_hash)
    view = await accept(service, response, intake)
    return SubmitResponse(**view.model_dump(), student_key=key or "")
