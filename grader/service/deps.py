"""Shared request dependencies: the running service, ids, and the two kinds of credential."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from grader.service.state import ServiceState

ID_PATTERN = re.compile(r"^[0-9a-f]{32}$")


def get_service(request: Request) -> ServiceState:
    return request.app.state.service


def new_id() -> str:
    """A random 128-bit id: unguessable, so it can stand in a URL."""
    return secrets.token_hex(16)


def is_id(value: str) -> bool:
    return bool(ID_PATTERN.match(value))


def new_student_key() -> str:
    return secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """Keys are 256 random bits, so a plain SHA-256 is enough: there is nothing to brute-force."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_matches(key: str | None, key_hash: str) -> bool:
    return key is not None and hmac.compare_digest(hash_key(key), key_hash)


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def is_instructor(request: Request, service: ServiceState) -> bool:
    """True for a request carrying the configured instructor token (never when none is set)."""
    configured = service.settings.instructor_token
    token = bearer_token(request)
    if configured is None or token is None:
        return False
    return hmac.compare_digest(token.encode(), configured.get_secret_value().encode())


def require_instructor(request: Request) -> ServiceState:
    """404 when no token is configured (the endpoints do not exist), 401 on a wrong token,
    429 once the client's address has failed `instructor_failures_per_minute` times."""
    service = get_service(request)
    if service.settings.instructor_token is None:
        raise HTTPException(404, "Instructor endpoints are disabled: no instructor token is set.")
    failures = request.app.state.instructor_failures
    address = request.client.host if request.client else "unknown"
    wait_s = failures.blocked(address)
    if wait_s:
        raise HTTPException(
            429,
            f"Too many wrong instructor tokens from {address}; try again in {wait_s:.0f} s.",
            headers={"Retry-After": f"{wait_s:.0f}"},
        )
    if not is_instructor(request, service):
        failures.record(address)
        raise HTTPException(
            401,
            "A valid instructor token is required (Authorization: Bearer <token>).",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return service


Service = Annotated[ServiceState, Depends(get_service)]
StudentKey = Annotated[str | None, Header(description="The key the first Submit returned.")]
