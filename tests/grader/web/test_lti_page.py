"""The page launched from an LMS, in Debian's Chromium with third-party cookies blocked.

The fake LMS (tests/grader/service/lti/fake_lms.py) serves a course page on 127.0.0.2 that
frames the tool, served by the real service on 127.0.0.1: another site. The launch runs
inside the iframe (login, the LMS's authorisation, the form post back); the student runs
and submits the reference solution, and its full score arrives at the LMS's gradebook.
"""

from __future__ import annotations

import json
import sys
import time

import pytest
from page_server import CHROMIUM, CHROMIUM_ARGS, REPO, start_service, stop_service

sys.path.insert(0, str(REPO / "tests" / "grader" / "service" / "lti"))
from fake_lms import FakeLms
from servers import ServerThread

from grader.cli import main as cli_main
from grader.exercise import catalog

PREVIEW = "Reference preview: what a correct solution produces"
pytestmark = pytest.mark.browser

GRADE_TIMEOUT_MS = 120_000
BLOCK_THIRD_PARTY_COOKIES = {
    "profile": {"cookie_controls_mode": 1, "block_third_party_cookies": True}
}


@pytest.fixture
def lms_and_tool(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package")
    lms_server = ServerThread("127.0.0.2")
    lms = FakeLms(lms_server.base)
    lms_server.start(lms.app())
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    base, process = start_service(data_dir)
    lms.tool_base = base
    args = ["lti", "add-platform", "--data-dir", str(data_dir), "--issuer", lms.issuer]
    args += ["--client-id", lms.client_id, "--deployment-id", lms.deployment]
    args += ["--auth-url", f"{lms.base}/authorize", "--token-url", f"{lms.base}/token"]
    args += ["--jwks-url", f"{lms.base}/jwks"]
    assert cli_main(args) == 0
    yield lms
    stop_service(process)
    lms_server.stop()


@pytest.fixture
def course_page(tmp_path):
    """A Chromium profile that blocks third-party cookies, as LMS users' browsers may."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path / "profile"
    (profile / "Default").mkdir(parents=True)
    (profile / "Default" / "Preferences").write_text(json.dumps(BLOCK_THIRD_PARTY_COOKIES))
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1300, "height": 1000},
        )
        errors: list[str] = []
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        yield page
        context.close()
        assert not errors, f"uncaught errors in the page: {errors}"


def test_a_launch_in_the_lms_iframe_submits_and_the_score_reaches_the_lms(
    lms_and_tool, course_page
):
    from playwright.sync_api import expect

    lms = lms_and_tool
    course_page.goto(f"{lms.base}/course")
    tool = course_page.frame_locator("#tool")
    expect(tool.get_by_text("Signed in as Ada Student-1 · RL from papers")).to_be_visible(
        timeout=30_000
    )
    frame = next(f for f in course_page.frames if f.url.startswith(lms.tool_base))
    assert "lti=" not in frame.url, "the session token was left in the address"
    probe = "document.cookie = 'probe=1; SameSite=None; Secure; Path=/'; document.cookie"
    assert "probe" not in frame.evaluate(probe), "third-party cookies are not blocked"

    tool.locator(".cm-content").click()
    course_page.keyboard.press("Control+A")
    course_page.keyboard.insert_text((REPO / "reference" / "gspo.py").read_text())
    tool.get_by_role("button", name="Run", exact=True).click()
    results = tool.get_by_role("region", name="Results")
    results.locator(".verdict").wait_for(timeout=GRADE_TIMEOUT_MS)
    tool.get_by_role("button", name="Submit", exact=True).click()
    expect(tool.locator("#status")).to_contain_text("Graded: ", timeout=GRADE_TIMEOUT_MS)
    expect(results.locator(".verdict")).to_contain_text(
        "All tiers passed", timeout=GRADE_TIMEOUT_MS
    )

    deadline = time.monotonic() + 30
    while not lms.scores and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(lms.scores) == 1, (lms.scores, lms.problems)
    body = lms.scores[0]["body"]
    assert body["userId"] == "user-student-1"
    assert body["scoreGiven"] == body["scoreMaximum"] > 0
    tool.get_by_role("tab", name="History").click()
    expect(tool.locator(".history-item")).to_have_count(1)
    tool.locator(".history-item").click()  # the session reads back its own code
    expect(results.locator(".submitted-code pre")).to_contain_text("def gspo_loss")


def test_a_launch_for_dpo_opens_dpo_without_a_picker_and_runs_dpo(lms_and_tool, course_page):
    """The link fixes the exercise: no picker, and Run and Submit grade the link's exercise."""
    from playwright.sync_api import expect

    lms = lms_and_tool
    lms.exercise = "dpo"
    course_page.goto(f"{lms.base}/course")
    tool = course_page.frame_locator("#tool")
    expect(tool.get_by_text("Signed in as Ada Student-1")).to_be_visible(timeout=30_000)
    expect(tool.locator("#title")).to_have_text(catalog()["dpo"].title)
    expect(tool.locator(".cm-content")).to_contain_text("def dpo_loss")
    expect(tool.locator("#exercise")).to_be_hidden()
    with course_page.expect_request(
        lambda request: request.method == "POST" and request.url.endswith("/api/run")
    ) as run:
        tool.get_by_role("button", name="Run", exact=True).click()
    assert run.value.post_data_json["exercise"] == "dpo"
    results = tool.get_by_role("region", name="Results")
    expect(results.locator(".verdict")).to_contain_text("Not passed yet", timeout=GRADE_TIMEOUT_MS)
    expect(results.locator("li.tier.failed").first).to_contain_text("T0")
    # the starter never reaches the toy: the reference preview stays, saying why
    preview = results.get_by_role("region", name=PREVIEW)
    expect(preview).to_contain_text("No artifacts of yours could be drawn")
    expect(preview.locator("table").first).to_be_visible()
