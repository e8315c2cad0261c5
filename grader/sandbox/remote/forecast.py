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

The whole of it lives here: a call as a forecast sees it (`ForecastCall`: encoded once, its
bytes are the key it is compared by, and sending it again adds only the request's envelope,
`codec.with_fields`), one grading's calls sent ahead and its own calls recorded
(`CallsAhead`, held by the proxy), and the forecasts a judge keeps (`Forecasts`): only from a
grading that passed every test without a restart, and only for the same selection of tests
(mode and tests), so a Run never receives a hidden test's inputs.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable
from dataclasses import dataclass

from grader.sandbox.worker.codec import Encoded

AHEAD_CALLS = 8  # calls sent before the test asks: enough to keep the worker busy
AHEAD_BYTES = 64 << 10  # requests whose replies are unread: far below a socket's buffers,
# so sending never waits for a worker that is itself waiting to send a reply
FORECASTS_KEPT = 8  # selections of tests (mode, tests) whose last calls a judge remembers


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


Forecast = tuple[ForecastCall, ...]  # the calls of an earlier grading, in order


class CallsAhead:
    """One grading's side of a forecast: the calls sent ahead whose replies are not yet
    taken, the counts, and this grading's own calls (the next grading's forecast)."""

    def __init__(self, forecast: Forecast | None) -> None:
        self.forecast = forecast  # None once dropped: no more calls are sent ahead
        self.next = 0  # the forecast call that the next call should equal
        self.pending: collections.deque[tuple[int, int]] = collections.deque()  # (seq, id)
        self.sent = self.answered = 0
        self.script: list[ForecastCall] = []

    def send(
        self, post: Callable[[ForecastCall], tuple[int, int] | None], room: Callable[[int], bool]
    ) -> None:
        """Send the forecast's next calls through `post` ((seq, call id), None when the worker
        cannot take it), up to AHEAD_CALLS not yet asked for, while `room(request bytes)`."""
        while self.forecast is not None:
            index = self.next + len(self.pending)
            if index >= len(self.forecast) or len(self.pending) >= AHEAD_CALLS:
                return
            call = self.forecast[index]
            if not room(len(call.key)):
                return
            sent = post(call)
            if sent is None:  # a dead worker: the next request meets it and says so
                self.forecast = None
                return
            self.pending.append(sent)
            self.sent += 1

    def take(self, call: ForecastCall) -> tuple[int, int] | None:
        """(seq, call id) of the call sent ahead that equals `call`, or None: the caller
        then drops the forecast (`drop`) and sends the call itself. Either way it is
        recorded in the script."""
        forecast = self.forecast
        if forecast is not None and self.pending and forecast[self.next].key == call.key:
            self.script.append(forecast[self.next])  # the same bytes, kept once
            self.next += 1
            self.answered += 1
            return self.pending.popleft()
        self.script.append(call)
        return None

    def drop(self) -> list[tuple[int, int]]:
        """No more calls ahead; the calls sent and not taken, whose replies are still due."""
        pending = list(self.pending)
        self.forecast = None
        self.pending.clear()
        return pending


class Forecasts:
    """The forecasts one judge keeps for one exercise, by selection of tests."""

    def __init__(self) -> None:
        self._kept: dict[tuple, Forecast] = {}

    def get(self, selection: tuple) -> Forecast | None:
        return self._kept.get(selection)

    def keep(self, selection: tuple, ahead: CallsAhead, clean: bool) -> None:
        """After a grading that passed every test without a restart (`clean`), its calls
        become the forecast of the next grading of the same tests (only passing gradings:
        the inputs a test derives from the student's results are then the reference's)."""
        if not clean or not ahead.script:
            return
        if selection not in self._kept and len(self._kept) >= FORECASTS_KEPT:
            del self._kept[next(iter(self._kept))]
        self._kept[selection] = tuple(ahead.script)
