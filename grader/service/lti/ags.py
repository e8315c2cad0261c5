"""Assignment and Grade Services: posting a score to a line item (LTI AGS 2.0, section 3.4),
with an access token from the client-credentials grant (IMS Security Framework 4.1).

    ags = AgsClient(http, keys)
    outcome = await ags.post_score(platform, lineitem_url, score)   # sent, refused or retry

The token request is signed by this tool: a JWT assertion (RS256 with the newest tool key,
`iss` and `sub` the client id, `aud` the platform's token URL or the audience it names, a
unique `jti`, five minutes of life). Tokens are cached per registration and scope until a
minute before they expire; a 401 from the score endpoint drops the cached token.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

import httpx
from joserfc import jwt

from grader.service.lti.keys import ToolKeys
from grader.service.lti.launch import SCORE_SCOPE
from grader.service.lti.store import Platform

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SCORE_MEDIA_TYPE = "application/vnd.ims.lis.v1.score+json"
ASSERTION_LIFE_S = 300
TOKEN_MARGIN_S = 60  # a cached token is renewed this long before it expires
FINAL = {400, 403, 404, 405, 409, 410, 413, 415, 422}  # the LMS will not take this score


@dataclass(frozen=True)
class Score:
    user_id: str  # the LMS's `sub` for the student
    given: float
    maximum: float
    timestamp: str  # ISO 8601: when the score was reached (the LMS keeps the newest)


@dataclass(frozen=True)
class Outcome:
    kind: Literal["sent", "refused", "retry"]
    status: int | None = None  # the LMS's HTTP status; None when it could not be reached
    message: str = ""
    retry_after_s: float | None = None


def scores_url(lineitem: str) -> str:
    """The line item's scores endpoint: /scores after its path, before any query string."""
    parts = urlsplit(lineitem)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


def score_body(score: Score) -> dict:
    return {
        "userId": score.user_id,
        "scoreGiven": score.given,
        "scoreMaximum": score.maximum,
        "activityProgress": "Completed",
        "gradingProgress": "FullyGraded",
        "timestamp": score.timestamp,
    }


class TokenRefused(Exception):
    """The platform's token endpoint did not hand out a token."""


class AgsClient:
    def __init__(self, http: httpx.AsyncClient, keys: ToolKeys):
        self.http = http
        self.keys = keys
        self._tokens: dict[tuple[int, str], tuple[str, float]] = {}

    async def post_score(self, platform: Platform, lineitem: str, score: Score) -> Outcome:
        try:
            response = await self._post(platform, lineitem, score)
            if response.status_code == 401:  # a token the platform dropped early: once more
                self._tokens.pop((platform.platform_id, SCORE_SCOPE), None)
                response = await self._post(platform, lineitem, score)
        except TokenRefused as error:
            return Outcome("retry", None, str(error))
        except httpx.HTTPError as error:
            return Outcome("retry", None, f"{type(error).__name__}: {error}".strip())
        return outcome_of(response)

    async def _post(self, platform: Platform, lineitem: str, score: Score) -> httpx.Response:
        token = await self.token(platform, SCORE_SCOPE)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": SCORE_MEDIA_TYPE}
        return await self.http.post(scores_url(lineitem), json=score_body(score), headers=headers)

    async def token(self, platform: Platform, scope: str) -> str:
        cached = self._tokens.get((platform.platform_id, scope))
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        form = {
            "grant_type": "client_credentials",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": self.assertion(platform),
            "scope": scope,
        }
        response = await self.http.post(platform.token_url, data=form)
        try:
            response.raise_for_status()
            body = response.json()
            token, life = str(body["access_token"]), float(body.get("expires_in", 3600))
        except (httpx.HTTPStatusError, ValueError, KeyError, TypeError):
            refusal = f"the LMS's token endpoint answered {response.status_code}"
            raise TokenRefused(f"{refusal}: {_excerpt(response)}") from None
        expires = time.monotonic() + life - TOKEN_MARGIN_S
        self._tokens[(platform.platform_id, scope)] = (token, expires)
        return token

    def assertion(self, platform: Platform) -> str:
        key = self.keys.signing_key()
        now = int(time.time())
        claims = {
            "iss": platform.client_id,
            "sub": platform.client_id,
            "aud": platform.audience,
            "iat": now,
            "exp": now + ASSERTION_LIFE_S,
            "jti": secrets.token_urlsafe(24),
        }
        return jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "JWT"}, claims, key)


def outcome_of(response: httpx.Response) -> Outcome:
    status = response.status_code
    if 200 <= status < 300:
        return Outcome("sent", status)
    message = f"the LMS answered {status}: {_excerpt(response)}"
    if status in FINAL:
        return Outcome("refused", status, message)
    return Outcome("retry", status, message, _retry_after(response))


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def _excerpt(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return (text[:300] + "…") if len(text) > 300 else (text or response.reason_phrase)
