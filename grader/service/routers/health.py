"""GET /healthz (200 once the grader's pools are warm, 503 before) and GET /metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse

from grader.service.deps import Service
from grader.service.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
def healthz(service: Service):
    if service.ready:
        return Health(status="ok")
    detail = service.start_error or "the grader's sandbox pools are still warming up"
    retry = {"Retry-After": str(service.settings.retry_after_seconds)}
    body = {"status": "starting" if service.start_error is None else "failed", "detail": detail}
    return JSONResponse(body, status_code=503, headers=retry)


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(service: Service) -> PlainTextResponse:
    gauges = {
        "gspo_grader_queue_depth": ("Gradings waiting for a slot.", service.queue.waiting),
        "gspo_grader_in_flight": ("Gradings running now.", service.queue.in_flight),
        "gspo_grader_pool_size": ("Pre-started sandbox workers.", service.pool_size()),
        "gspo_grader_ready": ("1 once the grader is warm.", int(service.ready)),
    }
    text = service.metrics.render(gauges)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")
