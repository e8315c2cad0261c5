"""This tool's own keys, kept in the database so that every API node signs alike.

    keys = ToolKeys(store)
    keys.signing_key()   # the newest RSA key: signs the AGS token assertions (RS256)
    keys.jwks()          # GET /lti/jwks: the public halves of the newest two RSA keys
    keys.rotate()        # `gspo-grader lti rotate-key`: a new signing key; the one before
                         # stays published, so a platform holding a cached key set and an
                         # assertion signed a moment ago still verifies
    keys.session_key()   # the HMAC key of the page's session tokens (never published)

The first key of each kind is made when it is first needed. Two API nodes doing so at the
same moment each store one; both are then published and either verifies.
"""

from __future__ import annotations

import json
import threading

from joserfc.jwk import KeySet, OctKey, RSAKey

from grader.service.lti.store import LtiStore

TOOL = "tool"
SESSION = "session"
TOOL_KEYS_PUBLISHED = 2  # the signing key and its predecessor (room for one rotation)
RSA_BITS = 2048  # what LTI 1.3 platforms expect of RS256 keys
SESSION_KEY_BYTES = 32  # 256 bits for HS256


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
        return self._add_tool_key()

    def session_key(self) -> OctKey:
        return self.session_keys().keys[0]

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
        found = self.store.keys(TOOL)
        if not found:
            self._add_tool_key()
            found = self.store.keys(TOOL)
        return [RSAKey.import_key(json.loads(jwk)) for _, jwk in found[:TOOL_KEYS_PUBLISHED]]

    def _add_tool_key(self) -> str:
        parameters = {"use": "sig", "alg": "RS256"}
        key = RSAKey.generate_key(RSA_BITS, parameters=parameters, auto_kid=True)
        self.store.add_key(TOOL, key.kid, _dump(key), keep=TOOL_KEYS_PUBLISHED)
        return key.kid


def _dump(key) -> str:
    return json.dumps(key.as_dict(private=True))
