"""End-to-end tests of the web page in headless Chromium against the real service.

One `python -m grader serve` per module on a free loopback port, with a fresh data folder;
a fresh browser context (so an empty localStorage) per test. The page is found the way a
screen reader finds it: buttons named "Run" and "Submit", the region named "Results", the
table by its title, plot images by their alt text.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from page_server import CHROMIUM, CHROMIUM_ARGS, REPO, start_service, stop_service

from grader.exercise import default_exercise

pytestmark = pytest.mark.browser

GRADE_TIMEOUT_MS = 120_000  # a cold Submit runs every tier, the toy included, on 2 shared cores


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The real service, serving the freshly built page, for every test of this module."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: install Debian's chromium package to run browser tests"
        )
    base, process = start_service(tmp_path_factory.mktemp("service-data"))
    yield base
    stop_service(process)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: install Debian's chromium package to run browser tests"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    """A fresh context (empty localStorage) on the page, the statement loaded."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server)
    page.locator(".markdown").wait_for()
    yield page
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


RECORD_BUSY = """button => {
  window.sawBusy = false;
  new MutationObserver(() => {
    if (button.disabled && button.getAttribute("aria-busy") === "true") window.sawBusy = true;
  }).observe(button, { attributes: true });
}"""
PLOTS_DECODED = """() => {
  const images = [...document.querySelectorAll('section[aria-label="Results"] img')];
  return images.length > 0 && images.every((img) => img.complete && img.naturalWidth > 0);
}"""
CODE_KEY = "gspo-grader.code"


def _results(page):
    return page.get_by_role("region", name="Results")


def _button(page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def _set_code(page, code: str) -> None:
    """Select everything in the editor and type `code` over it as one text input."""
    page.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(code)
    assert page.evaluate("key => localStorage.getItem(key)", CODE_KEY) == code


def _wait_for_report(page) -> None:
    _results(page).locator(".verdict").wait_for(timeout=GRADE_TIMEOUT_MS)


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def test_run_of_the_starter_shows_its_failures(page):
    from playwright.sync_api import expect

    assert page.locator("#statement .katex").count() > 0, "the statement's math is not typeset"
    expect(page.locator(".cm-content")).to_contain_text("def sequence_ratio")
    run = _button(page, "Run")
    run.evaluate(RECORD_BUSY)
    run.click()
    _wait_for_report(page)
    assert page.evaluate("window.sawBusy"), "Run was never disabled with aria-busy while grading"
    expect(run).to_be_enabled()
    results = _results(page)
    expect(results.locator(".verdict")).to_contain_text("Not passed yet")
    failed_tiers = results.locator("li.tier.failed")
    assert failed_tiers.count() >= 1
    message = failed_tiers.first.locator("pre.message").first
    expect(message).to_be_visible()  # failing tests are open, not hidden behind a click
    assert message.inner_text().strip(), "a failing test shows no message"


def test_reference_submit_passes_every_tier_with_matrix_plots_and_history(page, server):
    from playwright.sync_api import expect

    tiers = _get_json(f"{server}/api/exercise")["tiers"]
    _set_code(page, (REPO / "reference" / "gspo.py").read_text())
    page.get_by_label("Your name").fill("ada")
    _button(page, "Submit").click()
    _wait_for_report(page)
    results = _results(page)
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

    _set_code(page, "import torch\n\nratio = = 1\n")
    page.keyboard.press("Control+Enter")  # the shortcut runs, like the button
    alert = _results(page).locator(".submission-error")
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
    _button(page, "Reset to starter").click()
    expect(editor).not_to_contain_text("# draft 42")
    expect(editor).to_contain_text("def sequence_ratio")


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
    _button(page, "Run").click()
    alert = _results(page).get_by_role("alert")
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
    _button(page, "Run").click()
    alert = _results(page).get_by_role("alert")
    expect(alert).to_contain_text(expected)
    if detail:
        expect(alert).to_contain_text(detail)
    expect(_button(page, "Run")).to_be_enabled()
