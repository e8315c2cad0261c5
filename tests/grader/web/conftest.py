"""The browser tests' fixtures: the real service, Debian's Chromium, and a fresh page.

One `python -m grader serve` per test module on a free loopback port, with a fresh data
folder; a fresh browser context (so an empty localStorage) per test.
"""

from __future__ import annotations

import pytest
from page_server import CHROMIUM, CHROMIUM_ARGS, start_service, stop_service


def _need_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: install Debian's chromium package to run browser tests"
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The real service, serving the freshly built page, for every test of a module."""
    _need_chromium()
    base, process = start_service(tmp_path_factory.mktemp("service-data"))
    yield base
    stop_service(process)


@pytest.fixture(scope="module")
def browser():
    _need_chromium()
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
