"""The rehearsal's worker thread (grader/sandbox/in_process.py): it serves the exercise's
reference inside the judge's process, so what it leaves in that process matters."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from grader.exercise import find_exercise
from grader.sandbox import Limits
from grader.sandbox.in_process import InProcessPool
from grader.sandbox.remote import open_student


def worker_threads() -> int:
    return sum(thread.name == "in-process-worker" for thread in threading.enumerate())


def wait_for_threads(count: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while worker_threads() > count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker_threads() == count


def test_a_thread_that_ends_drops_only_the_module_it_loaded():
    exercise = find_exercise(None)
    source = exercise.reference.read_text(encoding="utf-8")
    pool, functions = InProcessPool(Limits()), exercise.function_names
    threads = worker_threads()
    with contextlib.ExitStack() as second_stack:
        with open_student(source, functions=functions, pool=pool) as first:
            assert first.load_error is None
            second = second_stack.enter_context(
                open_student(source, functions=functions, pool=pool)
            )
            assert second.load_error is None
            loaded_second = sys.modules["submission"]
        wait_for_threads(threads + 1)  # the first thread has ended, in the background
        assert sys.modules.get("submission") is loaded_second
    wait_for_threads(threads)
    assert "submission" not in sys.modules
