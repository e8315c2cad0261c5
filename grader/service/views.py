"""What the API answers about a grading, built from its row: status, queue position, the
report once there is one, and the plot URLs beside it (the report itself is never changed
after the judge built it)."""

from __future__ import annotations

import asyncio

from fastapi import HTTPException

from grader.exercise import Exercise, catalog, default_exercise
from grader.report import Report
from grader.service.plots import plot_names, plot_url
from grader.service.schemas import RunResponse, SubmissionView
from grader.service.state import ServiceState
from grader.service.store import RunRecord, Submission


def known_exercise(exercise_id: str | None) -> Exercise:
    """The exercise a request names (None: the root one); 422 for an unknown id."""
    if exercise_id is None:
        return default_exercise()
    exercises = catalog()
    if exercise_id not in exercises:
        known = ", ".join(exercises)
        raise HTTPException(422, f"There is no exercise {exercise_id!r}; choose one of {known}.")
    return exercises[exercise_id]


def toy_result(report: Report) -> dict | None:
    """The toy's result as plain data (what the plots show), or None."""
    return None if report.artifacts is None else report.artifacts.data


def plots_of(report_id: str, exercise_id: str, report: Report | None) -> dict[str, str]:
    exercise = catalog().get(exercise_id)
    if report is None or exercise is None or toy_result(report) is None:
        return {}
    return {name: plot_url(report_id, name) for name in plot_names(exercise)}


async def grading_fields(service: ServiceState, kind: str, record) -> dict:
    job_id = record.submission_id if kind == "submission" else record.report_id
    report = Report.model_validate_json(record.report_json) if record.report_json else None
    position = None
    if record.status == "queued":
        position = await asyncio.to_thread(service.store.position, kind, job_id)
    return {
        "report_id": record.report_id,
        "exercise": record.exercise,
        "status": record.status,
        "position": position,
        "report": report,
        "plots": plots_of(
            record.report_id, record.exercise, report if record.status == "done" else None
        ),
    }


async def submission_view(service: ServiceState, record: Submission) -> SubmissionView:
    fields = await grading_fields(service, "submission", record)
    return SubmissionView(
        submission_id=record.submission_id,
        student=record.student,
        created_at=record.created_at,
        **fields,
    )


async def run_view(service: ServiceState, record: RunRecord) -> RunResponse:
    return RunResponse(**await grading_fields(service, "run", record))
