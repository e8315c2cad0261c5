"""Security headers on every response (an ASGI middleware), and the page with its nonce.

The page has no inline script or style (web/), so its Content-Security-Policy allows this
origin's files only, plus the editor's <style> by a nonce made for each load of the page (in
a <meta> the editor reads) and the LTI pages' one <style> by its hash. Style attributes
(KaTeX's sizes) are allowed: they run nothing. Only this origin, the registered LMSs (the
origins of each platform's issuer and login URL, read on every HTML response, so a platform
added while the service runs counts at once) and `frame_origins` may frame a page.
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
    "style-src-attr 'unsafe-inline'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'"
)
ALWAYS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]


def lms_origins(app) -> list[str]:
    try:
        platforms = app.state.lti.store.platforms() if hasattr(app.state, "lti") else []
    except SQLAlchemyError:  # the database is down: only this origin may frame the page
        return []
    urls = [urlsplit(url) for p in platforms for url in (p.issuer, p.auth_url)]
    found = {f"{u.scheme}://{u.netloc}" for u in urls if u.scheme and u.netloc}
    return sorted(found | set(app.state.settings.frame_origins.split()))


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
        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                ancestors = ["'self'"]
                if dict(headers).get(b"content-type", b"").startswith(b"text/html"):
                    ancestors += await asyncio.to_thread(lms_origins, scope["app"])
                nonce = scope.get("state", {}).get("style_nonce")
                policy = POLICY.format(nonce=f"'nonce-{nonce}' " if nonce else "")
                policy += "; frame-ancestors " + " ".join(ancestors)
                message = {**message, "headers": [*headers, *ALWAYS]}
                message["headers"].append((b"content-security-policy", policy.encode()))
            await send(message)

        send_on = with_headers if scope["type"] == "http" else send
        await self.app(scope, receive, send_on)
