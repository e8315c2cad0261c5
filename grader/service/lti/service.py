"""What the LTI side of the service holds while it runs: its store on the service's engine,
the tool's keys, the platforms' cached key sets, the AGS client and the passback drainer.

Built by the app's lifespan beside ServiceState (`app.state.lti`), in both deployments: in
the embedded one the single process drains the outbox; in the distributed one every API
node does, sharing the rows through the database (see passback.py).
"""

from __future__ import annotations

from typing import Annotated

import httpx
from fastapi import Depends, Request
from sqlalchemy import Engine

from grader.service.lti.ags import AgsClient
from grader.service.lti.keys import ToolKeys
from grader.service.lti.passback import Passback
from grader.service.lti.platform_keys import PlatformKeys
from grader.service.lti.store import LtiStore
from grader.settings import Settings

HTTP_TIMEOUT_S = 20.0  # one request to an LMS


class LtiService:
    def __init__(self, settings: Settings, engine: Engine):
        self.settings = settings
        self.store = LtiStore(engine)
        self.keys = ToolKeys(self.store)
        self.http: httpx.AsyncClient | None = None
        self.platform_keys: PlatformKeys | None = None
        self.passback: Passback | None = None

    async def start(self) -> None:
        self.http = httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, follow_redirects=False)
        self.platform_keys = PlatformKeys(self.http)
        ags = AgsClient(self.http, self.keys)
        self.passback = Passback(self.store, ags, self.settings.lti_retry_seconds)
        await self.passback.start()

    async def close(self) -> None:
        if self.passback is not None:
            await self.passback.close()
        if self.http is not None:
            await self.http.aclose()

    def base_url(self, request: Request) -> str:
        """Where LMSs and browsers reach this service (setting public_url, else the request's)."""
        return self.settings.public_url or str(request.base_url).rstrip("/")


def get_lti(request: Request) -> LtiService:
    return request.app.state.lti


Lti = Annotated[LtiService, Depends(get_lti)]
