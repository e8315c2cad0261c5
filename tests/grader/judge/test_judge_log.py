"""What a judge process logs reaches the grader's stderr, and its end a failure's detail."""

from __future__ import annotations

import io
import os
import time

import pytest

from grader.judge import Grader, StderrRelay
from grader.sandbox import Limits


def _wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def test_the_relay_passes_every_line_on_and_keeps_the_end():
    read_end, write_end = os.pipe()
    target = io.StringIO()
    relay = StderrRelay(os.fdopen(read_end, "rb"), pid=42, target=target)
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(b"WARNING grader.sandbox.spawn: weak\nTraceback (most recent call last):\n")
        pipe.write(b"  a line without its end")
    relay.join(5)
    assert target.getvalue() == (
        "judge 42: WARNING grader.sandbox.spawn: weak\n"
        "judge 42: Traceback (most recent call last):\n"
        "judge 42:   a line without its end\n"
    )
    assert relay.tail(1000).endswith("Traceback (most recent call last):\n  a line without its end")
    assert relay.tail(3) == "end"


def test_a_relay_whose_target_fails_still_drains_the_pipe():
    class Broken(io.StringIO):
        def write(self, text):
            raise OSError("stderr is gone")

    read_end, write_end = os.pipe()
    relay = StderrRelay(os.fdopen(read_end, "rb"), pid=7, target=Broken())
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(b"x\n" * 100_000 + b"the end\n")  # more than a pipe holds: must not block
    relay.join(5)
    assert relay.tail(7) == "the end"


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_judges_sandbox_warning_reaches_the_graders_stderr(monkeypatch, capfd):
    """A judge capped below bwrap warns once, when it starts its worker; the line used to
    end in a temporary file that nobody read unless the judge failed."""
    monkeypatch.setenv("GSPO_GRADER_SANDBOX_LEVEL", "rlimits")
    monkeypatch.delenv("GSPO_GRADER_SANDBOX_REQUIRE", raising=False)
    limits = Limits(call_wall_seconds=5.0, grading_wall_seconds=30.0)
    with Grader(pool_size=1, limits=limits, warm=False) as grader:
        assert grader.wait_ready(300), "the judge process did not start"
        seen = io.StringIO()

        def warned() -> bool:
            seen.write(capfd.readouterr().err)
            return "sandbox is weaker than bwrap" in seen.getvalue()

        assert _wait_for(warned, 10), seen.getvalue()
    lines = [line for line in seen.getvalue().splitlines() if "weaker than bwrap" in line]
    assert len(lines) == 1 and lines[0].startswith("judge "), lines
    assert "WARNING grader.sandbox.spawn: sandbox is weaker than bwrap: " in lines[0]
