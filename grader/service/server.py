"""`serve(host, port, data_dir)`: run the service under uvicorn, one worker process.

One process on purpose: the grader's warm pools live in it, and several uvicorn workers
would each start their own. uvicorn turns SIGTERM/SIGINT into a graceful shutdown, which
runs the app's lifespan exit and so closes the grader and its sandbox workers.
"""

from __future__ import annotations

import logging
from pathlib import Path

import uvicorn

from grader.exercise import default_exercise
from grader.judge.registry import load_tiers
from grader.service.app import create_app
from grader.service.settings import load_settings


def check_exercise() -> None:
    """Fail before listening when the tier registry is broken (TierRegistryError names the
    problem): a service that answers with no tiers would look healthy and grade nothing."""
    load_tiers(default_exercise().tiers_file)


def serve(
    host: str | None = None,
    port: int | None = None,
    data_dir: str | Path | None = None,
    grader=None,
) -> None:
    """Start the service and block until it is stopped. None keeps the configured value."""
    overrides = {"host": host, "port": port, "data_dir": data_dir}
    settings = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    check_exercise()
    app = create_app(settings, grader)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        workers=1,
        log_level=settings.log_level,
        timeout_graceful_shutdown=30,
    )
    uvicorn.Server(config).run()
