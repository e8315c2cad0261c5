"""The page with several exercises, in headless Chromium against the real service: the picker,
the address that names the exercise, each exercise's own code, results and history.

The service, the browser and a fresh page (empty localStorage) come from conftest.py.
"""

from __future__ import annotations

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

from grader.exercise import catalog, default_exercise

pytestmark = pytest.mark.browser

DPO = catalog()["dpo"]
ROOT = default_exercise()


def _picker(page):
    return page.get_by_role("combobox", name="Exercise", exact=True)


def _posted(page, path: str):
    """Expect the page to POST to `path`; `.value.post_data_json` is its body."""
    return page.expect_request(
        lambda request: request.method == "POST" and request.url.endswith(path)
    )


def test_the_picker_lists_every_exercise_by_title(page, server):
    from playwright.sync_api import expect

    listed = get_json(f"{server}/api/exercises")
    assert [e["id"] for e in listed][:2] == [ROOT.id, "dpo"]
    picker = _picker(page)
    expect(picker).to_have_value(ROOT.id)
    expect(picker.locator("option")).to_have_text([e["title"] for e in listed])
    assert "exercise=" not in page.url  # the plain address is the root exercise's


def test_a_student_switches_to_dpo_runs_submits_and_comes_back(page, server):
    from playwright.sync_api import expect

    editor = page.locator(".cm-content")
    results = results_panel(page)
    editor.click()
    page.keyboard.press("Control+Home")
    page.keyboard.type("# my gspo draft 17\n")
    gspo_code = page.evaluate(f"localStorage.getItem('{code_key(ROOT.id)}')")
    assert gspo_code.startswith("# my gspo draft 17\n")
    button(page, "Run").click()
    wait_for_report(page)

    _picker(page).select_option(DPO.id)
    expect(page).to_have_url(f"{server}/?exercise=dpo")
    expect(page.locator("#title")).to_have_text(DPO.title)
    expect(page.locator(".markdown h1")).to_contain_text("DPO: learn from preferences")
    expect(editor).to_contain_text("def dpo_loss")
    expect(editor).not_to_contain_text("my gspo draft")
    expect(results.locator(".verdict")).to_have_count(0)  # the GSPO Run's results are gone
    assert page.evaluate(f"localStorage.getItem('{code_key(ROOT.id)}')") == gspo_code

    tiers = get_json(f"{server}/api/exercises/dpo")["tiers"]
    with _posted(page, "/api/run") as run:
        button(page, "Run").click()
    assert run.value.post_data_json["exercise"] == "dpo"
    wait_for_report(page)
    expect(results.locator(".verdict")).to_contain_text("Not passed yet")
    expect(results.locator(".verdict")).to_contain_text("Run: visible tests only")
    expect(results.locator("li.tier")).to_have_count(len(tiers))
    expect(results.locator("li.tier.failed").first).to_contain_text("T0")

    set_code(page, DPO.reference.read_text(), DPO.id)
    page.get_by_label("Your name").fill("grace")
    with _posted(page, "/api/submit") as submit:
        button(page, "Submit").click()
    assert submit.value.post_data_json["exercise"] == "dpo"
    expect(results.locator(".verdict")).to_contain_text(
        "Submit: every tier", timeout=GRADE_TIMEOUT_MS
    )
    failing = results.locator("li.test.failed, li.test.error").all_inner_texts()
    assert "All tiers passed" in results.locator(".verdict").inner_text(), failing
    expect(results.locator("li.tier.passed")).to_have_count(len(tiers))

    titles = {table.name: table.title for table in DPO.tables}
    pairs = results.get_by_role("table", name=titles["pairs"])
    expect(pairs.locator("tbody tr")).to_have_count(3)
    tie = pairs.locator("tbody tr", has_text="a tie (m = 0)")
    expect(tie.locator("td").nth(0)).to_have_text("0")  # the margin
    expect(tie.locator("td").nth(1)).to_have_text("0.5")  # its weight sigmoid(0)
    wrong = pairs.locator("tbody tr", has_text="ranked wrong (m = -2)")
    expect(wrong.locator("td").nth(1)).to_have_text("0.8808")  # sigmoid(2)
    tokens = results.get_by_role("table", name=titles["token_grads"])
    expect(tokens.locator("tbody tr")).to_have_count(6)
    assert tokens.locator("td.muted-cell").count() > 0, "no padding cell is greyed"
    expect(tokens.locator("td.muted-cell").first).to_have_text("0")  # padding gets exactly 0

    page.wait_for_function(PLOTS_DECODED, timeout=GRADE_TIMEOUT_MS)
    alts = [image.get_attribute("alt") for image in results.get_by_role("img").all()]
    assert alts == [plot.text for plot in DPO.plots]
    shown = results.locator("figcaption:visible")  # the reference solution's are toggled away
    expect(shown).to_have_text([plot.title for plot in DPO.plots])

    page.get_by_role("tab", name="History").click()
    history = page.locator("#history")
    expect(history).to_contain_text(f"Exercise: {DPO.title}")
    expect(history.locator(".history-item")).to_have_count(1)
    expect(history.locator(".history-item").first).to_contain_text("passed")

    _picker(page).select_option(ROOT.id)
    expect(page).to_have_url(f"{server}/?exercise={ROOT.id}")
    expect(editor).to_contain_text("# my gspo draft 17")
    expect(editor).not_to_contain_text("def dpo_loss")
    expect(results.locator(".verdict")).to_have_count(0)
    expect(history).to_contain_text(f"Exercise: {ROOT.title}")
    expect(history).to_contain_text("No submissions yet.")  # grace submitted to DPO only

    page.go_back()  # the browser's Back returns to DPO, with the code submitted there
    expect(page).to_have_url(f"{server}/?exercise=dpo")
    expect(_picker(page)).to_have_value("dpo")
    expect(editor).to_contain_text("def dpo_loss")
    expect(history.locator(".history-item")).to_have_count(1)
    assert page.evaluate(f"localStorage.getItem('{code_key(DPO.id)}')") == DPO.reference.read_text()
    assert page.evaluate(f"localStorage.getItem('{code_key(ROOT.id)}')") == gspo_code


def test_a_link_to_dpo_opens_dpo_and_reset_touches_dpo_only(page, server):
    from playwright.sync_api import expect

    editor = page.locator(".cm-content")
    set_code(page, "# kept gspo code\n", ROOT.id)
    page.goto(f"{server}/?exercise=dpo")
    expect(page.locator(".markdown h1")).to_contain_text("DPO: learn from preferences")
    expect(_picker(page)).to_have_value("dpo")
    expect(page).to_have_title(f"{DPO.title} · gspo-grader")
    expect(editor).to_contain_text("def sequence_logp")

    editor.click()
    page.keyboard.press("Control+Home")
    page.keyboard.type("# dpo draft 5\n")
    page.once("dialog", lambda dialog: dialog.accept())
    button(page, "Reset to starter").click()
    expect(editor).not_to_contain_text("# dpo draft 5")
    assert page.evaluate(f"localStorage.getItem('{code_key(DPO.id)}')") == DPO.starter.read_text()
    assert page.evaluate(f"localStorage.getItem('{code_key(ROOT.id)}')") == "# kept gspo code\n"


def test_an_unknown_exercise_says_so_and_opens_the_first(page, server):
    from playwright.sync_api import expect

    page.goto(f"{server}/?exercise=nope")
    alert = results_panel(page).get_by_role("alert")
    expect(alert).to_have_text("There is no exercise “nope”; here is the first exercise instead.")
    expect(_picker(page)).to_have_value(ROOT.id)
    expect(page).to_have_url(f"{server}/?exercise={ROOT.id}")
    expect(page.locator(".cm-content")).to_contain_text("def sequence_ratio")
