"""GET /api/reports/{report_id}/plots/{name}.png: the toy's plots, drawn after the verdict.

Report ids are random 128-bit values handed out with a verdict, so the URL itself is the
credential (the page puts it in an <img> tag, which cannot send headers). A plot that is not
drawn yet answers 503 with Retry-After (the embedded service first waits up to
`plot_wait_seconds` while it draws it).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

from grader.exercise import catalog
from grader.report import Report
from grader.service.deps import Service, is_id
from grader.service.plots import PlotError, PlotPending, plot_names
from grader.service.state import ServiceState
from grader.service.views import toy_result

router = APIRouter(prefix="/api/reports", tags=["reports"])


@router.get(
    "/{report_id}/plots/{name}.png",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}},
)
async def plot(report_id: str, name: str, service: Service) -> Response:
    exercise_id, report = await find_report(service, report_id)
    exercise = catalog().get(exercise_id)
    names = plot_names(exercise) if exercise else ()
    if name not in names:
        raise HTTPException(404, f"There is no plot named {name!r}; try {', '.join(names)}.")
    result = toy_result(report)
    if result is None:
        raise HTTPException(404, "This report has no toy experiment results to plot.")
    try:
        png = await service.plots.png(exercise, result, name, service.settings.plot_wait_seconds)
    except PlotPending:
        retry = {"Retry-After": str(service.settings.retry_after_seconds)}
        raise HTTPException(
            503, "The plot is still being drawn; try again shortly.", retry
        ) from None
    except PlotError as exc:
        raise HTTPException(
            500, f"The grader could not draw this plot (our fault): {exc}"
        ) from None
    headers = {"Cache-Control": "private, max-age=3600"}
    return Response(png, media_type="image/png", headers=headers)


async def find_report(service: ServiceState, report_id: str) -> tuple[str, Report]:
    """(exercise id, report) of a graded Run or submission, by its report id."""
    record = None
    if is_id(report_id):
        record = await asyncio.to_thread(service.store.get_run, report_id)
        if record is None:
            record = await asyncio.to_thread(service.store.find_by_report, report_id)
    if record is None or record.report_json is None:
        raise HTTPException(404, "No graded report with this id (Runs are kept for a while only).")
    return record.exercise, Report.model_validate_json(record.report_json)
