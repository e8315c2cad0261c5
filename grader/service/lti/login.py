"""OIDC third-party initiated login (LTI 1.3 core 4.1; IMS Security Framework 5.1.1).

The LMS sends the browser to /lti/login with its issuer, the client id, a login hint and the
target link; the tool answers with a redirect to the LMS's authorisation URL, carrying a
fresh state and nonce (stored server-side for LOGIN_TTL_S, single use) and a partitioned
cookie holding the state, which the launch checks to know it comes back to the same browser.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlencode

from fastapi.responses import RedirectResponse

from grader.service.lti.refusal import ASK_ADMIN, Refused
from grader.service.lti.store import LoginState, LtiStore, Platform, later

LOGIN_TTL_S = 600  # a login must come back as a launch within 10 minutes
COOKIE_PREFIX = "gspo_lti_"  # + the state's first 16 characters: tabs do not collide


def cookie_name(state: str) -> str:
    return COOKIE_PREFIX + "".join(ch for ch in state[:16] if ch.isalnum())


def registration_for(store: LtiStore, params: dict[str, str]) -> Platform:
    """The registration a login names, by (issuer, client id); never by issuer alone."""
    missing = [p for p in ("iss", "login_hint", "target_link_uri") if not params.get(p)]
    if missing:
        detail = f"It lacks {', '.join(missing)}. " + ASK_ADMIN
        raise Refused(400, "The LMS's login request is incomplete", detail)
    if not params.get("client_id"):
        detail = (
            "It names no client_id, and this tool finds a registration by issuer and client "
            "id together. " + ASK_ADMIN
        )
        raise Refused(400, "The LMS's login request is incomplete", detail)
    platform = store.find_platform(params["iss"], params["client_id"])
    if platform is None:
        detail = (
            f"No registration has issuer {params['iss']!r} and client id "
            f"{params['client_id']!r}. An administrator adds it with "
            "`gspo-grader lti add-platform` (see docs/lti.md)."
        )
        raise Refused(403, "This LMS is not registered", detail)
    deployment = params.get("lti_deployment_id")
    if deployment and deployment not in platform.deployment_ids:
        detail = f"Deployment {deployment!r} of {platform.issuer} is not registered. " + ASK_ADMIN
        raise Refused(403, "Unknown deployment", detail)
    return platform


def start_login(store: LtiStore, params: dict[str, str], launch_url: str) -> RedirectResponse:
    platform = registration_for(store, params)
    login = LoginState(
        state=secrets.token_urlsafe(32),
        nonce=secrets.token_urlsafe(32),
        platform_id=platform.platform_id,
        target_link_uri=params["target_link_uri"],
        login_hint=params["login_hint"],
        message_hint=params.get("lti_message_hint"),
        expires_at=later(LOGIN_TTL_S),
    )
    store.add_state(login)
    request = {
        "scope": "openid",
        "response_type": "id_token",
        "response_mode": "form_post",
        "prompt": "none",
        "client_id": platform.client_id,
        "redirect_uri": launch_url,
        "login_hint": login.login_hint,
        "state": login.state,
        "nonce": login.nonce,
    }
    if login.message_hint is not None:
        request["lti_message_hint"] = login.message_hint
    joiner = "&" if "?" in platform.auth_url else "?"
    response = RedirectResponse(platform.auth_url + joiner + urlencode(request), status_code=302)
    response.headers.append("Set-Cookie", state_cookie(login.state))
    return response


def state_cookie(state: str) -> str:
    """Partitioned (CHIPS): kept by browsers that block third-party cookies, inside the
    LMS's iframe, for this LMS only. Written by hand: Python before 3.14 cannot say
    Partitioned. The state is URL-safe base64, so it needs no quoting."""
    attributes = f"Max-Age={LOGIN_TTL_S}; Path=/lti/; Secure; HttpOnly; SameSite=None; Partitioned"
    return f"{cookie_name(state)}={state}; {attributes}"


def login_again_url(base_url: str, platform: Platform, login: LoginState) -> str:
    """The same login, to be started again in a tab of its own."""
    params = {
        "iss": platform.issuer,
        "client_id": platform.client_id,
        "login_hint": login.login_hint,
        "target_link_uri": login.target_link_uri,
    }
    if login.message_hint is not None:
        params["lti_message_hint"] = login.message_hint
    return f"{base_url}/lti/login?{urlencode(params)}"
