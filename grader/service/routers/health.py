"""GET /healthz and GET /metrics.

/healthz, embedded: 200 once the grader's pools are warm (503 before), with the sandbox's
isolation level and a loud warning when it is weaker than bubblewrap, and in `warnings` each
entry of the data folder that other local users can reach. On an API node of the
distributed deployment: 200 while the database answers (503 when it does not), with the
number of grading nodes whose heartbeat is fresh ("degraded" when there is none: Submits
are then queued but nobody grades them).
"""

from __future__ import annotations

import asyncio
from functools import cache

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy.exc import SQLAlchemyError

from grader.service.deps import Service
from grader.service.file_modes import wider_than_private
from grader.service.schemas import Health
from grader.service.state import ServiceState
from grader.store import ago

router = APIRouter(tags=["health"])


@cache
def isolation() -> tuple[str, str]:
    """(level, warning): the sandbox this machine gives student code (embedded only)."""
    from grader.sandbox import WEAK_WARNING, detect_isolation

    info = detect_isolation()
    return info.level.name.lower(), WEAK_WARNING if info.weak else ""


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(service: Service):
    if service.settings.distributed:
        return await distributed_health(service)
    level, warning = await asyncio.to_thread(isolation)
    found = await asyncio.to_thread(wider_than_private, service.settings.data_dir)
    if service.ready:
        return Health(status="ok", isolation=level, warning=warning, warnings=found)
    detail = service.start_error or "the grader's sandbox pools are still warming up"
    status = "starting" if service.start_error is None else "failed"
    body = Health(status=status, detail=detail, isolation=level, warning=warning, warnings=found)
    return unavailable(service, body)


async def distributed_health(service: ServiceState):
    stalled = service.settings.stalled_seconds
    try:
        nodes = await asyncio.to_thread(service.store.live_nodes, ago(stalled))
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", error)).strip().splitlines()[0]
        body = Health(status="unavailable", deployment="distributed", database=reason)
        return unavailable(service, body)
    if nodes == 0:
        detail = f"no grading node has sent a heartbeat in the last {stalled:g} s"
        return Health(status="degraded", detail=detail, deployment="distributed", workers=0)
    return Health(status="ok", deployment="distributed", workers=nodes)


def unavailable(service: ServiceState, body: Health) -> JSONResponse:
    retry = {"Retry-After": str(service.settings.retry_after_seconds)}
    return JSONResponse(body.model_dump(), status_code=503, headers=retry)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(service: Service) -> PlainTextResponse:
    gauges = await asyncio.to_thread(service.gauges)
    gauges["gspo_grader_ready"] = ("1 once the grader is warm.", int(service.ready))
    if not service.settings.distributed:
        gauges["gspo_grader_pool_size"] = ("Warm judge processes.", service.pool_size())
    text = service.metrics.render(gauges)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")
