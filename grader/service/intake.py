"""The one way work enters the grader: `accept` validates a Run or a Submit, admits it,
stores the submission with its queued grading, waits for the verdict and answers it; the
page's routes (routers/grade.py) and the LTI API call it alike. `regrade` adds a new
grading to stored submissions.

    view = await accept(service, response, Intake("submit", code, "gspo", student="ada"))

Admission (one mechanism, decided in the database for the whole cluster): the queue holds
`max_queue` gradings, of which Runs may fill half, so Submits always have room; a client
(its student name, else its address) has one Run in flight, a student `max_per_student`
Submits, and the quota of the course's term (N Submits per rolling window, ungradable
ones not counted); an address creates `names_per_hour` new names. A refusal is 503 (full) or
429 (your own limit), with Retry-After; a Submit before the exercise opens or after it
closed (grader/term.py) is 403.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi import HTTPException, Response

from grader.service.deps import new_id
from grader.service.state import ServiceState
from grader.service.views import known_exercise, view_of
from grader.store import (
    Also,
    NameTaken,
    OwnerBusy,
    QueueFull,
    QuotaUsed,
    Store,
    Submission,
    TooManyNames,
    now,
)
from grader.term import DEFAULT_COURSE, credit_for


@dataclass(frozen=True)
class Intake:
    """What a request asks to grade, and whose it is."""

    kind: str  # run or submit
    code: str
    exercise: str | None  # None: the root exercise
    student: str | None = None  # a Submit's student; a Run's, when the page says
    address: str | None = None  # the client's address (who a Run without a name is)
    new_key_hash: str | None = None  # the student is new: create it with this key
    also: Also | None = None  # more rows for the submission's transaction (LTI's outbox)
    shown_name: str | None = None  # the name the answer shows (LTI: the LMS's name)
    course: str = DEFAULT_COURSE  # the LTI context (lti:<id>), else "default"


async def accept(service: ServiceState, response: Response, intake: Intake):
    """Admit, store and queue; then the verdict (200) or the status to poll (202)."""
    exercise = known_exercise(intake.exercise)
    check_can_grade(service, intake.code)
    client = intake.student or f"address {intake.address or 'unknown'}"
    student = intake.student if intake.kind == "submit" else None
    accepted_at = now()
    sent = Submission(
        new_id(), intake.kind, student, client, exercise.id, intake.code, accepted_at, intake.course
    )
    if student is not None:
        term = await asyncio.to_thread(service.store.term, intake.course, exercise.id)
        credit = credit_for(term.schedule_for(student), datetime.fromisoformat(accepted_at))
        if credit.refused:
            raise HTTPException(403, credit.refused)
    grading_id = new_id()
    await admit(service, sent, grading_id, intake)
    service.queued()
    finished = await service.wait(grading_id, service.settings.verdict_wait_seconds)
    graded = await asyncio.to_thread(service.store.by_grading, grading_id)
    view = await view_of(service, graded, intake.shown_name)
    response.status_code = 200 if finished and view.report is not None else 202
    return view


async def admit(service: ServiceState, sent: Submission, grading_id: str, intake: Intake) -> None:
    retry = {"Retry-After": str(service.settings.retry_after_seconds)}
    write = service.store.admit
    args = (sent, grading_id, service.admission, intake.new_key_hash, intake.address, intake.also)
    try:
        await asyncio.to_thread(write, *args)
    except QueueFull:
        service.metrics.observe_rejected()
        raise HTTPException(503, "The grading queue is full; try again shortly.", retry) from None
    except OwnerBusy:
        service.metrics.observe_rejected()
        if sent.kind == "run":
            detail = "Your previous Run is still being graded; wait for its verdict."
        else:
            detail = "Your previous submission is still being graded; wait for its verdict."
        raise HTTPException(429, detail, retry) from None
    except QuotaUsed as used:
        service.metrics.observe_rejected()
        wait = max(1, math.ceil((used.frees_at - datetime.now(UTC)).total_seconds()))
        detail = (
            "You have used every Submit your quota allows for this exercise for now;"
            f" the next one frees up at {used.frees_at.isoformat(timespec='seconds')}."
        )
        raise HTTPException(429, detail, {"Retry-After": str(wait)}) from None
    except TooManyNames:
        detail = "Too many new names were created from your address; try again in an hour."
        raise HTTPException(429, detail, {"Retry-After": "3600"}) from None
    except NameTaken:
        raise HTTPException(403, forbidden_message(sent.student or "")) from None


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


def regrade(store: Store, submission_ids: list[str], current: bool = False) -> list[str]:
    """Queue a new grading of each stored submission, below live work (the earlier gradings
    are kept); `current`: the new ones are what students see at once. Their ids."""
    ids = [new_id() for _ in submission_ids]
    store.add_gradings(list(submission_ids), ids, current)
    return ids
