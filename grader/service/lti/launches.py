"""Signing in from an LMS: OIDC login initiation (LTI 1.3 core 4.1), the platforms' key
sets, the launch's id_token (core 5; IMS Security Framework 5.1), and its roles.

    redirect = start_login(store, params, launch_url, address, most_per_address)
    launch = await validate_launch(id_token, login, platform, platform_keys)

Every check raises `Refused(status, title, detail)`, shown as a page that says what was
wrong and who can fix it, with a 4xx status (502 when the LMS could not be reached). The
page never shows the LMS's internal addresses or connection errors: those go to the log.

The launch checks, in order: a JWS signed with RS256 by a key of the platform's key set;
`iss` the registration's; `aud` holds its client id (and `azp` is it, with several); `exp`
and `iat` within LEEWAY_S; the login's nonce; LTI 1.3.0; a registered deployment; a resource
link launch with a user and a role this tool knows; for a student, an AGS line item with
the score scope.
"""

from __future__ import annotations

import logging
import secrets
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from fastapi.responses import RedirectResponse
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey
from joserfc.jws import extract_compact

from grader.service.lti.rows import (
    LOGIN_TTL_S,
    Launch,
    LoginState,
    LtiStore,
    Platform,
    address_tag,
    later,
)
from grader.term import TermError, at

log = logging.getLogger(__name__)

LEEWAY_S = 60  # clocks of the LMS and of this tool may differ by this much
KEY_SET_MAX_AGE_S = 3600.0  # a cached key set is fetched again after this
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
TEACHING = {"Instructor", "ContentDeveloper", "Administrator", "Manager", "TeachingAssistant"}
STAFF = {"Instructor", "Faculty", "Administrator", "SysAdmin"}  # institution, system
STUDENTS = {"Student", "Learner"}
RELAUNCH = "Open the exercise again from your course."
ASK_ADMIN = "Ask the LMS administrator to check the tool's registration (see docs/lti.md)."
LINEITEM_SCOPES = (  # either lets a tool read a line item (its endDateTime: routes.py, DueDates)
    "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly",
    "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
)
COOKIE_PREFIX = "gspo_lti_"  # + the state's last 16 characters: tabs do not collide


class Refused(Exception):
    def __init__(self, status: int, title: str, detail: str):
        super().__init__(f"{title}: {detail}")
        self.status, self.title, self.detail = status, title, detail


def role_of(roles: list) -> str | None:
    """student, instructor or None. Course roles (`.../membership#Learner`, a sub-role
    such as `.../membership/Instructor#TeachingAssistant`, or the short form `Learner`)
    decide; institution and system roles count only when a launch carries no course role,
    so a member of staff taking a course as a learner is a student in it."""
    course, other = set(), set()
    for role in (r for r in roles if isinstance(r, str)):
        name = role.rsplit("#", 1)[-1] if "#" in role else role.rsplit("/", 1)[-1]
        if role.startswith(LIS + "membership"):
            course.add(name)
            if "/Instructor#" in role or "/Administrator#" in role:
                course.add("Instructor")  # a sub-role of a teaching role
        elif role.startswith(LIS):
            other.add(name)
        elif "/" not in role and "#" not in role:
            course.add(role)
    names, teaching = (course, TEACHING) if course else (other, STAFF)
    if names & teaching:
        return "instructor"
    return "student" if names & ({"Learner"} if course else STUDENTS) else None


def cookie_name(state: str) -> str:
    return COOKIE_PREFIX + "".join(ch for ch in state[-16:] if ch.isalnum())


def registration_for(store: LtiStore, params: dict[str, str]) -> Platform:
    """The registration a login names, by (issuer, client id); never by issuer alone."""
    incomplete = "The LMS's login request is incomplete"
    missing = [p for p in ("iss", "login_hint", "target_link_uri") if not params.get(p)]
    if missing:
        raise Refused(400, incomplete, f"It lacks {', '.join(missing)}. " + ASK_ADMIN)
    if not params.get("client_id"):
        detail = "It names no client_id, and this tool finds a registration by issuer and "
        raise Refused(400, incomplete, detail + "client id together. " + ASK_ADMIN)
    platform = store.find_platform(params["iss"], params["client_id"])
    if platform is None:
        detail = (
            f"No registration has issuer {params['iss']!r} and client id "
            f"{params['client_id']!r}. An administrator adds it with "
            "`gspo-grader lti add-platform` (see docs/lti.md)."
        )
        raise Refused(403, "This LMS is not registered", detail)
    _check_deployment(platform, params.get("lti_deployment_id"), required=False)
    return platform


def _check_deployment(platform: Platform, deployment, required: bool = True) -> None:
    if (required or deployment) and deployment not in platform.deployment_ids:
        detail = f"Deployment {deployment!r} of {platform.issuer} is not registered. " + ASK_ADMIN
        raise Refused(403, "Unknown deployment", detail)


def start_login(
    store: LtiStore, params: dict[str, str], launch_url: str, address: str | None, most: int
) -> RedirectResponse:
    """A fresh state and nonce (single use, LOGIN_TTL_S of life; at most `most` live per
    client address), and a redirect to the LMS's authorisation URL."""
    platform = registration_for(store, params)
    login = LoginState(
        state=f"{address_tag(address)}.{secrets.token_urlsafe(32)}",
        nonce=secrets.token_urlsafe(32),
        platform_id=platform.platform_id,
        target_link_uri=params["target_link_uri"],
        login_hint=params["login_hint"],
        message_hint=params.get("lti_message_hint"),
        expires_at=later(LOGIN_TTL_S),
    )
    if not store.add_state(login, most):
        log.warning("LTI login refused: %s live logins from %s", most, address)
        detail = "Too many sign-ins from your network are under way. Wait a few minutes, "
        raise Refused(
            429, "Too many sign-ins", detail + "then " + RELAUNCH[0].lower() + RELAUNCH[1:]
        )
    request = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post"}
    request |= {"prompt": "none", "client_id": platform.client_id, "redirect_uri": launch_url}
    request |= {"login_hint": login.login_hint, "state": login.state, "nonce": login.nonce}
    if login.message_hint is not None:
        request["lti_message_hint"] = login.message_hint
    joiner = "&" if "?" in platform.auth_url else "?"
    response = RedirectResponse(platform.auth_url + joiner + urlencode(request), status_code=302)
    # Partitioned (CHIPS): kept inside the LMS's iframe by browsers that block third-party
    # cookies. Written by hand: Python before 3.14 cannot say Partitioned.
    attributes = f"Max-Age={LOGIN_TTL_S}; Path=/lti/; Secure; HttpOnly; SameSite=None; Partitioned"
    response.headers.append("Set-Cookie", f"{cookie_name(login.state)}={login.state}; {attributes}")
    return response


def login_again_url(base_url: str, platform: Platform, login: LoginState) -> str:
    """The same login, to be started again in a tab of its own."""
    params = {"iss": platform.issuer, "client_id": platform.client_id}
    params |= {"login_hint": login.login_hint, "target_link_uri": login.target_link_uri}
    if login.message_hint is not None:
        params["lti_message_hint"] = login.message_hint
    return f"{base_url}/lti/login?{urlencode(params)}"


class PlatformKeys:
    """Each platform's key set (JWKS), fetched over HTTPS and cached for
    KEY_SET_MAX_AGE_S. A kid the cached set lacks makes a fresh fetch (the platform may
    have rotated its key), but a platform's set is fetched at most once per
    `refetch_s`, however many launches name unknown kids."""

    def __init__(self, http: httpx.AsyncClient, refetch_s: float):
        self.http = http
        self.refetch_s = refetch_s
        self._cache: dict[int, tuple[float, list[RSAKey]]] = {}
        self._fetched_at: dict[int, float] = {}

    async def key(self, platform: Platform, kid: str | None) -> RSAKey | None:
        """The platform's RSA key with this kid (or its only key, when the token names
        none); None when no such key is known."""
        cached_at, keys = self._cache.get(platform.platform_id, (None, None))
        now, found = time.monotonic(), _pick(keys or [], kid)
        stale = cached_at is None or now - cached_at >= KEY_SET_MAX_AGE_S
        may_fetch = now - self._fetched_at.get(platform.platform_id, -1e9) >= self.refetch_s
        if (found is None or stale) and may_fetch:
            found = _pick(await self._fetch(platform), kid)
        elif keys is None:  # the last fetch, a moment ago, failed
            raise Refused(502, "The LMS's public keys could not be read", _KEYS_LATER)
        return found

    async def _fetch(self, platform: Platform) -> list[RSAKey]:
        self._fetched_at[platform.platform_id] = time.monotonic()
        try:
            accept = {"Accept": "application/json"}
            response = await self.http.get(platform.jwks_url, headers=accept)
            response.raise_for_status()
            entries = response.json().get("keys", [])
        except (httpx.HTTPError, ValueError, AttributeError) as error:
            log.warning("fetching the key set %s failed: %r", platform.jwks_url, error)
            raise Refused(502, "The LMS's public keys could not be read", _KEYS_LATER) from None
        keys = []
        for entry in entries if isinstance(entries, list) else []:
            try:
                keys.append(RSAKey.import_key(entry))
            except (JoseError, ValueError, TypeError, KeyError):
                continue  # another key type, or one for encryption: not ours to use
        self._cache[platform.platform_id] = (time.monotonic(), keys)
        return keys


_KEYS_LATER = "Wait a minute, then " + RELAUNCH[0].lower() + RELAUNCH[1:] + " " + ASK_ADMIN


def _pick(keys: list[RSAKey], kid: str | None) -> RSAKey | None:
    if kid is None:
        return keys[0] if len(keys) == 1 else None
    return next((key for key in keys if key.kid == kid), None)


async def validate_launch(
    id_token: str, login: LoginState, platform: Platform, keys: PlatformKeys
) -> Launch:
    claims = await verified_claims(id_token, platform, keys)
    check_registered_claims(claims, platform, login.nonce)
    check_lti_claims(claims, platform)
    return launch_of(claims, platform)


async def verified_claims(id_token: str, platform: Platform, keys: PlatformKeys) -> dict:
    bad = "The launch's id_token is not valid"
    try:
        header = extract_compact(id_token.encode()).protected
    except (JoseError, ValueError, UnicodeError):
        raise Refused(400, bad, "It is not a signed JSON Web Token. " + RELAUNCH) from None
    if header.get("alg") != "RS256":
        detail = f"It is signed with {header.get('alg')!r}; LTI 1.3 requires RS256."
        raise Refused(401, bad, detail)
    key = await keys.key(platform, header.get("kid"))
    if key is None:
        log.warning("launch signed with kid %r, not in %s", header.get("kid"), platform.jwks_url)
        detail = f"It is signed with key {header.get('kid')!r}, which the LMS's key set "
        raise Refused(401, bad, detail + "does not hold. " + _KEYS_LATER)
    try:
        token = jwt.decode(id_token, key, algorithms=["RS256"])
    except JoseError:
        detail = "Its signature does not verify with the LMS's key. " + RELAUNCH
        raise Refused(401, bad, detail) from None
    if not isinstance(token.claims, dict):
        raise Refused(400, bad, "Its payload is not a JSON object.")
    return token.claims


def check_registered_claims(claims: dict, platform: Platform, nonce: str) -> None:
    bad = "The launch's id_token is not valid"
    if claims.get("iss") != platform.issuer:
        detail = f"It was issued by {claims.get('iss')!r}, not by {platform.issuer!r}."
        raise Refused(401, bad, detail)
    audience = claims.get("aud")
    audience = [audience] if isinstance(audience, str) else audience
    if not isinstance(audience, list) or platform.client_id not in audience:
        detail = f"Its audience {claims.get('aud')!r} is not this tool ({platform.client_id!r})."
        raise Refused(401, bad, detail + " " + ASK_ADMIN)
    if ("azp" in claims or len(audience) > 1) and claims.get("azp") != platform.client_id:
        detail = f"Its authorized party {claims.get('azp')!r} is not {platform.client_id!r}."
        raise Refused(401, bad, detail)
    now = time.time()
    expires, issued = claims.get("exp"), claims.get("iat")
    if not isinstance(expires, int | float) or not isinstance(issued, int | float):
        raise Refused(401, bad, "It has no expiry (exp) or issue time (iat).")
    if expires < now - LEEWAY_S:
        raise Refused(401, "This launch has expired", f"It expired at {expires:.0f}. " + RELAUNCH)
    if issued > now + LEEWAY_S:
        raise Refused(401, bad, "It was issued in the future: the LMS's clock is wrong.")
    if claims.get("nonce") != nonce:
        raise Refused(401, bad, "Its nonce is not the one this login issued. " + RELAUNCH)


def check_lti_claims(claims: dict, platform: Platform) -> None:
    bad = "This launch cannot be accepted"
    if claims.get(CLAIM + "version") != "1.3.0":
        version = claims.get(CLAIM + "version")
        raise Refused(400, bad, f"It is LTI version {version!r}; this tool speaks 1.3.0.")
    _check_deployment(platform, claims.get(CLAIM + "deployment_id"))
    message = claims.get(CLAIM + "message_type")
    if message != "LtiResourceLinkRequest":
        detail = f"It is a {message!r} message; this tool opens resource links only."
        raise Refused(400, bad, detail + " Add it to the course as an external tool link.")
    link = claims.get(CLAIM + "resource_link")
    if not isinstance(link, dict) or not isinstance(link.get("id"), str) or not link["id"]:
        raise Refused(400, bad, "It carries no resource link id.")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise Refused(400, bad, "It names no user (sub): anonymous launches are not graded.")
    roles = claims.get(CLAIM + "roles")
    if not isinstance(roles, list):
        raise Refused(400, bad, "It carries no roles claim.")
    if role_of(roles) is None:
        detail = "Only learners and instructors can open this exercise; your roles are "
        raise Refused(403, "Not a learner or instructor", detail + f"{roles!r}.")


def launch_of(claims: dict, platform: Platform) -> Launch:
    role = role_of(claims[CLAIM + "roles"])
    link = claims[CLAIM + "resource_link"]
    context = claims.get(CLAIM + "context")
    context = context if isinstance(context, dict) and context.get("id") else None
    ags = claims.get(AGS_CLAIM)
    lineitem = ags.get("lineitem") if isinstance(ags, dict) else None
    if SCORE_SCOPE not in ((ags or {}).get("scope") or []) or not str(lineitem).startswith("http"):
        lineitem = None
    if role == "student" and lineitem is None:
        detail = (
            "The LMS sent no grade service (AGS) line item with the score scope for this "
            "link, so a score could not reach the gradebook. Ask your instructor to make the "
            "link a graded assignment."
        )
        raise Refused(400, "This link does not take grades", detail)
    return Launch(
        platform_id=platform.platform_id,
        deployment_id=claims[CLAIM + "deployment_id"],
        sub=claims["sub"],
        name=display_name(claims),
        role=role,
        context_id=str(context["id"]) if context else f"link:{link['id']}",
        course_title=str((context or {}).get("title") or (context or {}).get("label") or ""),
        resource_link_id=link["id"],
        link_title=str(link.get("title") or ""),
        exercise=exercise_asked(claims),
        lineitem=lineitem,
        due_at=claimed_due_at(claims),
        readable_lineitem=readable_lineitem(claims),
    )


def display_name(claims: dict) -> str:
    given = " ".join(p for p in (claims.get("given_name"), claims.get("family_name")) if p)
    for name in (claims.get("name"), given, claims.get("email")):
        if isinstance(name, str) and name.strip():
            return name.strip()[:128]
    return f"LMS user {str(claims['sub'])[:12]}"


def exercise_asked(claims: dict) -> str | None:
    """The custom parameter `exercise`, else the target link URI's `exercise` query
    parameter or its path /exercises/<id>; None: not said."""
    custom = claims.get(CLAIM + "custom")
    asked = custom.get("exercise") if isinstance(custom, dict) else None
    if isinstance(asked, str) and asked.strip():
        return asked.strip()
    parts = urlsplit(str(claims.get(CLAIM + "target_link_uri") or ""))
    if parse_qs(parts.query).get("exercise"):
        return parse_qs(parts.query)["exercise"][0]
    segments = [s for s in parts.path.split("/") if s]
    return segments[-1] if len(segments) >= 2 and segments[-2] == "exercises" else None


def iso_or_none(value) -> str | None:
    """`value` as a normalised ISO 8601 time with a zone, or None when it is not one."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return at(value.strip()).isoformat()
    except TermError:
        return None


def claimed_due_at(claims: dict) -> str | None:
    """The link's custom parameter `due_at`, when it holds a time with a zone."""
    custom = claims.get(CLAIM + "custom")
    return iso_or_none(custom.get("due_at")) if isinstance(custom, dict) else None


def readable_lineitem(claims: dict) -> tuple[str, str] | None:
    """(the line item's URL, a scope that reads it) from the launch's AGS claim, or None."""
    ags = claims.get(AGS_CLAIM)
    if not isinstance(ags, dict) or not str(ags.get("lineitem") or "").startswith("http"):
        return None
    granted = ags.get("scope") or []
    scope = next((s for s in LINEITEM_SCOPES if s in granted), None)
    return (str(ags["lineitem"]), scope) if scope else None
