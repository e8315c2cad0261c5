"""`serve()`: run the service under uvicorn, one process; what `gspo-grader serve` runs.

Embedded (the default, SQLite): one process with the warm judges; several uvicorn workers
would each start their own. Distributed (PostgreSQL): an API node, which grades nothing; run
as many as you like, each with `serve`. uvicorn turns SIGTERM/SIGINT into a graceful
shutdown, which runs the app's lifespan exit and so closes the grader and its workers.

Before it listens, `serve` checks what would make it useless: a broken exercise or tier
registry, on PostgreSQL a database that cannot be reached or is not migrated, and embedded a
sandbox weaker than GSPO_GRADER_SANDBOX_REQUIRE (one line, exit status 2 from the CLI).
"""

from __future__ import annotations

from pathlib import Path

import uvicorn

from grader.node import check_database, check_exercises, configure_logging
from grader.sandbox import check_host
from grader.service.app import create_app
from grader.settings import Settings, load_settings


def serve(
    host: str | None = None,
    port: int | None = None,
    data_dir: str | Path | None = None,
    grader=None,
) -> None:
    """Start the service and block until it is stopped. None keeps the configured value."""
    overrides = {"host": host, "port": port, "data_dir": data_dir}
    settings = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    configure_logging(settings)
    check_exercises()
    check_database(settings)
    if not settings.distributed:
        check_host()
    uvicorn.Server(uvicorn_config(settings, create_app(settings, grader))).run()


def uvicorn_config(settings: Settings, app) -> uvicorn.Config:
    """One process; at most `http_max_connections` connections and requests at once (503
    beyond), idle keep-alive connections closed, request heads capped (h11). uvicorn has no
    read deadline for a slow head or body: the reverse proxy's (docs/deploy.md)."""
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        workers=1,
        log_level=settings.log_level,
        http="h11",
        limit_concurrency=settings.http_max_connections,
        timeout_keep_alive=settings.http_keep_alive_seconds,
        h11_max_incomplete_event_size=settings.http_max_header_bytes,
        timeout_graceful_shutdown=30,
    )
