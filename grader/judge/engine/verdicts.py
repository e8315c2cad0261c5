"""Turn what happened in one tier test into an outcome and a short message, and decide whose
fault a failure is.

The student is blamed only for what the student did: an assertion of a tier test failed
(the test compared the submission's results and said what it expected), or the submission
raised, timed out or crashed (the sandbox's StudentError family). Anything else that blows up
in a test or a fixture (a TypeError in the test code, a fixture that cannot start the sandbox)
is the grader's own fault and is reported as outcome "error" with a message that says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from grader.sandbox import StudentError

MAX_MESSAGE_CHARS = 800
GRADER_FAULT = "Grader error (not your code's fault)"


class SubmissionNotLoaded(Exception):
    """Raised by the `student` fixture when the submission could not be loaded."""


class GraderFault(Exception):
    """Raised by the judge itself when it cannot do its job (e.g. the sandbox fails to start)."""


class TierStoppedRun(Exception):
    """A tier test or fixture tried to end the whole run: it raised KeyboardInterrupt or
    called `pytest.exit`, or set `session.shouldstop` / `shouldfail`. Under `pytest` that
    ends the run; in a grading it fails that one test as the grader's fault (protocol.py),
    and the other tests are judged as usual."""

    def __init__(self, how: str) -> None:
        super().__init__(f"it tried to stop the whole grading ({how}); only this test is lost")


@dataclass(frozen=True)
class TestVerdict:
    """What one phase (setup, call, teardown) of a tier test came to, and whose fault."""

    __test__ = False  # not a pytest test class

    outcome: str  # passed | failed | error | skipped
    message: str = ""
    blame: str = ""  # "" | "student" | "grader"
    student_error: BaseException | None = None  # the StudentError, for submission_error
    same_as: tuple | None = None  # the student error's identity: tests failing alike group


def judge_exception(error: BaseException, phase: str) -> TestVerdict:
    """Classify an exception raised in a test's setup, call or teardown."""
    if isinstance(error, pytest.skip.Exception):
        return TestVerdict("skipped", shorten(str(error.msg)))
    if isinstance(error, SubmissionNotLoaded):
        return TestVerdict("failed", shorten(str(error)), "student", same_as=("load", str(error)))
    if isinstance(error, StudentError):
        identity = (error.type_name, error.message, error.line)
        return TestVerdict("failed", shorten(str(error)), "student", error, identity)
    if phase == "call" and isinstance(error, AssertionError | pytest.fail.Exception):
        return TestVerdict("failed", assertion_message(error), "student")
    return TestVerdict("error", grader_message(error, phase), "grader")


def hit_a_limit(error: BaseException | None) -> bool:
    """A student error that the report names as the submission's (a limit or a crash)."""
    return getattr(error, "kind", None) in ("timeout", "crash", "memory_limit")


def assertion_message(error: BaseException) -> str:
    """The teaching part of a failed assertion, without pytest's re-evaluation lines.

    `assert x, "expected ..."` reads "expected ...\\nassert ..." once rewritten by pytest; the
    first part is what the test's author wrote for the student.
    """
    text = str(error.msg) if isinstance(error, pytest.fail.Exception) else str(error)
    head, sep, _ = text.partition("\nassert ")
    if sep and head.strip():
        text = head
    return shorten(text.strip() or f"{type(error).__name__} (the test gave no message)")


def grader_message(error: BaseException, phase: str) -> str:
    where = {"setup": "while preparing the test", "teardown": "while cleaning up"}.get(
        phase, "inside the test itself"
    )
    detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return shorten(f"{GRADER_FAULT}: the grader's code failed {where}: {detail}")


def shorten(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Keep messages short: reports are read by students, not debuggers."""
    lines = text.strip().splitlines()
    text = "\n".join(lines[:12])
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."
