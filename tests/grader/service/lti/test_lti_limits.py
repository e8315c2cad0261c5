"""The LTI side's limits (review findings 8, 11 and 12 of issue 26): logins per address, key
set fetches per platform, a session's total lifetime, the launch's handoff to the page that
signs in only the launching browser, and refusal pages without internal addresses."""

from __future__ import annotations

import time

import httpx
import pytest
from servers import LaunchBrowser
from test_lti_launch import refused_with, session_of

pytestmark = pytest.mark.service


@pytest.fixture
def launcher(lms):
    browser = LaunchBrowser(lms)
    yield browser
    browser.close()


def test_logins_from_one_address_are_capped(start_tool, lms, launcher):
    start_tool(lti_logins_per_address=3)
    assert [launcher.login().status_code for _ in range(3)] == [302] * 3
    refused = launcher.login()
    refused_with(refused, 429, "Too many sign-ins")
    assert "set-cookie" not in refused.headers


def test_an_lms_key_set_is_fetched_at_most_once_a_period_even_for_unknown_kids(
    start_tool, lms, launcher
):
    start_tool(lti_key_set_refetch_seconds=3.0)
    session_of(launcher.launch())
    fetched = time.monotonic()  # at the latest
    assert lms.jwks_fetches == 1
    lms.signing = "unknown_kid"
    for _ in range(2):
        refused_with(launcher.launch(), 401, "does not hold")
    assert lms.jwks_fetches == 1, "an unknown kid made the tool fetch the key set again"
    lms.signing = None
    lms.rotate()
    time.sleep(max(0.0, fetched + 3.2 - time.monotonic()))
    session_of(launcher.launch())  # the LMS's new key, fetched once the period passed
    assert lms.jwks_fetches == 2


def test_a_session_ends_at_its_cap_however_often_renewed(start_tool, lms, launcher):
    tool = start_tool(lti_session_hours=3 / 3600)
    launched = time.time()
    token = session_of(launcher.launch())
    renewed = httpx.get(f"{tool.base}/api/lti/session", headers={"X-LTI-Session": token})
    info = renewed.json()
    assert info["ends_at"] <= launched + 4 and info["expires_at"] <= info["ends_at"]
    time.sleep(max(0.0, info["ends_at"] + 1.1 - time.time()))
    for stale in (token, info["token"]):
        late = httpx.get(f"{tool.base}/api/lti/session", headers={"X-LTI-Session": stale})
        assert late.status_code == 401, late.text


def test_a_launch_link_signs_in_only_the_browser_that_launched(tool, lms, launcher):
    """A link /#lti=... taken from a launch signs nobody else in: its code is not a session,
    and it is exchanged only with the cookie the launch set in the launching browser."""
    launch = launcher.launch()
    code = launch.headers["location"].removeprefix("/#lti=")
    as_session = httpx.get(f"{tool.base}/api/lti/session", headers={"X-LTI-Session": code})
    assert as_session.status_code == 401
    elsewhere = httpx.post(f"{tool.base}/lti/session", json={"code": code})
    assert elsewhere.status_code == 403 and "another browser" in elsewhere.text
    victim = LaunchBrowser(lms)
    other = victim.launch("student-2")  # the victim's own launch cookie
    victim.close()
    name, _, rest = other.headers["set-cookie"].partition("=")
    cookie = {"Cookie": f"{name}={rest.split(';', 1)[0]}"}
    mixed = httpx.post(f"{tool.base}/lti/session", json={"code": code}, headers=cookie)
    assert mixed.status_code == 403
    assert session_of(launch)  # in the launching browser it works


def test_a_refusal_page_names_no_internal_address_or_error(tool, lms, launcher):
    lms.jwks_down = True
    page = launcher.launch()
    refused_with(page, 502, "could not be read")
    assert lms.base not in page.text and "503" not in page.text and "Error" not in page.text
