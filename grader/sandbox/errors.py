"""What can go wrong on the judge's side of the sandbox, as one tree of exceptions.

    Exception
    +-- StudentError          student code raised; re-raised in the judge with the student's
    |   |                     type name, message, line and student-only traceback
    |   +-- StudentTimeout    a call ran past Limits.call_wall_seconds; the worker was killed
    |   +-- StudentCrash      the worker died mid-call (os._exit, a signal, a limit) or broke
    |   |                     the wire protocol; the next call starts a fresh worker
    |   +-- StudentLoadError  the submission did not load (see .load_error); every call
    |                         raises this
    +-- SandboxError          our side failed (no worker could start): a grader error
    +-- WireError             a frame broke the format or a cap (worker/codec.py; the
                              proxy turns it into a StudentCrash)

`LoadError` is not an exception: it is why a submission could not be loaded, kept on the
proxy as `.load_error`, with the fields of the report's SubmissionError.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoadError:
    """Why the submission could not be loaded; `kind` is a report SubmissionErrorKind."""

    kind: str  # syntax_error | import_error | missing_function | timeout | crash | memory_limit
    message: str  # one plain sentence
    line: int | None = None  # 1-based line in the student's file
    detail: str = ""  # caret excerpt, or the student's part of the traceback

    @classmethod
    def from_reply(cls, error: object) -> LoadError | None:
        """The worker's load error, or None when it is malformed."""
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            return None
        line = error.get("line") if type(error.get("line")) is int else None
        return cls(str(error.get("kind")), error["message"], line, str(error.get("detail")))


class StudentError(Exception):
    """An exception raised by student code, carried over from the worker.

    str() reads like a local traceback's last line plus where:
    "ZeroDivisionError: division by zero (submission.py, line 12)".
    """

    # what the judge reports: exception | timeout | crash | memory_limit (an allocation that
    # the address-space limit refused: Python's MemoryError or torch's "can't allocate memory")
    kind = "exception"

    def __init__(
        self,
        type_name: str,
        message: str,
        *,
        student_traceback: str = "",
        line: int | None = None,
        filename: str = "submission.py",
    ) -> None:
        self.type_name = type_name
        self.message = message
        self.student_traceback = student_traceback
        self.line = line
        self.filename = filename
        if type_name == "MemoryError" or "allocate memory" in message:  # Python's or torch's
            self.kind = "memory_limit"
        super().__init__(self._text())

    @classmethod
    def from_reply(cls, error: object, filename: str) -> StudentError | None:
        """The error a worker's reply describes, or None when it is malformed."""
        if not isinstance(error, dict) or not isinstance(error.get("type_name"), str):
            return None
        line = error.get("line") if type(error.get("line")) is int else None
        return cls(
            error["type_name"],
            str(error.get("message", "")),
            student_traceback=str(error.get("traceback", "")),
            line=line,
            filename=filename,
        )

    def _text(self) -> str:
        head = f"{self.type_name}: {self.message}" if self.message else self.type_name
        return f"{head} ({self.filename}, line {self.line})" if self.line else head


class StudentTimeout(StudentError):
    """A call (or its backward) ran past its wall-clock limit; the worker was killed."""

    kind = "timeout"

    def __init__(self, message: str, *, filename: str = "submission.py") -> None:
        super().__init__("Timeout", message, filename=filename)


class StudentCrash(StudentError):
    """The worker died mid-call, or sent something the wire protocol does not allow."""

    kind = "crash"

    def __init__(
        self, message: str, *, description: str = "", filename: str = "submission.py"
    ) -> None:
        self.description = description  # the launcher's words, e.g. "killed by signal SIGSEGV"
        super().__init__("Crash", message, filename=filename)
        if "memory" in description:
            self.kind = "memory_limit"


class StudentLoadError(StudentError):
    """A call on a submission that did not load: repeats why (kind, message, line, detail)."""

    def __init__(self, load_error: LoadError, *, filename: str = "submission.py") -> None:
        self.load_error = load_error
        self.kind = load_error.kind
        super().__init__(
            "LoadError",
            load_error.message,
            student_traceback=load_error.detail,
            line=load_error.line,
            filename=filename,
        )

    def _text(self) -> str:
        return f"the submission could not be loaded: {self.message}"


class SandboxError(Exception):
    """The sandbox itself failed (a worker did not start or never said it was ready).

    This is the grader's fault or the host's, never the student's: report a grader error.
    """
