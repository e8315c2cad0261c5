"""POST /api/run and POST /api/submit: grade the code, return the verdict, keep what must be kept.

Run grades the visible tiers and keeps the report in memory only (for its plots); Submit
grades every tier and stores code and report under the student's name. A student is a name
plus a secret key: the first Submit under a new name creates the student and hands out the
key; later requests for that name must present it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException

from grader.report import Report
from grader.service.deps import (
    Service,
    StudentKey,
    hash_key,
    key_matches,
    new_id,
    new_student_key,
)
from grader.service.grading_queue import OwnerBusy, QueueFull
from grader.service.metrics import outcome_of
from grader.service.plots import PLOT_NAMES, plot_url
from grader.service.schemas import RunRequest, RunResponse, SubmitRequest, SubmitResponse
from grader.service.state import ServiceState
from grader.service.store import Submission

router = APIRouter(prefix="/api", tags=["grading"])


@router.post("/run", response_model=RunResponse)
async def run(body: RunRequest, service: Service) -> RunResponse:
    """Grade the visible tiers; nothing is stored."""
    report = await grade(service, body.code, "run")
    report_id = new_id()
    attach_plots(service, report_id, report)
    service.run_cache.put(report_id, report)
    schedule_plots(service, report)
    return RunResponse(report_id=report_id, report=report)


@router.post("/submit", response_model=SubmitResponse)
async def submit(
    body: SubmitRequest,
    service: Service,
    x_student_key: StudentKey = None,
) -> SubmitResponse:
    """Grade every tier and store the submission under the student's name."""
    known_hash = service.store.student_key_hash(body.student)
    if known_hash is not None and not key_matches(x_student_key, known_hash):
        raise HTTPException(403, forbidden_message(body.student))
    report = await grade(service, body.code, "submit", owner=body.student)
    if known_hash is None:
        x_student_key = claim_name(service, body.student, x_student_key)
    submission_id, report_id = new_id(), new_id()
    report.submission = submission_id
    attach_plots(service, report_id, report)
    await asyncio.to_thread(
        service.store.add_submission,
        submission_record(submission_id, report_id, body, report),
    )
    schedule_plots(service, report)
    return SubmitResponse(
        submission_id=submission_id,
        report_id=report_id,
        student=body.student,
        student_key=x_student_key or "",
        report=report,
    )


def submission_record(
    submission_id: str, report_id: str, body: SubmitRequest, report: Report
) -> Submission:
    return Submission(
        submission_id=submission_id,
        report_id=report_id,
        student=body.student,
        code=body.code,
        created_at=datetime.now(UTC).isoformat(),
        exercise=report.exercise,
        status="done",
        attempts=1,
        report_json=report.model_dump_json(),
        score=report.score,
        max_score=report.max_score,
        passed=report.passed,
    )


async def grade(service: ServiceState, code: str, mode: str, owner: str | None = None) -> Report:
    """Grade through the bounded queue; 503 when the grader is cold or the queue is full,
    429 when `owner` already has as many gradings waiting as one student may."""
    check_code_size(service, code)
    retry = {"Retry-After": str(service.settings.retry_after_seconds)}
    if not service.ready:
        raise HTTPException(503, "The grader is still starting; try again shortly.", retry)
    try:
        report, seconds = await service.queue.grade(code, mode, owner)
    except QueueFull:
        service.metrics.observe_rejected()
        raise HTTPException(503, "The grading queue is full; try again shortly.", retry) from None
    except OwnerBusy:
        service.metrics.observe_rejected()
        detail = "Your previous submission is still being graded; wait for its verdict."
        raise HTTPException(429, detail, retry) from None
    except Exception as exc:
        service.metrics.observe_grading(mode, "grader_error", 0.0)
        detail = f"The grader failed on our side, not because of your code: {exc}"
        raise HTTPException(500, detail) from exc
    service.metrics.observe_grading(mode, outcome_of(report), seconds)
    return report


def check_code_size(service: ServiceState, code: str) -> None:
    limit = service.settings.max_code_bytes
    size = len(code.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise HTTPException(413, f"The code is {size} bytes; the limit is {limit} bytes.")


def claim_name(service: ServiceState, student: str, offered_key: str | None) -> str:
    """Create the student with a fresh key. If another request claimed the name a moment
    ago, the caller must hold that request's key."""
    key = new_student_key()
    now = datetime.now(UTC).isoformat()
    if service.store.create_student(student, hash_key(key), now):
        return key
    known_hash = service.store.student_key_hash(student) or ""
    if key_matches(offered_key, known_hash):
        return offered_key or ""
    raise HTTPException(403, forbidden_message(student))


def forbidden_message(student: str) -> str:
    return f"The name {student!r} is taken; send its student key in X-Student-Key."


def attach_plots(service: ServiceState, report_id: str, report: Report) -> None:
    """Fill in the plot URLs before the verdict goes out; the PNGs are drawn afterwards."""
    if report.artifacts is not None and service.plots.available:
        report.artifacts.plots = {name: plot_url(report_id, name) for name in PLOT_NAMES}


def schedule_plots(service: ServiceState, report: Report) -> None:
    if report.artifacts is not None and report.artifacts.plots:
        service.plots.schedule(report.artifacts.model_dump(mode="json"), eager=True)
