"""What the store reads and writes, as frozen records, and the refusals it raises."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


class QueueFull(Exception):
    """As many gradings wait as the queue may hold (for Runs: as many as Runs may fill)."""


class OwnerBusy(Exception):
    """This student or client already has as much work in flight as one may have."""


class NameTaken(Exception):
    """A new student's name was claimed by another request a moment ago."""


class TooManyNames(Exception):
    """This address created as many new student names as one may in an hour."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Submission:
    """What was sent and when it was accepted; never changed once stored. `student` is
    None for a Run; `client` is whose work it is for admission (the student, or an address)."""

    submission_id: str
    kind: str  # run or submit
    student: str | None
    client: str
    exercise: str
    code: str
    accepted_at: str  # ISO 8601, UTC
    course: str = "default"  # an LTI context (lti:<id>), or a course named in the CLI


@dataclass(frozen=True)
class GradingRecord:
    """One grading of a submission. `report_json` is the Report exactly as the judge built
    it; it and the score stay None until it is finished (an ungradable one keeps no score)."""

    grading_id: str
    submission_id: str
    current: bool
    priority: int
    status: str  # queued, grading, done, ungradable
    attempts: int
    node: str | None
    exercise_version: str | None
    report_json: str | None
    score: float | None
    max_score: float | None
    passed: bool | None
    queued_at: str
    started_at: str | None
    finished_at: str | None
    plots_key: str | None  # the artifacts_key of its toy's plots; None: none to draw
    verdict_key: str | None = None  # what a later grading may reuse it by (node/reuse.py)


@dataclass(frozen=True)
class GradedSubmission:
    """A submission with one of its gradings (the current one, unless asked otherwise)."""

    submission: Submission
    grading: GradingRecord


@dataclass(frozen=True)
class SubmissionSummary:
    """A submission and its current grading, for lists and gradebooks."""

    submission_id: str
    student: str
    exercise: str
    course: str
    created_at: str  # when it was accepted
    status: str
    passed: bool | None
    score: float | None
    max_score: float | None


@dataclass(frozen=True)
class GradingResult:
    """What finishing a grading writes. `score` None: ungradable, the report says why."""

    report_json: str
    score: float | None = None
    max_score: float | None = None
    passed: bool | None = None
    exercise_version: str | None = None
    plots_key: str | None = None  # its toy's plots, to be drawn (artifacts_key); None: none
    verdict_key: str | None = None  # a later live grading may reuse it by (node/reuse.py)


@dataclass(frozen=True)
class PlotsWanted:
    """A finished grading's plots that are not stored: its exercise, their key, its report."""

    exercise: str
    key: str
    report_json: str


@dataclass(frozen=True)
class Admission:
    """The limits live work is admitted under, checked in the database for the cluster.

    `capacity` counts the gradings waiting (distributed) or waiting and grading (embedded:
    this process's slots, `count_grading`); Runs may fill `run_capacity` of it, so Submits
    always have room; a client has at most `runs_per_client` Runs and a student
    `submits_per_student` Submits in flight; an address creates `names_per_hour` names."""

    capacity: int
    run_capacity: int
    submits_per_student: int
    runs_per_client: int = 1
    names_per_hour: int = 20
    count_grading: bool = False
