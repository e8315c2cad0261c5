"""GET /api/reports/{report_id}/plots/{name}.png: the toy's plots, drawn after the verdict.

A report id is a grading's id: random 128 bits handed out with a verdict, so the URL itself
is the credential (the page puts it in an <img> tag, which cannot send headers). The plots
are drawn by the grading node and stored in the database; one not drawn yet is waited for
up to `plot_wait_seconds`, then answers 503 with Retry-After.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

from grader.exercise import catalog
from grader.service.deps import Service, is_id
from grader.service.views import plot_names, report_of, toy_result
from grader.store import artifacts_key

router = APIRouter(prefix="/api/reports", tags=["reports"])
POLL_S = 0.1


@router.get(
    "/{report_id}/plots/{name}.png",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}},
)
async def plot(report_id: str, name: str, service: Service) -> Response:
    found = (
        await asyncio.to_thread(service.store.by_grading, report_id) if is_id(report_id) else None
    )
    report = report_of(found.grading) if found is not None else None
    if report is None:
        raise HTTPException(404, "No graded report with this id (Runs are kept for a while only).")
    exercise = catalog().get(found.submission.exercise)
    names = plot_names(exercise) if exercise else ()
    if name not in names:
        raise HTTPException(404, f"There is no plot named {name!r}; try {', '.join(names)}.")
    result = toy_result(report)
    if result is None:
        raise HTTPException(404, "This report has no toy experiment results to plot.")
    key = artifacts_key(exercise.id, result)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + service.settings.plot_wait_seconds
    while (png := await asyncio.to_thread(service.store.plot_png, key, name)) is None:
        if loop.time() >= deadline:
            retry = {"Retry-After": str(service.settings.retry_after_seconds)}
            raise HTTPException(503, "The plot is still being drawn; try again shortly.", retry)
        await asyncio.sleep(POLL_S)
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})
