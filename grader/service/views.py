"""What the API answers about a submission, built from its row and its current grading:
status, queue position, the report once there is one, and the plot URLs beside it (the
report itself is never changed after the judge built it)."""

from __future__ import annotations

import asyncio

from fastapi import HTTPException

from grader.exercise import Exercise, catalog, default_exercise
from grader.mistakes import hint
from grader.report import Report
from grader.service.credits import credited_rows
from grader.service.schemas import GradingItem, RunResponse, SubmissionView
from grader.service.state import ServiceState
from grader.store import GradedSubmission, GradingRecord, SubmissionSummary


def known_exercise(exercise_id: str | None) -> Exercise:
    """The exercise a request names (None: the root one); 422 for an unknown id."""
    if exercise_id is None:
        return default_exercise()
    exercises = catalog()
    if exercise_id not in exercises:
        known = ", ".join(exercises)
        raise HTTPException(422, f"There is no exercise {exercise_id!r}; choose one of {known}.")
    return exercises[exercise_id]


def plot_url(report_id: str, name: str) -> str:
    return f"/api/reports/{report_id}/plots/{name}.png"


def plot_names(exercise: Exercise) -> tuple[str, ...]:
    return tuple(plot.name for plot in exercise.plots)


def toy_result(report: Report | None) -> dict | None:
    """The toy's result as plain data (what the plots show), or None."""
    return None if report is None or report.artifacts is None else report.artifacts.data


def report_of(grading: GradingRecord) -> Report | None:
    return Report.model_validate_json(grading.report_json) if grading.report_json else None


async def view_of(service: ServiceState, graded: GradedSubmission, shown_name: str | None = None):
    """A Run's answer (RunResponse) or a submission's (SubmissionView)."""
    sent, grading = graded.submission, graded.grading
    report = report_of(grading)
    exercise = catalog().get(sent.exercise)
    plots = {}
    if grading.status == "done" and exercise is not None and toy_result(report) is not None:
        plots = {name: plot_url(grading.grading_id, name) for name in plot_names(exercise)}
    position = await asyncio.to_thread(service.store.position, grading)
    fields = {
        "report_id": grading.grading_id,
        "exercise": sent.exercise,
        "status": grading.status,
        "position": position,
        "report": report,
        "plots": plots,
    }
    if sent.kind == "run":
        return RunResponse(**fields)
    summary = SubmissionSummary(
        sent.submission_id, sent.student, sent.exercise, sent.course, sent.accepted_at,
        grading.status, grading.passed, grading.score, grading.max_score,
    )  # fmt: skip
    rows = await asyncio.to_thread(credited_rows, service.store, [summary])
    fields |= {k: rows[0][k] for k in ("score", "max_score", "credit", "credited_score")}
    fields |= {k: rows[0][k] for k in ("counted", "note")}
    said = ""
    if exercise is not None and exercise.mistake_hints and report is not None:
        found = await asyncio.to_thread(service.signatures.get, exercise)
        said = hint(exercise, report, found)
    return SubmissionView(
        submission_id=sent.submission_id,
        student=shown_name or sent.student,
        created_at=sent.accepted_at,
        code=sent.code,
        hint=said,
        **fields,
    )


def grading_items(gradings: list[GradingRecord]) -> list[GradingItem]:
    return [GradingItem.model_validate(g, from_attributes=True) for g in gradings]
