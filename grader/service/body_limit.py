"""An ASGI guard that refuses oversized request bodies with 413 before they are parsed.

The declared Content-Length is checked first; a body sent without one (chunked) is read up
to the limit and refused as soon as it passes it, so no request can make the service buffer
more than the limit.
"""

from __future__ import annotations

import json


class BodyLimit:
    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send)
        body, more, chunks = 0, True, []
        while more:
            message = await receive()
            if message["type"] != "http.request":
                chunks.append(message)
                break
            body += len(message.get("body", b""))
            if body > self.max_bytes:
                return await self._refuse(send)
            chunks.append(message)
            more = message.get("more_body", False)
        await self.app(scope, self._replay(chunks, receive), send)

    @staticmethod
    def _replay(chunks, receive):
        async def replayed():
            return chunks.pop(0) if chunks else await receive()

        return replayed

    async def _refuse(self, send) -> None:
        detail = f"The request body is larger than the limit of {self.max_bytes} bytes."
        payload = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
