"""Security headers on every response, as an ASGI middleware.

The page is built with no inline script or style (web/), so its Content-Security-Policy
allows only this origin's files, plus the editor's <style> by a nonce made for each load of
the page (`page_with_nonce`, given to the page in a <meta>); the LTI pages' one inline style
is allowed by its hash. Style attributes (KaTeX's sizes) are allowed: they cannot run code.
Only this origin and the registered LMSs (their issuers' and login endpoints' origins, read
on each HTML response so a platform added by `gspo-grader lti add-platform` counts at once)
may frame a page.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse
from sqlalchemy.exc import SQLAlchemyError

from grader.service.lti.pages import STYLE

LTI_STYLE = "'sha256-" + base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode() + "'"
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' {nonce}" + LTI_STYLE + "; "
    "style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'"
)
ALWAYS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def origin(url: str) -> str | None:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


def lms_origins(app) -> list[str]:
    """The origins of every registered LTI platform (none before the app has started)."""
    lti = getattr(app.state, "lti", None)
    try:
        platforms = lti.store.platforms() if lti is not None else []
    except SQLAlchemyError:  # the database is down: only this origin may frame the page
        return []
    found = {origin(url) for p in platforms for url in (p.issuer, p.auth_url)}
    return sorted(o for o in found if o)


def page_with_nonce(index: Path):
    """The route of the page: index.html with a fresh nonce for the editor's styles."""

    def page(request: Request) -> HTMLResponse:
        request.state.style_nonce = nonce = secrets.token_urlsafe(16)
        meta = f'<head><meta name="csp-nonce" content="{nonce}" />'
        html = index.read_text(encoding="utf-8").replace("<head>", meta, 1)
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    return page


class SecurityHeaders:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                kind = dict(headers).get(b"content-type", b"")
                ancestors = ["'self'"]
                if kind.startswith(b"text/html"):
                    ancestors += await asyncio.to_thread(lms_origins, scope["app"])
                nonce = scope.get("state", {}).get("style_nonce")
                policy = POLICY.format(nonce=f"'nonce-{nonce}' " if nonce else "")
                policy += f"; frame-ancestors {' '.join(ancestors)}"
                headers += [*ALWAYS, (b"content-security-policy", policy.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
