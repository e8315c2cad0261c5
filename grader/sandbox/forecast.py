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

A call is encoded once: its bytes are the key it is compared by, and sending it (now or in
a later grading) adds only the request's envelope (`codec.with_fields`).

The judge keeps a forecast only from a grading that passed every test, and only for the
same selection of tests (mode and tiers), so a Run never receives a hidden test's inputs
(judge/grading.py, `Grading._keep_forecast`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from grader.sandbox.worker.codec import Encoded

AHEAD_CALLS = 8  # calls sent before the test asks: enough to keep the worker busy
AHEAD_BYTES = 64 << 10  # requests whose replies are unread: far below a socket's buffers,
# so sending never waits for a worker that is itself waiting to send a reply


@dataclass(frozen=True)
class ForecastCall:
    """One call as the proxy encoded it (name, arguments, grad mode; no sequence number or
    call id): what two calls must share to be the same call, and the request to send again."""

    key: bytes  # the encoded body: its JSON header, then its tensors' bytes (a copy)
    header_nbytes: int

    @classmethod
    def of(cls, encoded: Encoded) -> ForecastCall:
        return cls(b"".join(encoded.parts[1:]), len(encoded.parts[1]))

    def body(self) -> Encoded:
        """The encoded body again, for `codec.with_fields` to number and send."""
        view, size = memoryview(self.key), self.header_nbytes
        return Encoded([struct.pack(">I", size), view[:size], view[size:]], [], [])


@dataclass(frozen=True)
class Forecast:
    calls: tuple[ForecastCall, ...]


@dataclass
class Script:
    """The calls of one grading, in order, to become the next grading's forecast."""

    calls: list[ForecastCall] = field(default_factory=list)

    def record(self, call: ForecastCall) -> None:
        self.calls.append(call)

    def forecast(self) -> Forecast | None:
        return Forecast(tuple(self.calls)) if self.calls else None
