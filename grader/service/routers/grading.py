"""POST /api/run and POST /api/submit: queue the code, wait for the verdict, answer it.

Both write their row (a Run's or a submission's) and its queue job in one transaction, then
wait up to `verdict_wait_seconds` for the verdict: 200 with the report, or 202 with the
status (`queued`, with its position, or `grading`) to poll at GET /api/runs/{report_id} or
GET /api/submissions/{submission_id}. A student is a name plus a secret key: the first
Submit under a new name creates the student (in the same transaction) and hands out the key.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException, Response

from grader.service.deps import Service, StudentKey, hash_key, key_matches, new_id, new_student_key
from grader.service.grading_node import Job
from grader.service.schemas import RunRequest, RunResponse, SubmitRequest, SubmitResponse
from grader.service.state import ServiceState
from grader.service.store import NameTaken, OwnerBusy, QueueFull, RunRecord, Submission, now
from grader.service.views import known_exercise, run_view, submission_view, toy_result

router = APIRouter(prefix="/api", tags=["grading"])
ACCEPTED = {202: {"description": "Not graded yet: poll the status."}}


@router.post("/run", response_model=RunResponse, responses=ACCEPTED)
async def run(body: RunRequest, service: Service, response: Response) -> RunResponse:
    """Grade the visible tiers; nothing is kept beyond `run_retention_hours`."""
    exercise = known_exercise(body.exercise)
    check_can_grade(service, body.code)
    record = RunRecord(new_id(), exercise.id, body.code, now())
    await admit(
        service,
        Job("run", record.report_id),
        lambda enqueue: service.store.queue_run(record, service.admission, enqueue),
    )
    finished = await service.queue.wait(
        Job("run", record.report_id), service.settings.verdict_wait_seconds
    )
    view = await run_view(service, await asyncio.to_thread(service.store.get_run, record.report_id))
    return answered(service, response, finished, view)


@router.post("/submit", response_model=SubmitResponse, responses=ACCEPTED)
async def submit(
    body: SubmitRequest, service: Service, response: Response, x_student_key: StudentKey = None
) -> SubmitResponse:
    """Grade every tier and keep the submission under the student's name."""
    exercise = known_exercise(body.exercise)
    known_hash = await asyncio.to_thread(service.store.student_key_hash, body.student)
    if known_hash is not None and not key_matches(x_student_key, known_hash):
        raise HTTPException(403, forbidden_message(body.student))
    check_can_grade(service, body.code)
    key = x_student_key if known_hash is not None else new_student_key()
    new_hash = hash_key(key) if known_hash is None else None
    record = Submission(new_id(), new_id(), body.student, body.code, now(), exercise.id)
    job = Job("submission", record.submission_id)
    await admit(
        service,
        job,
        lambda enqueue: service.store.queue_submission(
            record, service.admission, enqueue, new_hash
        ),
        owner=body.student,
    )
    finished = await service.queue.wait(job, service.settings.verdict_wait_seconds)
    stored = await asyncio.to_thread(service.store.get_submission, record.submission_id)
    view = await submission_view(service, stored)
    return answered(
        service, response, finished, SubmitResponse(**view.model_dump(), student_key=key or "")
    )


async def admit(service: ServiceState, job: Job, write, owner: str | None = None) -> None:
    """Queue a job; 503 when the queue is full, 429 when `owner` has a Submit in flight."""
    retry = {"Retry-After": str(service.settings.retry_after_seconds)}
    try:
        await service.queue.put(job, write)
    except QueueFull:
        service.metrics.observe_rejected()
        raise HTTPException(503, "The grading queue is full; try again shortly.", retry) from None
    except OwnerBusy:
        service.metrics.observe_rejected()
        detail = "Your previous submission is still being graded; wait for its verdict."
        raise HTTPException(429, detail, retry) from None
    except NameTaken:
        raise HTTPException(403, forbidden_message(owner or "")) from None


def answered(service: ServiceState, response: Response, finished: bool, view):
    """200 with the verdict, or 202 while it is still queued or grading."""
    response.status_code = 200 if finished and view.report is not None else 202
    if view.status == "done" and view.report is not None:
        result = toy_result(view.report)
        if result is not None and view.plots:
            service.plots.after_verdict(known_exercise(view.exercise), result)
    return view


def check_can_grade(service: ServiceState, code: str) -> None:
    limit = service.settings.max_code_bytes
    size = len(code.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise HTTPException(413, f"The code is {size} bytes; the limit is {limit} bytes.")
    if not service.ready:
        retry = {"Retry-After": str(service.settings.retry_after_seconds)}
        raise HTTPException(503, "The grader is still starting; try again shortly.", retry)


def forbidden_message(student: str) -> str:
    return f"The name {student!r} is taken; send its student key in X-Student-Key."
