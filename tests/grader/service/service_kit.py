"""What the service tests share besides fixtures (a module of its own: every test folder
has a conftest.py, so `from conftest import` would find whichever came first)."""

from __future__ import annotations

import time

TOKEN = "instructor-token-0123456789abcdefghijklmnop"


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)
