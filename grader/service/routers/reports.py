"""GET /api/reports/{report_id}/plots/{name}.png: the toy's plots, drawn after the verdict.

Report ids are random 128-bit values handed out with a verdict, so the URL itself is the
credential (the page puts it in an <img> tag, which cannot send headers). A plot still
being drawn is waited for, up to `plot_wait_seconds`.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

from grader.report import Report
from grader.service.deps import Service, is_id
from grader.service.plots import PlotError
from grader.service.state import ServiceState

router = APIRouter(prefix="/api/reports", tags=["reports"])


@router.get(
    "/{report_id}/plots/{name}.png",
    response_class=FileResponse,
    responses={200: {"content": {"image/png": {}}}},
)
async def plot(report_id: str, name: str, service: Service) -> FileResponse:
    names = service.plots.names
    if name not in names:
        raise HTTPException(404, f"There is no plot named {name!r}; try {', '.join(names)}.")
    report = find_report(service, report_id)
    if report.artifacts is None or not report.artifacts.plots:
        raise HTTPException(404, "This report has no toy experiment results to plot.")
    result = report.artifacts.data
    path = service.plots.path(result, name)
    if not path.is_file():
        await wait_for_render(service, result)
    headers = {"Cache-Control": "private, max-age=3600"}
    return FileResponse(path, media_type="image/png", headers=headers)


def find_report(service: ServiceState, report_id: str) -> Report:
    report = service.run_cache.get(report_id) if is_id(report_id) else None
    if report is None and is_id(report_id):
        record = service.store.find_by_report(report_id)
        report = Report.model_validate_json(record.report_json) if record else None
    if report is None:
        raise HTTPException(404, "No report with this id (Run reports are kept for a while only).")
    return report


async def wait_for_render(service: ServiceState, result: dict) -> None:
    future = service.plots.schedule(result)
    timeout = service.settings.plot_wait_seconds
    try:
        await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
    except TimeoutError:
        retry = {"Retry-After": str(service.settings.retry_after_seconds)}
        raise HTTPException(
            503, "The plot is still being drawn; try again shortly.", retry
        ) from None
    except PlotError as exc:
        raise HTTPException(500, f"The grader could not draw this plot: {exc}") from None
