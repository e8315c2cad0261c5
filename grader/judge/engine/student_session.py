"""The sandboxed submission of one grading, as the `student` fixture gives it.

It is opened on first use (a grading whose tests never call the student starts no worker).
Each test begins with its forecast (its calls the last time it passed, forecast.py) and ends
giving its calls back; every call is counted, and the last call of the visible test now
running is kept, so a failure can show its inputs.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from grader.exercise import Exercise
from grader.judge.engine.recording import RecordedCall, RecordingStudent
from grader.judge.engine.verdicts import GraderFault, SubmissionNotLoaded
from grader.judge.link import GradingRequest
from grader.sandbox import Limits
from grader.sandbox.remote import Forecast, open_student


class StudentSession:
    """One grading's proxy to the submission, and what its tests asked of it."""

    def __init__(self, exercise: Exercise, limits: Limits, pool: Any) -> None:
        self.exercise, self.limits, self.pool = exercise, limits, pool
        self.proxy: Any = None  # a StudentProxy once opened
        self.calls = 0
        self.start_s = 0.0  # how long the sandbox took to start
        self._stack = contextlib.ExitStack()
        self._student: RecordingStudent | None = None
        self._open_error: str | None = None
        self._watched: str | None = None  # the visible test running now
        self._last_call: dict[str, RecordedCall] = {}  # node id -> its last student call
        self._forecast: Forecast | None = None  # the forecast of the test now running
        self._then: Forecast | None = None  # ... and of the test that runs next

    def watch(self, nodeid: str | None) -> None:
        """The test now running, if it is visible (a hidden one never shows its inputs)."""
        self._watched = nodeid

    def begin_test(self, forecast: Forecast | None, then: Forecast | None = None) -> None:
        """A test starts, with its forecast (sent ahead now, or once the sandbox opens) and
        `then`, the forecast of the test that runs next (sent once this one's is sent)."""
        self._forecast, self._then = forecast, then
        if self.proxy is not None:
            self.proxy.begin_test(forecast, then)

    def end_test(self) -> Forecast | None:
        """The test ended: the calls it made (None: none, or its worker was restarted)."""
        self._forecast = self._then = None
        if self.proxy is None:
            return None
        return self.proxy.end_test() or None

    @property
    def test_round_trips(self) -> int:
        """The requests of its own that the test that ended last waited for."""
        return 0 if self.proxy is None else self.proxy.test_round_trips

    def last_call(self, nodeid: str) -> RecordedCall | None:
        return self._last_call.get(nodeid)

    def student(self, request: GradingRequest) -> RecordingStudent:
        """The submission, opened on first use; GraderFault when the sandbox cannot start,
        SubmissionNotLoaded when the submission did not load."""
        if self._open_error is not None:
            raise GraderFault(self._open_error)
        if self.proxy is None:
            self._open(request)
        if self.proxy.load_error is not None:
            raise SubmissionNotLoaded(load_error_message(self.proxy.load_error))
        return self._student

    def _open(self, request: GradingRequest) -> None:
        start = time.perf_counter()
        try:
            self.proxy = self._stack.enter_context(
                open_student(
                    request.source,
                    functions=self.exercise.function_names,
                    filename=request.filename,
                    limits=self.limits,
                    pool=self.pool,
                    forecast=self._forecast,
                    then=self._then,
                )
            )
        except Exception as error:  # the sandbox failed to start: never the student's fault
            self._open_error = f"the sandbox could not start: {type(error).__name__}: {error}"
            raise GraderFault(self._open_error) from error
        finally:
            self.start_s = time.perf_counter() - start
        names = self.exercise.function_names
        self._student = RecordingStudent(self.proxy, names, self._on_call, request.source)

    def _on_call(self, name: str, args: tuple, kwargs: dict) -> None:
        self.calls += 1
        if self._watched is not None:
            self._last_call[self._watched] = RecordedCall(name, args, kwargs)

    def close(self) -> tuple[str, bool]:
        """End the worker; what the student printed, and whether it was cut."""
        with contextlib.suppress(Exception):
            self._stack.close()  # the worker ends; what it printed stays readable
        if self.proxy is None:
            return "", False
        with contextlib.suppress(Exception):
            return self.proxy.output()
        return "", False


def load_error_message(error: Any) -> str:
    """The load error as the student should read it."""
    where = f" (line {error.line})" if getattr(error, "line", None) else ""
    message = str(error.message)
    return message if where.strip(" ()") in message else f"{message}{where}"
