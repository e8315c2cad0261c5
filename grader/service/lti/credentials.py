"""This tool's keys, kept in the database so that every API node signs alike, and the
page's session tokens they sign.

    keys = ToolKeys(store)
    keys.signing_key()   # the newest RSA key: signs the AGS token assertions (RS256)
    keys.jwks()          # GET /lti/jwks: the public halves of the newest two RSA keys
    keys.rotate()        # `gspo-grader lti rotate-key`: a new signing key; the one before
                         # stays published for platforms holding a cached key set
    keys.session_keys()  # the HMAC keys of the page's session tokens (never published)

The first key of each kind is made when it is first needed (two API nodes doing so at once
each store one; both are then published and either verifies).

A session is a short-lived signed token (HS256, SESSION_MINUTES of life) sent in the
`X-LTI-Session` header, never a cookie: an LMS shows the tool in an iframe, where browsers
block third-party cookies. Renewing it never moves its end past `ends_at`, fixed at the
launch (setting lti_session_hours). The launch does not hand the page a session: it hands
a handoff code, bound to a cookie set on the browser that made the launch, which the page
exchanges for the session (POST /lti/session); a link carrying someone else's code signs
nobody in.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from dataclasses import asdict, dataclass, replace

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, OctKey, RSAKey

from grader.service.lti.rows import LtiStore

TOOL, SESSION = "tool", "session"  # the kinds of keys
TOOL_KEYS_PUBLISHED = 2  # the signing key and its predecessor (room for one rotation)
RSA_BITS = 2048  # what LTI 1.3 platforms expect of RS256 keys
SESSION_KEY_BYTES = 32  # 256 bits for HS256
SESSION_HEADER = "X-LTI-Session"
SESSION_MINUTES = 60  # the page renews it while open; a closed laptop needs a new launch
HANDOFF_S = 120  # the page exchanges the launch's code within this
ISSUER = "gspo-grader"
PAGE, HANDOFF = "gspo-grader-page", "gspo-grader-handoff"  # the audiences of the two tokens
HANDOFF_COOKIE = "gspo_lti_page_"  # + the code's id: two launching tabs do not collide


class ToolKeys:
    def __init__(self, store: LtiStore):
        self.store = store
        self._lock = threading.Lock()
        self._session: KeySet | None = None

    def signing_key(self) -> RSAKey:
        return self._tool_keys()[0]

    def jwks(self) -> dict:
        return {"keys": [key.as_dict(private=False) for key in self._tool_keys()]}

    def rotate(self) -> str:
        """Make a new signing key; its kid. Only the newest two stay published."""
        parameters = {"use": "sig", "alg": "RS256"}
        key = RSAKey.generate_key(RSA_BITS, parameters=parameters, auto_kid=True)
        self.store.add_key(TOOL, key.kid, _dump(key), keep=TOOL_KEYS_PUBLISHED)
        return key.kid

    def session_keys(self, refresh: bool = False) -> KeySet:
        """Every session key, newest first (cached; `refresh` reads the database again)."""
        with self._lock:
            if self._session is None or refresh:
                found = self.store.keys(SESSION)
                if not found:
                    key = OctKey.generate_key(SESSION_KEY_BYTES * 8, auto_kid=True)
                    self.store.add_key(SESSION, key.kid, _dump(key), keep=TOOL_KEYS_PUBLISHED)
                    found = self.store.keys(SESSION)
                self._session = KeySet([OctKey.import_key(json.loads(jwk)) for _, jwk in found])
            return self._session

    def _tool_keys(self) -> list[RSAKey]:
        found = self.store.keys(TOOL) or (self.rotate() and self.store.keys(TOOL))
        return [RSAKey.import_key(json.loads(jwk)) for _, jwk in found[:TOOL_KEYS_PUBLISHED]]


def _dump(key) -> str:
    return json.dumps(key.as_dict(private=True))


@dataclass(frozen=True)
class Session:
    """Who is working, in which course and link, on which exercise."""

    user_id: int
    student: str  # the students row their submissions are filed under
    name: str  # as the LMS sends it
    role: str  # student or instructor
    course_id: int
    course_title: str
    link_id: int
    exercise: str
    ends_at: int  # seconds since the epoch: the launch's session ends then, renewed or not
    expires_at: int = 0  # this token's end (seconds since the epoch)


def issue_session(keys: ToolKeys, session: Session) -> tuple[str, Session]:
    """A signed token for the session, and the session with its new expiry."""
    now = int(time.time())
    renewed = replace(session, expires_at=min(now + SESSION_MINUTES * 60, session.ends_at))
    return _sign(keys, PAGE, renewed.expires_at, {"session": asdict(renewed)}), renewed


def verify_session(keys: ToolKeys, token: str | None) -> Session | None:
    """The session a token carries; None when it is missing, forged or expired."""
    return _session_of(_verified(keys, PAGE, token))


def issue_handoff(keys: ToolKeys, session: Session) -> tuple[str, str]:
    """(code, Set-Cookie header): the code carries the session to the page, and is
    exchanged only with the cookie, which only the launching browser holds. The cookie is
    partitioned (CHIPS), like the login's: kept in the LMS's iframe by browsers that block
    third-party cookies."""
    binder, code_id = secrets.token_urlsafe(24), secrets.token_hex(6)
    claims = {"session": asdict(session), "id": code_id, "binder": _digest(binder)}
    code = _sign(keys, HANDOFF, int(time.time()) + HANDOFF_S, claims)
    attributes = f"Max-Age={HANDOFF_S}; Path=/lti/; Secure; HttpOnly; SameSite=None; Partitioned"
    return code, f"{HANDOFF_COOKIE}{code_id}={binder}; {attributes}"


def take_handoff(keys: ToolKeys, code: str | None, cookies: dict[str, str]) -> Session | None:
    """The session a handoff code carries, if this browser holds its cookie; else None."""
    claims = _verified(keys, HANDOFF, code)
    binder = cookies.get(HANDOFF_COOKIE + str(claims.get("id")))
    if binder is None or not secrets.compare_digest(_digest(binder), str(claims["binder"])):
        return None
    return _session_of(claims)


def _session_of(claims: dict) -> Session | None:
    try:
        session = Session(**claims["session"])
    except (KeyError, TypeError):
        return None
    return session if session.ends_at > time.time() else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sign(keys: ToolKeys, audience: str, expires_at: int, claims: dict) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": audience, "iat": now, "exp": expires_at, **claims}
    key = keys.session_keys().keys[0]
    return jwt.encode({"alg": "HS256", "kid": key.kid}, claims, key)


def _verified(keys: ToolKeys, audience: str, token: str | None) -> dict:
    """The claims of a token of ours for this audience, unexpired; {} otherwise."""
    claims = {}
    for refresh in (False, True) if token else ():  # then: a key another node just made
        try:
            claims = jwt.decode(token, keys.session_keys(refresh), algorithms=["HS256"]).claims
            break
        except (JoseError, ValueError):
            continue
    if claims.get("iss") != ISSUER or claims.get("aud") != audience:
        return {}
    if not isinstance(claims.get("exp"), int) or claims["exp"] < time.time():
        return {}
    return claims
