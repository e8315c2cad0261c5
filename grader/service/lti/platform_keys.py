"""The platforms' public keys: each platform's key set (JWKS), fetched over HTTPS and cached.

A launch signed with a kid the cached set does not hold makes one fresh fetch (the platform
may have rotated its key); a kid still unknown after it is refused. A cached set is also
fetched again after `max_age_s`, so a key the platform withdrew stops being trusted.
"""

from __future__ import annotations

import time

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey

from grader.service.lti.refusal import ASK_ADMIN, Refused
from grader.service.lti.store import Platform

MAX_AGE_S = 3600.0


class PlatformKeys:
    def __init__(self, http: httpx.AsyncClient, max_age_s: float = MAX_AGE_S):
        self.http = http
        self.max_age_s = max_age_s
        self._cache: dict[int, tuple[float, list[RSAKey]]] = {}

    async def key(self, platform: Platform, kid: str | None) -> RSAKey | None:
        """The platform's RSA key with this kid (None when the set holds only one key and
        the token names none); None when no such key exists even after a fresh fetch."""
        cached = self._cache.get(platform.platform_id)
        fresh = cached is not None and time.monotonic() - cached[0] < self.max_age_s
        keys = cached[1] if fresh else await self._fetch(platform)
        found = _pick(keys, kid)
        if found is None and fresh:
            found = _pick(await self._fetch(platform), kid)
        return found

    async def _fetch(self, platform: Platform) -> list[RSAKey]:
        try:
            response = await self.http.get(
                platform.jwks_url, headers={"Accept": "application/json"}
            )
            response.raise_for_status()
            entries = response.json().get("keys", [])
        except (httpx.HTTPError, ValueError, AttributeError) as error:
            raise Refused(
                502,
                "The LMS's public keys could not be read",
                f"Fetching {platform.jwks_url} failed ({type(error).__name__}: {error}). "
                + ASK_ADMIN,
            ) from None
        keys = []
        for entry in entries if isinstance(entries, list) else []:
            try:
                keys.append(RSAKey.import_key(entry))
            except (JoseError, ValueError, TypeError, KeyError):
                continue  # another key type, or one for encryption: not ours to use
        self._cache[platform.platform_id] = (time.monotonic(), keys)
        return keys


def _pick(keys: list[RSAKey], kid: str | None) -> RSAKey | None:
    if kid is None:
        return keys[0] if len(keys) == 1 else None
    return next((key for key in keys if key.kid == kid), None)
