"""What the store reads and writes, as plain frozen records, and the refusals it raises.

Rows become these records on the way out, and records become rows on the way in; nothing
else of the database leaks into the service."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


class QueueFull(Exception):
    """As many gradings wait in the whole cluster as the queue may hold."""


class OwnerBusy(Exception):
    """This student already has as many Submits in flight as one may have."""


class NameTaken(Exception):
    """A new student's name was claimed by another request a moment ago."""


def now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class Submission:
    """One submission. `report_json` is the Report exactly as the judge built it; it and the
    score stay None until the status is done (an ungradable one keeps no score)."""

    submission_id: str
    report_id: str
    student: str
    code: str
    created_at: str  # ISO 8601, UTC
    exercise: str
    status: str = "queued"  # queued, grading, done, ungradable
    attempts: int = 0
    report_json: str | None = None
    score: float | None = None
    max_score: float | None = None
    passed: bool | None = None
    finished_at: str | None = None


@dataclass(frozen=True)
class SubmissionSummary:
    submission_id: str
    student: str
    exercise: str
    created_at: str
    status: str
    passed: bool | None
    score: float | None
    max_score: float | None


@dataclass(frozen=True)
class RunRecord:
    """A Run graded by the distributed queue (the embedded service keeps Runs in memory)."""

    report_id: str
    exercise: str
    code: str
    created_at: str
    status: str = "queued"
    attempts: int = 0
    report_json: str | None = None
    finished_at: str | None = None


@dataclass(frozen=True)
class Verdict:
    """What finishing a grading writes. `score` None: ungradable, the report says why."""

    report_json: str
    score: float | None = None
    max_score: float | None = None
    passed: bool | None = None


@dataclass(frozen=True)
class Admission:
    max_waiting: int  # gradings waiting for a grading node, over the whole cluster
    max_per_student: int  # one student's Submits in flight
    max_in_flight: int | None = None  # waiting and grading (the embedded service's slots)
