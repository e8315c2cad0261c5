"""Closing a Grader (grader/judge/grader.py): its judge processes end, at once while they
are still warming up. A module of its own: no other grader's judges run beside it."""

from __future__ import annotations

import os
import time

from procs import processes

from grader.judge import Grader
from grader.sandbox import WAITS, Limits


def test_closing_a_grader_whose_judges_are_warming_up_kills_them_at_once():
    """A node stopped while it starts does not wait `judge_exit_s` for each judge, which
    would read the request to exit only once warm."""
    grader = Grader(pool_size=3, limits=Limits())
    grader.start()
    deadline = time.monotonic() + 30
    while len(judges()) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(judges()) == 3 and not grader.ready  # started, not warm yet
    started = time.monotonic()
    grader.close()
    assert time.monotonic() - started < WAITS.judge_exit_s  # not 3 x judge_exit_s
    assert judges() == []


def judges() -> list[int]:
    """This process's live judge processes."""
    return [
        p.pid
        for p in processes()
        if p.ppid == os.getpid() and p.state != "Z" and "grader.judge_process" in p.command
    ]
