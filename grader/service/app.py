"""The FastAPI application: routers, error shapes, the body-size guard, the security headers
and the web page (with the API reference at /docs).

`create_app(settings, grader)` builds the app; the lifespan opens the store and the queue
(and, embedded, warms the grader), and on shutdown closes them (a grader passed in stays its
caller's to close). Every error answers `{"detail": "<one sentence>"}`; a database that
does not answer is a 503 with Retry-After, never a 500.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import DBAPIError

from grader import __version__
from grader.service.body_limit import BodyLimit
from grader.service.file_modes import make_private
from grader.service.headers import SecurityHeaders, page_with_nonce
from grader.service.lti import LtiService
from grader.service.lti import routers as lti_routers
from grader.service.ratelimit import FailureLimit
from grader.service.routers import (
    course,
    exercises,
    grade,
    health,
    instructor,
    reports,
    runs,
    submissions,
)
from grader.service.state import ServiceState
from grader.settings import Settings, load_settings
from grader.store import DatabaseError

log = logging.getLogger(__name__)

FALLBACK_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gspo-grader</title></head>
<body>
<h1>gspo-grader is running</h1>
<p>The web page has not been built, so there is nothing to show here yet.
Build it with <code>npm ci &amp;&amp; npm run build</code> in <code>web/</code>
and reload.</p>
<p>The HTTP API works without it: see <a href="/openapi.json">/openapi.json</a>.</p>
</body></html>
"""


def create_app(settings: Settings | None = None, grader=None, draw=None) -> FastAPI:
    """The service. `grader` defaults to a warm `grader.judge.Grader` built from settings;
    `draw`, how the embedded node draws a toy result's plots, to a plotting process of the
    node's own (node/drawing.py)."""
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if not settings.distributed:
            make_private(settings.data_dir)
        app.state.service = ServiceState(settings, grader, draw)
        app.state.lti = LtiService(settings, app.state.service.store.engine)
        try:
            await app.state.service.start()
            await app.state.lti.start()
            yield
        finally:
            await app.state.lti.close()
            await app.state.service.close()

    app = FastAPI(
        title="gspo-grader",
        version=__version__,
        summary="Grades paper-to-code exercises in a sandbox and reports tier by tier.",
        lifespan=lifespan,
        docs_url=None,  # /docs is Swagger UI from the page's build (mount_web), never a CDN
        redoc_url=None,
        openapi_url="/openapi.json" if settings.docs else None,
    )
    app.state.settings = settings
    app.state.instructor_failures = FailureLimit(settings.instructor_failures_per_minute)
    app.add_middleware(BodyLimit, max_bytes=body_limit(settings.max_code_bytes))
    app.add_middleware(SecurityHeaders)
    app.add_exception_handler(RequestValidationError, validation_error)
    for error in DATABASE_ERRORS:
        app.add_exception_handler(error, database_unavailable)
    app.add_exception_handler(Exception, internal_error)
    routers = (exercises, grade, runs, submissions, reports, instructor, course, health)
    for module in routers:
        app.include_router(module.router)
    for router in lti_routers:
        app.include_router(router)
    mount_web(app, settings)
    return app


def body_limit(max_code_bytes: int) -> int:
    """The largest request body that can hold code of the allowed size: JSON may escape a
    byte as \\u00XX (6 bytes), plus room for the other fields."""
    return 6 * max_code_bytes + 16 * 1024


def mount_web(app: FastAPI, settings: Settings) -> None:
    """Serve web/dist at / (and its instructor page at /instructor) when it has been built;
    otherwise a page that says how to build it."""
    web_dir = settings.resolved_web_dir
    if not settings.docs:

        @app.get("/docs{rest:path}", include_in_schema=False)
        def no_docs(rest: str) -> None:
            raise HTTPException(404, "The API reference is turned off (GSPO_GRADER_DOCS=false).")

    if (web_dir / "index.html").is_file():
        app.get("/", include_in_schema=False)(page_with_nonce(web_dir / "index.html"))

        @app.get("/instructor", include_in_schema=False)
        def instructor_page() -> FileResponse:
            return FileResponse(web_dir / "instructor.html")

        app.mount("/", StaticFiles(directory=web_dir, html=True), name="web")
        return

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def fallback_page() -> HTMLResponse:
        return HTMLResponse(FALLBACK_PAGE)


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    return JSONResponse({"detail": describe_validation(exc.errors())}, status_code=422)


def describe_validation(errors) -> str:
    """One sentence for the first problem (the client fixes them one at a time anyway)."""
    if not errors:
        return "The request is not valid."
    first = errors[0]
    location = [str(part) for part in first.get("loc", ()) if part not in ("body", "query")]
    field = ".".join(location) or "body"
    if first.get("type") == "missing":
        return f"The field {field!r} is required."
    if first.get("type") == "json_invalid":
        return "The request body is not valid JSON."
    why = first.get("msg", "invalid value").rstrip(".")  # our own messages end in one
    return f"The field {field!r} is not valid: {why}."


DATABASE_ERRORS = (DBAPIError, DatabaseError)


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
    retry = str(request.app.state.settings.retry_after_seconds)
    detail = (
        "The grader's database is not answering; try again shortly (your code is not at fault)."
    )
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": retry})


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    detail = "The grader service hit an internal error; this is our fault, not your code's."
    return JSONResponse({"detail": detail}, status_code=500)
