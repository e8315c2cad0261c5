"""A stand-in for grader.judge.Grader: instant, deterministic, and able to block on demand.

The verdict depends on the code only: code that still raises NotImplementedError fails
every tier; code containing "syntax(" gets a submission error; code containing
"grader-fault" gets a grader error (the grader's own failure); anything else passes.
"""

from __future__ import annotations

import struct
import threading
import zlib

from grader.report import Artifacts, GraderError, Plot, Report, SubmissionError, TierResult

FAULT = GraderError(message="Grader error (not your code's fault): the judge process failed.")


def tiny_png(width: int = 1) -> bytes:
    """A valid 1-pixel-high greyscale PNG, written by hand so the fake needs no matplotlib."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + b"\x80" * width)
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


PLOT_NAMES = ("curves", "grad_matrix", "token_vs_sequence")  # the root exercise's


class FakeDrawer:
    """Draws tiny PNGs at once (no matplotlib) and remembers each result it drew."""

    def __init__(self):
        self.results: list[dict] = []

    def __call__(self, exercise, result: dict) -> dict[str, bytes]:
        self.results.append(result)
        return {plot.name: tiny_png(len(result.get("ratios", ()))) for plot in exercise.plots}


class FakeGrader:
    def __init__(self, start_gate: threading.Event | None = None):
        self.ready = False
        self.start_gate = start_gate
        self.grade_gate: threading.Event | None = None  # set: gradings wait for it
        self.calls: list[tuple[str, str]] = []
        self.names: list[str | None] = []
        self.closed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.start_gate is not None:
            self.start_gate.wait(10)
        self.ready = True

    def stats(self) -> dict:
        return {"pool_size": 3}

    def close(self) -> None:
        self.closed = True

    def grade(
        self,
        code: str,
        mode: str = "submit",
        filename: str = "submission.py",
        tiers=None,
        *,
        exercise: str | None = None,
        name: str | None = None,
    ) -> Report:
        with self._lock:
            self.calls.append((code, mode))
            self.names.append(name)
        if self.grade_gate is not None:
            self.grade_gate.wait(10)
        if "grader-fault" in code:
            return fake_report(code, mode).model_copy(update={"grader_error": FAULT})
        return fake_report(code, mode).model_copy(update={"submission": name})


def fake_report(code: str, mode: str) -> Report:
    if "syntax(" in code:
        error = SubmissionError(kind="syntax_error", message="invalid syntax", line=1)
        return Report(passed=False, score=0, max_score=20, mode=mode, submission_error=error)
    if "timeout(" in code:  # a call ran past its limit (on a loaded machine, maybe)
        error = SubmissionError(kind="timeout", message="sequence_ratio took longer than 3 s")
        return Report(passed=False, score=0, max_score=20, mode=mode, submission_error=error)
    ok = "NotImplementedError" not in code
    tier_ids = ["T0"] if mode == "run" else ["T0", "T1"]
    tiers = [
        TierResult(id=t, title=t, passed=ok, score=10 if ok else 0, max_score=10) for t in tier_ids
    ]
    loss = -0.1 - 0.01 * code.count("!")  # extra "!" in a comment: other toy results
    plots = [Plot(name=name, title=name, alt=f"the {name} plot") for name in PLOT_NAMES]
    data = {"ratios": [1.0, 1.5, 0.5], "loss": loss}
    artifacts = Artifacts(plots=plots, data=data) if ok else None
    score = sum(t.score for t in tiers)
    return Report(
        passed=ok,
        score=score,
        max_score=10 * len(tiers),
        mode=mode,
        tiers=tiers,
        artifacts=artifacts,
    )
