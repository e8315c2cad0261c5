"""The Lab in headless Chromium against the real service: the reference preview before any
Run, yours beside the reference solution's after a wrong Submit (differing cells framed), and
a past submission's code opened from the history and loaded into the editor."""

from __future__ import annotations

from pathlib import Path

import pytest
from page_actions import PLOTS_DECODED, button, results_panel, set_code, wait_for_report

from grader.exercise import catalog, default_exercise

pytestmark = pytest.mark.browser

PREVIEW = "Reference preview: what a correct solution produces"
ROOT = default_exercise()
WRONG = Path(__file__).parents[2] / "implementations" / "wrong" / "arithmetic_mean.py"


@pytest.mark.parametrize("exercise_id", list(catalog()))
def test_each_exercise_opens_on_its_reference_preview(page, server, exercise_id):
    page.goto(f"{server}/?exercise={exercise_id}")
    section = results_panel(page).get_by_role("region", name=PREVIEW)
    section.wait_for(timeout=90_000)
    page.wait_for_function(PLOTS_DECODED, timeout=60_000)
    tables = section.locator("table")
    assert tables.count() == len(catalog()[exercise_id].tables)
    for k in range(tables.count()):
        assert tables.nth(k).locator("caption").inner_text()
        assert tables.nth(k).locator("tbody td").count() > 0
    alts = section.locator("img").evaluate_all("images => images.map((img) => img.alt)")
    assert alts == [plot.text for plot in catalog()[exercise_id].plots]


def test_a_wrong_submit_compares_with_the_reference_and_history_loads_its_code(page, server):
    from playwright.sync_api import expect

    results = results_panel(page)
    results.get_by_role("region", name=PREVIEW).wait_for(timeout=90_000)
    wrong = WRONG.read_text()
    set_code(page, wrong, ROOT.id)
    page.locator("#student").fill("lab student")
    button(page, "Submit").click()
    wait_for_report(page)
    grad = results.locator(".compare").filter(has=page.locator('table[data-name="grad_matrix"]'))
    mine, theirs = grad.locator("table").nth(0), grad.locator("table").nth(1)
    expect(mine).to_be_visible()
    assert mine.locator("td.differs").count() > 0  # the wrong row-0 gradients are framed
    grad.get_by_role("button", name="Reference solution").click()
    expect(theirs).to_be_visible()
    expect(mine).to_be_hidden()
    assert theirs.locator("td.differs").count() == 0
    expect(results.locator("[aria-live]").first).to_contain_text("reference solution's")

    set_code(page, "# a draft not submitted\n", ROOT.id)
    page.get_by_role("tab", name="History").click()
    page.locator(".history-item").first.click()
    code = results.locator(".submitted-code pre")
    expect(code).to_have_text(wrong)
    page.once("dialog", lambda dialog: dialog.accept())
    button(page, "Load into the editor").click()
    expect(page.locator("#status")).to_contain_text("code is in the editor")
    assert page.evaluate("localStorage.getItem('gspo-grader.code.gspo')") == wrong
