"""Calls sent ahead: a grading's calls forecast the next grading's, so the worker starts early.

A judge grades the same tests, on the same inputs, again and again: only the submission
changes. So the calls one grading made (function name, argument bytes, grad mode) forecast
the calls of the next grading of the same tests. The proxy sends the forecast's next calls
to the worker ahead of time, a few at once; when a test then makes a call, the proxy
compares it byte for byte with the forecast's next one:

    equal      the worker has run it already, or is running it: its reply is on the way
    different  the forecast is dropped for the rest of the grading: the replies still
               coming are read and thrown away (their graphs released), and every later
               call is one round trip, as without a forecast

Only what a test really called ever reaches it: a reply is used for an equal call only, and
the worker ran it on equal bytes. The worker itself is unchanged: it answers requests in
order, as ever. What the student's code can notice is that, after a difference, its
functions were called a few more times (at most AHEAD_CALLS) than the tests asked for.

The judge keeps a forecast only from a grading that passed every test, and only for the
same selection of tests (mode and tiers), so a Run never receives a hidden test's inputs
(judge/grading.py, `Grading._keep_forecast`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from grader.sandbox.worker.codec import Encoded, replace_tensors, tensors_in

AHEAD_CALLS = 8  # calls sent before the test asks: enough to keep the worker busy
AHEAD_BYTES = 64 << 10  # requests whose replies are unread: far below a socket's buffers,
# so sending never waits for a worker that is itself waiting to send a reply


@dataclass(frozen=True)
class ForecastCall:
    """One call of a past grading: what to compare, and the request to send again."""

    key: bytes  # the encoded body: header and tensor bytes
    body: dict  # {"op", "name", "args", "kwargs", "grad"}, its tensors private copies


@dataclass(frozen=True)
class Forecast:
    calls: tuple[ForecastCall, ...]


def call_key(encoded: Encoded) -> bytes:
    """The bytes two calls must share to be the same call (the length prefix left out)."""
    return b"".join(encoded.parts[1:])


@dataclass
class Script:
    """The calls of one grading, in order, to become the next grading's forecast."""

    calls: list[ForecastCall] = field(default_factory=list)

    def record(self, key: bytes, body: dict) -> None:
        """A call no forecast foresaw: its tensors are copied (the test may change them)."""
        tensors = tensors_in([body["args"], body["kwargs"]])
        copies = {id(t): _private_copy(t) for t in tensors}
        kept = {**body, "args": replace_tensors(body["args"], copies)}
        kept["kwargs"] = replace_tensors(body["kwargs"], copies)
        self.calls.append(ForecastCall(key, kept))

    def repeat(self, call: ForecastCall) -> None:
        """A call equal to the forecast's: the forecast's own copies serve again."""
        self.calls.append(call)

    def forecast(self) -> Forecast | None:
        return Forecast(tuple(self.calls)) if self.calls else None


def _private_copy(t: torch.Tensor) -> torch.Tensor:
    """Equal bytes on the wire: the same values, dtype, shape, requires_grad and leafness."""
    copy = t.detach().clone()
    if not t.requires_grad:
        return copy
    copy.requires_grad_(True)
    return copy if t.is_leaf else copy.view_as(copy)
