"""OutputCapture: what a worker wrote is kept once settle() returns, cut at the cap."""

from __future__ import annotations

import os

from grader.sandbox import OutputCapture


def test_settle_returns_only_once_what_the_pipe_held_is_kept():
    """Bytes a drain thread has read but not yet kept must not look settled: the student's
    last print was lost about twice in 3,000 tries when settle() only asked the pipe."""
    lost = []
    for i in range(3000):
        read_end, write_end = os.pipe()
        capture = OutputCapture([read_end], cap=1 << 20)
        os.write(write_end, f"line {i}\n".encode())
        capture.settle(timeout=5.0)
        text, truncated = capture.take()
        os.close(write_end)
        capture.join(timeout=5.0)
        if (text, truncated) != (f"line {i}\n", False):
            lost.append((i, text))
    assert lost == []


def test_output_past_the_cap_is_dropped_and_marked():
    read_end, write_end = os.pipe()
    capture = OutputCapture([read_end], cap=10)
    os.write(write_end, b"0123456789abcdef")
    os.close(write_end)
    capture.join(timeout=5.0)
    assert capture.take() == ("0123456789", True)
