"""End-to-end tests of the web page in headless Chromium against the real service.

The service, the browser and a fresh page come from conftest.py. The page is found the way a
screen reader finds it: buttons named "Run" and "Submit", the region named "Results", the
table by its title, plot images by their alt text.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from page_actions import (
    GRADE_TIMEOUT_MS,
    PLOTS_DECODED,
    button,
    code_key,
    get_json,
    results_panel,
    set_code,
    wait_for_report,
)
from page_server import REPO

from grader.exercise import default_exercise

pytestmark = pytest.mark.browser

RECORD_BUSY = """button => {
  window.sawBusy = false;
  new MutationObserver(() => {
    if (button.disabled && button.getAttribute("aria-busy") === "true") window.sawBusy = true;
  }).observe(button, { attributes: true });
}"""
CODE_KEY = code_key(default_exercise().id)


def test_run_of_the_starter_shows_its_failures(page):
    from playwright.sync_api import expect

    assert page.locator("#statement .katex").count() > 0, "the statement's math is not typeset"
    expect(page.locator(".cm-content")).to_contain_text("def sequence_ratio")
    run = button(page, "Run")
    run.evaluate(RECORD_BUSY)
    run.click()
    wait_for_report(page)
    assert page.evaluate("window.sawBusy"), "Run was never disabled with aria-busy while grading"
    expect(run).to_be_enabled()
    results = results_panel(page)
    expect(results.locator(".verdict")).to_contain_text("Not passed yet")
    failed_tiers = results.locator("li.tier.failed")
    assert failed_tiers.count() >= 1
    message = failed_tiers.first.locator("pre.message").first
    expect(message).to_be_visible()  # failing tests are open, not hidden behind a click
    assert message.inner_text().strip(), "a failing test shows no message"


def test_reference_submit_passes_every_tier_with_matrix_plots_and_history(page, server):
    from playwright.sync_api import expect

    tiers = get_json(f"{server}/api/exercise")["tiers"]
    set_code(page, (REPO / "reference" / "gspo.py").read_text(), default_exercise().id)
    page.get_by_label("Your name").fill("ada")
    button(page, "Submit").click()
    wait_for_report(page)
    results = results_panel(page)
    failing = results.locator("li.test.failed, li.test.error").all_inner_texts()
    assert "All tiers passed" in results.locator(".verdict").inner_text(), failing
    expect(results.locator("li.tier")).to_have_count(len(tiers))
    expect(results.locator("li.tier.passed")).to_have_count(len(tiers))
    title = next(t.title for t in default_exercise().tables if t.name == "grad_matrix")
    matrix = results.get_by_role("table", name=title)
    expect(matrix).to_be_visible()
    expect(matrix.locator("tbody tr")).to_have_count(3)
    expect(matrix.locator("td.muted-cell")).to_have_count(3)  # the padding cells, greyed
    page.wait_for_function(PLOTS_DECODED, timeout=GRADE_TIMEOUT_MS)
    for image in results.get_by_role("img").all():
        assert (image.get_attribute("alt") or "").strip(), "a plot has no alt text"
    keys = json.loads(page.evaluate("localStorage.getItem('gspo-grader.keys')"))
    assert keys.get("ada"), "the student key was not kept"

    page.get_by_role("tab", name="History").click()
    entries = page.locator(".history-item")
    expect(entries).to_have_count(1)
    expect(entries.first).to_contain_text("passed")
    entries.first.click()
    expect(results.locator(".verdict")).to_contain_text("Submission of")
    expect(results.locator(".verdict")).to_contain_text("All tiers passed")


def test_syntax_error_shows_its_line(page):
    from playwright.sync_api import expect

    set_code(page, "import torch\n\nratio = = 1\n", default_exercise().id)
    page.keyboard.press("Control+Enter")  # the shortcut runs, like the button
    alert = results_panel(page).locator(".submission-error")
    expect(alert).to_be_visible(timeout=GRADE_TIMEOUT_MS)
    expect(alert).to_contain_text("Syntax error on line 3")


def test_reload_keeps_the_code_and_reset_restores_the_starter(page):
    from playwright.sync_api import expect

    editor = page.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+Home")
    page.keyboard.type("# draft 42\n")
    page.reload()
    page.locator(".markdown").wait_for()
    expect(editor).to_contain_text("# draft 42")
    page.once("dialog", lambda dialog: dialog.accept())
    button(page, "Reset to starter").click()
    expect(editor).not_to_contain_text("# draft 42")
    expect(editor).to_contain_text("def sequence_ratio")


def test_code_kept_before_exercises_is_the_root_exercise_code(page):
    """The page once kept one code under one key; it now belongs to the root exercise."""
    from playwright.sync_api import expect

    old_key = "gspo-grader.code"
    page.evaluate("([key, code]) => localStorage.setItem(key, code)", [old_key, "# old draft 7\n"])
    page.reload()
    page.locator(".markdown").wait_for()
    expect(page.locator(".cm-content")).to_contain_text("# old draft 7")
    assert page.evaluate("key => localStorage.getItem(key)", CODE_KEY) == "# old draft 7\n"
    assert page.evaluate("key => localStorage.getItem(key)", old_key) is None


def test_code_over_the_size_limit_shows_the_server_message(page, server):
    from playwright.sync_api import expect

    code = "# padding\n" * 40_000  # 400 kB, over the service's limit
    request = urllib.request.Request(
        f"{server}/api/run",
        data=json.dumps({"code": code}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 413
    detail = json.load(refused.value)["detail"]
    page.evaluate("([key, code]) => localStorage.setItem(key, code)", [CODE_KEY, code])
    page.reload()
    page.locator(".markdown").wait_for()
    button(page, "Run").click()
    alert = results_panel(page).get_by_role("alert")
    expect(alert).to_contain_text("413", timeout=GRADE_TIMEOUT_MS)
    expect(alert).to_contain_text(detail)


@pytest.mark.parametrize(
    ("status", "detail", "expected"),
    [
        (503, "The grading queue is full.", "Try again in 7 s"),
        (500, "The grader failed while grading.", "500"),
        (None, None, "cannot be reached"),
    ],
    ids=["queue-full", "internal-error", "server-down"],
)
def test_failing_server_answers_show_a_message(page, status, detail, expected):
    """The real service cannot be made to fail on cue, so the browser answers for it here."""
    from playwright.sync_api import expect

    def answer(route):
        if status is None:
            route.abort("connectionrefused")
            return
        body = json.dumps({"detail": detail})
        headers = {"Retry-After": "7"} if status == 503 else {}
        route.fulfill(status=status, headers=headers, content_type="application/json", body=body)

    page.route("**/api/run", answer)
    button(page, "Run").click()
    alert = results_panel(page).get_by_role("alert")
    expect(alert).to_contain_text(expected)
    if detail:
        expect(alert).to_contain_text(detail)
    expect(button(page, "Run")).to_be_enabled()


def _csp_reports(page) -> list[str]:
    reports: list[str] = []
    page.on(
        "console",
        lambda m: reports.append(m.text) if "Content Security Policy" in m.text else None,
    )
    return reports


def test_the_page_breaks_no_rule_of_its_content_security_policy(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    reports = _csp_reports(page)
    response = page.goto(server)
    assert "script-src 'self';" in response.headers["content-security-policy"]
    page.locator("#statement .katex").first.wait_for()
    page.locator(".cm-content").filter(has_text="def sequence_ratio").wait_for()
    assert reports == [], f"the page broke its content security policy: {reports}"
    set_code(page, (REPO / "reference" / "gspo.py").read_text(), default_exercise().id)
    button(page, "Run").click()
    wait_for_report(page)  # results, tables and plots drawn under the policy
    page.locator("img").first.wait_for()
    context.close()
    assert reports == [], f"the page broke its content security policy: {reports}"


def test_the_api_reference_loads_nothing_from_another_origin(browser, server):
    context = browser.new_context()
    page = context.new_page()
    reports = _csp_reports(page)
    elsewhere: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(server) else elsewhere.append(r.url))
    page.goto(f"{server}/docs")
    page.locator(".swagger-ui .info .title").filter(has_text="gspo-grader").wait_for()
    page.locator(".opblock-tag").first.wait_for()
    context.close()
    assert elsewhere == [] and reports == [], (elsewhere, reports)
