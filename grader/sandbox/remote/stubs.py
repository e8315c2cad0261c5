"""The starter's functions, recognized: a function that only ever raised the same
NotImplementedError is not called again in the grading.

A function whose first NOT_IMPLEMENTED_CALLS calls all raised the same NotImplementedError,
and that never returned, is a stub: its later calls raise a copy of that error at once in
the judge, so the report groups them with the first ("same error") and the starter is
judged without a worker round trip per test.

    stubs = Stubs()
    stubs.stubbed(name)                # True: its calls are not sent, nor sent ahead
    error = stubs.error_for(name)      # None: call it; else raise this instead
    stubs.raised(name, error)          # after a call raised
    stubs.returned(name)               # after a call returned

Why this cannot fail a correct implementation: a correct implementation passes every tier
test, and no tier test passes on a NotImplementedError it did not ask for (a test that
expects an error checks its type, ValueError and the like). So a function whose calls raised
NotImplementedError has already failed tests, and the grading fails whatever its later calls
do; the only calls answered here are those of a function that has never returned in this
grading, with the very error it raised on every call so far. A function that returned once,
or raised anything else, is always called.
"""

from __future__ import annotations

from grader.sandbox.errors import StudentError

NOT_IMPLEMENTED_CALLS = 3  # calls that all raised NotImplementedError: the function is a stub


class Stubs:
    """One grading's count, per function, of the calls that raised the same
    NotImplementedError; a function that returned once, or raised anything else, is
    `written` instead."""

    def __init__(self) -> None:
        self._stubbed: dict[str, tuple[StudentError, int]] = {}  # name -> (first error, calls)
        self._written: set[str] = set()

    def returned(self, name: str) -> None:
        self._written.add(name)

    def raised(self, name: str, error: StudentError) -> None:
        """Count a call of `name` that raised; only NotImplementedError, the same each time,
        keeps it a stub (a copy made by `error_for` counts as one more such call)."""
        if name in self._written:
            return
        same = (error.type_name, error.message, error.line)
        found = self._stubbed.get(name)
        if (
            error.type_name != "NotImplementedError"
            or type(error) is not StudentError
            or (found is not None and (found[0].type_name, found[0].message, found[0].line) != same)
        ):
            self._written.add(name)  # raised something else: always called from now on
            self._stubbed.pop(name, None)
            return
        self._stubbed[name] = (found[0] if found else error, (found[1] if found else 0) + 1)

    def stubbed(self, name: str) -> bool:
        """Whether `name` is a stub now: its calls are answered by `error_for`."""
        found = self._stubbed.get(name)
        return found is not None and found[1] >= NOT_IMPLEMENTED_CALLS and name not in self._written

    def error_for(self, name: str) -> StudentError | None:
        """The error to raise at once for a call of `name`, if the submission has not
        written it (see above): a copy of the error its first calls raised."""
        if not self.stubbed(name):
            return None
        first = self._stubbed[name][0]
        return StudentError(
            first.type_name,
            first.message,
            student_traceback=first.student_traceback,
            line=first.line,
            filename=first.filename,
        )
