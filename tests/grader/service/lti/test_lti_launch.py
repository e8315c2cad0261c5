"""Launches from the fake LMS: the happy paths, and every fault the LMS can inject, each
answered with a page that says what was wrong and a 4xx status (never a 500)."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fake_lms import AGS, CLAIM

pytestmark = pytest.mark.service


def session_of(response: httpx.Response, cookie: bool = True) -> str:
    """The page's session after a student launch: the handoff code in the redirect's
    fragment, exchanged (with the cookie the launch set, as the launching browser would)."""
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    assert location.startswith("/#lti="), location
    name, _, rest = response.headers["set-cookie"].partition("=")
    headers = {"Cookie": f"{name}={rest.split(';', 1)[0]}"} if cookie else {}
    base = f"{response.url.scheme}://{response.url.netloc.decode()}"
    code = location.removeprefix("/#lti=")
    answer = httpx.post(f"{base}/lti/session", json={"code": code}, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["token"]


def test_a_student_launch_signs_in_with_a_session_for_the_page(browser, tool, lms):
    login = browser.login()
    assert login.status_code == 302
    cookie = login.headers["set-cookie"]
    for attribute in ("Secure", "SameSite=none", "Partitioned", "HttpOnly", "Path=/lti/"):
        assert attribute.lower() in cookie.lower(), cookie
    redirect = urlsplit(login.headers["location"])
    assert f"{redirect.scheme}://{redirect.netloc}{redirect.path}" == f"{lms.base}/authorize"
    assert parse_qs(redirect.query)["redirect_uri"] == [f"{tool.base}/lti/launch"]
    page = browser.authorize()
    assert page.status_code == 200, lms.problems
    token = session_of(browser.post_launch())
    info = httpx.get(f"{tool.base}/api/lti/session", headers={"X-LTI-Session": token}).json()
    assert info["name"] == "Ada Student-1"
    assert info["role"] == "student"
    assert info["course"] == "RL from papers"
    assert info["exercise"] == "gspo"
    assert info["expires_at"] > time.time() + 50 * 60  # renewed for the full hour
    again = httpx.get(f"{tool.base}/api/lti/session", headers={"X-LTI-Session": info["token"]})
    assert again.status_code == 200
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert (
        httpx.get(f"{tool.base}/api/lti/session", headers={"X-LTI-Session": forged}).status_code
        == 401
    )


def test_an_instructor_launch_opens_the_course_view(browser, lms):
    response = browser.launch("teacher-1")
    assert response.status_code == 200
    assert "Course submissions" in response.text
    assert "RL from papers" in response.text
    assert "Passback failures (0)" in response.text


def test_the_exercise_comes_from_the_target_link_or_a_custom_parameter(browser, tool, lms):
    lms.exercise = "no-such-exercise"
    refused = browser.launch()
    assert refused.status_code == 404
    assert "no-such-exercise" in refused.text
    lms.exercise = None
    lms.claims = {CLAIM + "custom": {"exercise": "also-missing"}}
    refused = browser.launch()
    assert refused.status_code == 404 and "also-missing" in refused.text
    lms.claims = {CLAIM + "custom": {"exercise": "gspo"}}
    token = session_of(browser.launch())
    info = httpx.get(f"{tool.base}/api/lti/session", headers={"X-LTI-Session": token}).json()
    assert info["exercise"] == "gspo"


def refused_with(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("text/html")
    for word in words:
        assert word in response.text, response.text


FAULTS = {
    "bad signature": ({"signing": "foreign"}, 401, "signature does not verify"),
    "unknown kid": ({"signing": "unknown_kid"}, 401, "does not hold"),
    "expired": ({"claims": {"exp": int(time.time()) - 3600}}, 401, "expired"),
    "wrong aud": ({"claims": {"aud": "another-tool"}}, 401, "audience"),
    "aud list without azp": ({"claims": {"aud": ["gspo-tool", "x"]}}, 401, "authorized party"),
    "wrong issuer": ({"claims": {"iss": "https://evil.example"}}, 401, "issued by"),
    "unknown deployment": ({"claims": {CLAIM + "deployment_id": "deploy-x"}}, 403, "deploy-x"),
    "wrong version": ({"claims": {CLAIM + "version": "1.1"}}, 400, "1.3.0"),
    "wrong message type": (
        {"claims": {CLAIM + "message_type": "LtiDeepLinkingRequest"}},
        400,
        "LtiDeepLinkingRequest",
    ),
    "missing resource link": ({"drop": {CLAIM + "resource_link"}}, 400, "resource link"),
    "missing roles": ({"drop": {CLAIM + "roles"}}, 400, "roles"),
    "an unknown role": (
        {"claims": {CLAIM + "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"]}},
        403,
        "Mentor",
    ),
    "missing sub": ({"drop": {"sub"}}, 400, "sub"),
    "missing AGS claim": ({"drop": {AGS}}, 400, "line item"),
    "the LMS's key set unreachable": ({"jwks_down": True}, 502, "could not be read"),
}


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_faulty_launch_is_refused_with_a_clear_page(fault, browser, lms):
    settings, status, words = FAULTS[fault]
    for name, value in settings.items():
        setattr(lms, name, value)
    refused_with(browser.launch(), status, words)


def test_a_replayed_launch_or_nonce_is_refused(browser, lms):
    session_of(browser.launch())
    first_form, first_nonce = dict(browser.form), lms.nonces[-1]
    refused_with(browser.post_launch(form=first_form), 400, "used already")
    lms.claims = {"nonce": first_nonce}  # a fresh login, the old nonce in the token
    refused_with(browser.launch(), 401, "nonce")


def test_a_launch_without_the_state_cookie_offers_a_new_tab(browser, tool, lms):
    browser.login()
    browser.authorize()
    page = browser.post_launch(cookie=False)
    assert page.status_code == 200
    assert 'target="_blank"' in page.text and "new tab" in page.text
    assert f"{tool.base}/lti/login?iss=" in page.text
    session_of(browser.post_launch())  # the state was not used up by the fallback


def test_a_launch_with_another_logins_cookie_is_refused(browser, lms):
    browser.login()
    browser.authorize()
    name, _ = browser.state_cookie()
    response = browser.http.post(
        browser.action, data=browser.form, headers={"Cookie": f"{name}=somebody-elses-state"}
    )
    refused_with(response, 400, "another sign-in")


LOGIN_FAULTS = {
    "no client_id": ({"client_id": None}, 400, "client_id"),
    "unregistered client id of a known issuer": ({"client_id": "other"}, 403, "not registered"),
    "unknown issuer": ({"iss": "https://unknown.example"}, 403, "not registered"),
    "unknown deployment": ({"lti_deployment_id": "deploy-x"}, 403, "deploy-x"),
    "no login_hint": ({"login_hint": None}, 400, "login_hint"),
}


@pytest.mark.parametrize("fault", LOGIN_FAULTS, ids=list(LOGIN_FAULTS))
def test_a_faulty_login_initiation_is_refused(fault, tool, lms):
    changes, status, word = LOGIN_FAULTS[fault]
    url = urlsplit(lms.login_url())
    params = {k: v[0] for k, v in parse_qs(url.query).items()}
    for name, value in changes.items():
        params.pop(name) if value is None else params.__setitem__(name, value)
    response = httpx.post(f"{tool.base}/lti/login", data=params)
    refused_with(response, status, word)


def test_a_launch_with_garbage_or_an_lms_error_is_a_4xx_page(tool):
    refused_with(httpx.post(f"{tool.base}/lti/launch", data={"state": "x"}), 400, "id_token")
    error = {"error": "login_required", "error_description": "Sign in to the LMS first."}
    refused_with(httpx.post(f"{tool.base}/lti/launch", data=error), 400, "Sign in to the LMS")
