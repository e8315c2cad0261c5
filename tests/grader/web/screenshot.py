"""Take docs/screenshot.png: the page at 1280x900 after a passing submission, graded by the
real service.

    .venv/bin/python tests/grader/web/screenshot.py [OUT.png]

The submission is the starter's module docstring followed by the reference's functions, so
the editor shows what a student sees at the top of the file and the README never shows the
reference's code.
"""

from __future__ import annotations

import ast
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from page_actions import PLOTS_DECODED, code_key
from page_server import CHROMIUM, CHROMIUM_ARGS, REPO, start_service, stop_service

from grader.exercise import default_exercise


def passing_submission() -> str:
    """The starter's docstring, then everything after the reference's docstring."""
    starter = (REPO / "starter" / "gspo.py").read_text()
    reference = (REPO / "reference" / "gspo.py").read_text()
    docstring_end = ast.parse(starter).body[0].end_lineno
    body_start = ast.parse(reference).body[1].lineno - 1  # the first statement after the docstring
    header = "\n".join(starter.splitlines()[:docstring_end])
    body = "\n".join(reference.splitlines()[body_start:])
    return f"{header}\n\n{body}\n"


def main(argv: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    out = Path(argv[0]) if argv else REPO / "docs" / "screenshot.png"
    with tempfile.TemporaryDirectory() as data_dir:
        base, process = start_service(Path(data_dir))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
                )
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(base)
                page.locator(".markdown").wait_for()
                page.locator(".cm-content").click()
                page.keyboard.press("Control+A")
                page.keyboard.insert_text(passing_submission())
                key = code_key(default_exercise().id)
                typed = page.evaluate("key => localStorage.getItem(key)", key)
                if typed != passing_submission():
                    raise SystemExit("the editor did not take the submission verbatim")
                page.keyboard.press("Control+Home")
                page.locator("#editor").evaluate("editor => { editor.style.height = '36%'; }")
                page.get_by_label("Your name").fill("ada")
                page.get_by_role("button", name="Submit", exact=True).click()
                verdict = page.locator(".verdict")
                verdict.wait_for(timeout=180_000)
                if "All tiers passed" not in verdict.inner_text():
                    failing = page.locator("li.test.failed, li.test.error").all_inner_texts()
                    raise SystemExit(f"the submission did not pass: {failing}")
                page.wait_for_function(PLOTS_DECODED, timeout=60_000)
                page.screenshot(path=str(out))
                browser.close()
        finally:
            stop_service(process)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
