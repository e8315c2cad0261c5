"""Calls sent ahead: a test's calls in an earlier grading forecast its calls now.

A judge runs the same tests, on the same inputs, again and again: only the submission
changes. So the calls one test made (function name, argument bytes, grad mode) the last time
it passed forecast its calls the next time it runs. When a test starts, the proxy sends its
forecast's first calls to the worker at once, in one write; when the test then makes a call,
the proxy compares it byte for byte with the forecast's next one:

    equal      the worker has run it already, or is running it: its reply is on the way;
               the calls used up are topped up, again in one write
    different  the rest of this test's forecast is dropped: the replies still coming are
               read and thrown away (their graphs released), and the test's later calls are
               one round trip each, as without a forecast

A test that fails drops the rest of its own forecast the same way; the next test starts
again from its forecast. So wrong code costs round trips only where it makes other calls,
not for the rest of the grading after its first failed check.

Only what a test really called ever reaches it: a reply is used for an equal call only, and
the worker ran it on equal bytes. The worker itself is unchanged: it answers requests in
order, as ever. What the student's code can notice is that, after a difference or a failed
check, its functions were called a few more times (at most AHEAD_CALLS) than the tests asked.

The whole of it lives here: a call as a forecast sees it (`ForecastCall`: encoded once, its
bytes are the key it is compared by, and sending it again adds only the request's envelope,
`codec.with_fields`), one grading's calls sent ahead and the current test's own calls
(`CallsAhead`, held by the proxy), and the forecasts a judge keeps (`Forecasts`), one per
test and mode. A test's calls are kept after any grading in which that test passed, wrong
submissions' passing tests included (a reply is only ever used for a byte-equal call, so a
forecast can cost time, never a verdict). A forecast is only ever sent when its own test
runs in the same mode, so a Run never receives a hidden test's inputs.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable
from dataclasses import dataclass

from grader.sandbox.worker.codec import Encoded

AHEAD_CALLS = 8  # calls sent before the test asks: enough to keep the worker busy
TOP_UP_BELOW = AHEAD_CALLS // 2  # refill (in one write) once fewer calls than this are ahead
AHEAD_BYTES = 64 << 10  # requests whose replies are unread: far below a socket's buffers,
# so sending never waits for a worker that is itself waiting to send a reply
FORECASTS_KEPT = 4096  # tests (mode, node id) whose last passing calls a judge remembers


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


Forecast = tuple[ForecastCall, ...]  # the calls of one test in an earlier grading, in order
Post = Callable[[list[ForecastCall]], list[tuple[int, int]] | None]


class CallsAhead:
    """One grading's side of the forecasts: the current test's forecast, its calls sent
    ahead whose replies are not yet taken, the counts, and the test's own calls."""

    def __init__(self, forecast: Forecast | None = None) -> None:
        self.forecast = forecast  # the current test's; None once dropped
        self.next = 0  # the forecast call that the next call should equal
        self.pending: collections.deque[tuple[int, int]] = collections.deque()  # (seq, id)
        self.sent = self.answered = 0  # over the whole grading
        self.script: list[ForecastCall] = []  # the current test's calls

    def begin(self, forecast: Forecast | None) -> None:
        """A test starts with its forecast (None: none kept). The caller has dropped the
        previous test's calls still ahead (`drop`)."""
        self.forecast, self.next, self.script = forecast or None, 0, []

    def send(self, post: Post, room: Callable[[int, bool], bool]) -> None:
        """Send the forecast's next calls through `post`, all in one write ((seq, call id)
        of each, or None when the worker cannot take them): once fewer than TOP_UP_BELOW are
        ahead, up to AHEAD_CALLS not yet asked for, while `room(the batch's bytes, whether
        it is one call)`."""
        forecast = self.forecast
        if forecast is None or len(self.pending) >= TOP_UP_BELOW:
            return
        batch: list[ForecastCall] = []
        nbytes = 0
        index = self.next + len(self.pending)
        while index < len(forecast) and len(self.pending) + len(batch) < AHEAD_CALLS:
            call = forecast[index]
            if not room(nbytes + len(call.key), not batch):
                break
            batch.append(call)
            nbytes += len(call.key)
            index += 1
        if not batch:
            return
        sent = post(batch)
        if sent is None:  # a dead worker: the next request meets it and says so
            self.forecast = None
            return
        self.pending.extend(sent)
        self.sent += len(sent)

    def take(self, call: ForecastCall) -> tuple[int, int] | None:
        """(seq, call id) of the call sent ahead that equals `call`, or None: the caller
        then drops the forecast (`drop`) and sends the call itself. Either way it is
        recorded in the test's script."""
        forecast = self.forecast
        if forecast is not None and self.pending and forecast[self.next].key == call.key:
            self.script.append(forecast[self.next])  # the same bytes, kept once
            self.next += 1
            self.answered += 1
            return self.pending.popleft()
        self.script.append(call)
        return None

    def drop(self) -> list[tuple[int, int]]:
        """No more calls ahead in this test; the calls sent and not taken, whose replies
        are still due."""
        pending = list(self.pending)
        self.forecast = None
        self.pending.clear()
        return pending


class Forecasts:
    """The forecasts one judge keeps for one exercise: per test, the calls of the last
    grading in which it passed. The key names the test and the mode it ran in."""

    def __init__(self) -> None:
        self._kept: dict[tuple, Forecast] = {}

    def get(self, test: tuple) -> Forecast | None:
        return self._kept.get(test)

    def keep(self, test: tuple, calls: Forecast) -> None:
        """After a test passed (its calls made without a restart), its calls become its
        forecast for the next grading that runs it in the same mode."""
        if not calls:
            return
        if test not in self._kept and len(self._kept) >= FORECASTS_KEPT:
            del self._kept[next(iter(self._kept))]
        self._kept[test] = calls

    def __len__(self) -> int:
        return len(self._kept)
