"""Validating a launch's id_token (LTI 1.3 core, section 5; IMS Security Framework 5.1.3).

    launch = await validate_launch(id_token, login, platform, platform_keys)

checks, in this order, and refuses with `Refused` (a 4xx page) at the first that fails:
the token is a JWS signed with RS256 by a key of the platform's key set (one fresh fetch on
an unknown kid); `iss` is the registration's issuer; `aud` holds its client id and, when it
holds several, `azp` is that client id; `exp` and `iat` within LEEWAY_S; `nonce` is the one
this login issued; LTI version 1.3.0; a registered deployment id; a resource link launch
with a resource link id; a user (`sub`) and a roles claim with a role this tool knows; and,
for a student, an AGS endpoint with a line item and the score scope.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jws import extract_compact

from grader.service.lti.platform_keys import PlatformKeys
from grader.service.lti.refusal import ASK_ADMIN, RELAUNCH, Refused
from grader.service.lti.roles import role_of
from grader.service.lti.store import LoginState, Platform

LEEWAY_S = 60  # clocks of the LMS and of this tool may differ by this much
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
RESOURCE_LINK = "LtiResourceLinkRequest"


@dataclass(frozen=True)
class Launch:
    """A launch that passed every check: who, where, and what to open."""

    platform: Platform
    deployment_id: str
    sub: str
    name: str
    role: Literal["student", "instructor"]
    context_id: str
    course_title: str
    resource_link_id: str
    link_title: str
    target_link_uri: str
    custom: dict
    lineitem: str | None  # the AGS line item scores go to; None: no grades for this link


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
        detail = (
            f"It is signed with key {header.get('kid')!r}, which the LMS's key set at "
            f"{platform.jwks_url} does not hold. " + ASK_ADMIN
        )
        raise Refused(401, bad, detail)
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
    deployment = claims.get(CLAIM + "deployment_id")
    if deployment not in platform.deployment_ids:
        detail = f"Deployment {deployment!r} of {platform.issuer} is not registered. " + ASK_ADMIN
        raise Refused(403, "Unknown deployment", detail)
    message = claims.get(CLAIM + "message_type")
    if message != RESOURCE_LINK:
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
    lineitem = lineitem_of(claims)
    if role == "student" and lineitem is None:
        detail = (
            "The LMS sent no grade service (AGS) line item with the score scope for this "
            "link, so a score could not reach the gradebook. Ask your instructor to make the "
            "link a graded assignment."
        )
        raise Refused(400, "This link does not take grades", detail)
    custom = claims.get(CLAIM + "custom")
    return Launch(
        platform=platform,
        deployment_id=claims[CLAIM + "deployment_id"],
        sub=claims["sub"],
        name=display_name(claims),
        role=role,
        context_id=str(context["id"]) if context else f"link:{link['id']}",
        course_title=str((context or {}).get("title") or (context or {}).get("label") or ""),
        resource_link_id=link["id"],
        link_title=str(link.get("title") or ""),
        target_link_uri=str(claims.get(CLAIM + "target_link_uri") or ""),
        custom=custom if isinstance(custom, dict) else {},
        lineitem=lineitem,
    )


def lineitem_of(claims: dict) -> str | None:
    ags = claims.get(AGS_CLAIM)
    if not isinstance(ags, dict) or SCORE_SCOPE not in (ags.get("scope") or []):
        return None
    lineitem = ags.get("lineitem")
    return lineitem if isinstance(lineitem, str) and lineitem.startswith("http") else None


def display_name(claims: dict) -> str:
    for name in (
        claims.get("name"),
        " ".join(p for p in (claims.get("given_name"), claims.get("family_name")) if p),
        claims.get("email"),
    ):
        if isinstance(name, str) and name.strip():
            return name.strip()[:128]
    return f"LMS user {str(claims['sub'])[:12]}"


def exercise_of(launch: Launch) -> str | None:
    """The exercise a launch asks for: the custom parameter `exercise`, else the target link
    URI's `exercise` query parameter or its path /exercises/<id>; None: not said."""
    if isinstance(launch.custom.get("exercise"), str) and launch.custom["exercise"].strip():
        return launch.custom["exercise"].strip()
    parts = urlsplit(launch.target_link_uri)
    asked = parse_qs(parts.query).get("exercise")
    if asked:
        return asked[0]
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) >= 2 and segments[-2] == "exercises":
        return segments[-1]
    return None
