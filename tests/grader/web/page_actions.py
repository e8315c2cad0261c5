"""What the browser tests do on the page, the way a student (or a screen reader) finds it:
buttons by their names, the region named "Results", the editor's content."""

from __future__ import annotations

import json
import urllib.request

GRADE_TIMEOUT_MS = 120_000  # a cold Submit runs every tier, the toy included, on 2 shared cores
PLOTS_DECODED = """() => {
  const images = [...document.querySelectorAll('section[aria-label="Results"] img')];
  return images.length > 0 && images.every((img) => img.complete && img.naturalWidth > 0);
}"""


def code_key(exercise_id: str) -> str:
    """Where the page keeps the code of one exercise in localStorage."""
    return f"gspo-grader.code.{exercise_id}"


def results_panel(page):
    return page.get_by_role("region", name="Results")


def button(page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def set_code(page, code: str, exercise_id: str) -> None:
    """Select everything in the editor and type `code` over it as one text input; the page
    keeps it as `exercise_id`'s code."""
    page.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(code)
    assert page.evaluate("key => localStorage.getItem(key)", code_key(exercise_id)) == code


def wait_for_report(page) -> None:
    results_panel(page).locator(".verdict").wait_for(timeout=GRADE_TIMEOUT_MS)


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)
