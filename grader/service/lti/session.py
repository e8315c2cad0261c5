"""The page's LTI session: a short-lived signed token, sent in a header, never a cookie.

An LMS shows the tool in an iframe, where browsers block third-party cookies. So after a
launch the page gets a token (HS256 with the tool's session key, SESSION_MINUTES of life)
in the fragment of the address it is sent to, keeps it in memory and sessionStorage, and
sends it as `X-LTI-Session` on every API call; GET /api/lti/session hands out a fresh one.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Literal

from joserfc import jwt
from joserfc.errors import JoseError

from grader.service.lti.keys import ToolKeys

SESSION_HEADER = "X-LTI-Session"
SESSION_MINUTES = 60  # the page renews it while open; a closed laptop needs a new launch
ISSUER = "gspo-grader"
AUDIENCE = "gspo-grader-page"


@dataclass(frozen=True)
class Session:
    """Who is working, in which course and link, on which exercise."""

    user_id: int
    student: str  # the students row their submissions are filed under
    name: str  # as the LMS sends it
    role: Literal["student", "instructor"]
    course_id: int
    course_title: str
    link_id: int
    exercise: str
    expires_at: int = 0  # seconds since the epoch


def issue(keys: ToolKeys, session: Session) -> tuple[str, Session]:
    """A signed token for the session, and the session with its new expiry."""
    now = int(time.time())
    renewed = Session(**{**asdict(session), "expires_at": now + SESSION_MINUTES * 60})
    claims = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": renewed.expires_at}
    claims["session"] = asdict(renewed)
    key = keys.session_key()
    return jwt.encode({"alg": "HS256", "kid": key.kid}, claims, key), renewed


def verify(keys: ToolKeys, token: str | None) -> Session | None:
    """The session a token carries; None when it is missing, forged or expired."""
    if not token:
        return None
    try:
        decoded = jwt.decode(token, keys.session_keys(), algorithms=["HS256"])
    except JoseError:
        try:  # a key another API node made a moment ago
            decoded = jwt.decode(token, keys.session_keys(refresh=True), algorithms=["HS256"])
        except JoseError:
            return None
    claims = decoded.claims
    if claims.get("iss") != ISSUER or claims.get("aud") != AUDIENCE:
        return None
    if not isinstance(claims.get("exp"), int) or claims["exp"] < time.time():
        return None
    try:
        return Session(**claims["session"])
    except (KeyError, TypeError):
        return None
