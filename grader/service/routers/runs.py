"""GET /api/runs/{report_id}: a Run's status and, once graded, its report.

A Run carries no identity: its random 128-bit report id, handed out by POST /api/run, is
what it takes to read it (as for its plots)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException

from grader.service.deps import Service, is_id
from grader.service.schemas import RunResponse
from grader.service.views import view_of

router = APIRouter(prefix="/api/runs", tags=["runs"])


@router.get("/{report_id}", response_model=RunResponse)
async def get_run(report_id: str, service: Service) -> RunResponse:
    found = (
        await asyncio.to_thread(service.store.by_grading, report_id) if is_id(report_id) else None
    )
    if found is None or found.submission.kind != "run":
        raise HTTPException(404, "No Run with this id (Run reports are kept for a while only).")
    return await view_of(service, found)
