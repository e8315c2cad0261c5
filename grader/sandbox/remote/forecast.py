"""Calls sent ahead: a test's calls in an earlier grading forecast its calls now.

A judge runs the same tests, on the same inputs, again and again: only the submission
changes. So the calls one test made (function name, argument bytes, grad mode) the last time
it passed forecast its calls the next time it runs, and so do the backwards it asked of the
worker (those with other output gradients than ones, such as `(y * w).sum()`: their bytes,
and which of the test's calls each one differentiates). When a test starts, the proxy sends
its forecast's first requests to the worker at once, in one write (a backward right behind
the call it differentiates, under that call's id, so the worker answers it from the graph
it has just kept); when the test then makes a call, the proxy compares it byte for byte
with the forecast's next one:

    equal      the worker has run it already, or is running it: its reply is on the way;
               the calls used up are topped up, again in one write
    different  the rest of this test's forecast is dropped: the replies still coming are
               read and thrown away (their graphs released), and the test's later calls are
               one round trip each, as without a forecast

A test that fails drops the rest of its own forecast the same way; the next test starts
again from its forecast. So wrong code costs round trips only where it makes other calls,
not for the rest of the grading after its first failed check.

Once a test's whole forecast is sent, the forecast of the test that runs next in the same
grading (`then`, named by the judge) follows it in the same batches, so the worker runs the
next test's first calls while this test's last checks, its teardown and the next test's
setup run in the judge. When the next test begins, those calls are its own, already on
their way. A call the forecast did not predict drops them too (the next test then sends its
forecast again from its first call), so the worker never runs a call of the next test before
a call of this one; calls sent for a next test that does not come (another one began) are
dropped like any other. Only a test whose last passing run waited for no reply of its own
(a backward with other weights than ones, a call not predicted) leads the next one's calls
(`Forecasts.leads`): such a request would wait behind them, and where the next test's inputs
make the code hang, it would time out in this test, charged to the wrong one.

Only what a test really called ever reaches it: a reply is used for an equal call only, and
the worker ran it on equal bytes; a backward's reply, for a backward of equal output
gradients through the call at the same place in the same test. The worker itself is
unchanged: it answers requests in order, as ever. What the student's code can notice is
that, after a difference or a failed check, or a test that ran out of time, its functions
were called a few more times (at most AHEAD_CALLS) than the tests asked.

The whole of it lives here: a call as a forecast sees it (`ForecastCall`: encoded once, its
bytes are the key it is compared by, and sending it again adds only the request's envelope,
`codec.with_fields`), one grading's calls sent ahead and the current test's own calls
(`CallsAhead`, held by the proxy), and the forecasts a judge keeps (`Forecasts`), one per
test and mode. A test's calls are kept after any grading in which that test passed, wrong
submissions' passing tests included (a reply is only ever used for a byte-equal call, so a
forecast can cost time, never a verdict). A forecast is only ever sent when its own test
runs, or runs next, in the same mode and the same grading, so a Run never receives a hidden
test's inputs.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from grader.sandbox.worker.codec import Encoded

AHEAD_CALLS = 8  # calls sent before the test asks: enough to keep the worker busy
TOP_UP_BELOW = AHEAD_CALLS // 2  # refill (in one write) once fewer calls than this are ahead
AHEAD_BYTES = 64 << 10  # requests whose replies are unread: far below a socket's buffers,
# so sending never waits for a worker that is itself waiting to send a reply
FORECASTS_KEPT = 4096  # tests (mode, node id) whose last passing calls a judge remembers


@dataclass(frozen=True)
class ForecastCall:
    """One request as the proxy encoded it (a call: name, arguments, grad mode; a backward:
    the output gradients; no sequence number or call id): what two requests must share to be
    the same, and the request to send again. `target`: for a backward, the position in its
    test's requests of the call it differentiates; None for a call."""

    key: bytes  # the encoded body: its JSON header, then its tensors' bytes (a copy)
    header_nbytes: int
    target: int | None = None
    name: str | None = None  # a call's function (not part of what two requests must share)

    @classmethod
    def of(cls, encoded: Encoded, target: int | None = None, name: str | None = None):
        return cls(b"".join(encoded.parts[1:]), len(encoded.parts[1]), target, name)

    def body(self) -> Encoded:
        """The encoded body again, for `codec.with_fields` to number and send."""
        view, size = memoryview(self.key), self.header_nbytes
        return Encoded([struct.pack(">I", size), view[:size], view[size:]], [], [])


Forecast = tuple[ForecastCall, ...]  # the requests of one test in an earlier grading, in order
# sends [(request, its call id: a call's own, a backward's the one of the call it
# differentiates)] in one write: the seq of each, or None when the worker cannot take them
Post = Callable[[list[tuple[ForecastCall, int]]], list[int] | None]


class CallsAhead:
    """One grading's side of the forecasts: the current test's forecast, its calls sent
    ahead whose replies are not yet taken, the next test's forecast and its calls sent
    ahead, the counts, and the current test's own calls."""

    def __init__(self, forecast: Forecast | None = None, then: Forecast | None = None) -> None:
        self.forecast = forecast or None  # the current test's; None once dropped
        self.next = 0  # the forecast call that the next call should equal
        self.pending: collections.deque[tuple[int, int | None]] = collections.deque()
        self.ids: dict[int, int] = {}  # a forecast call's position -> the id it was sent with
        self.then = then or None  # the next test's forecast; None once dropped
        self.then_pending: collections.deque[tuple[int, int | None]] = collections.deque()
        self.then_ids: dict[int, int] = {}
        self.sent = self.answered = 0  # calls (not backwards), over the whole grading
        self.script: list[ForecastCall] = []  # the current test's requests
        self.tests = 0  # tests begun: a call's position in `script` holds in its own only

    def begin(self, forecast: Forecast | None, then: Forecast | None) -> list[tuple[int, int]]:
        """A test starts with its forecast (None: none kept); `then` is the next test's.
        The calls of `forecast` sent ahead as the previous test's `then` stay ahead; any
        other call still ahead is abandoned: (seq, call id) of each, whose replies are
        still due. The caller has taken the previous test's own calls (`end`)."""
        stale: list[tuple[int, int | None]] = [*self.pending]
        if forecast is not None and forecast is self.then:
            self.pending, self.then_pending = self.then_pending, collections.deque()
            self.ids, self.then_ids = self.then_ids, {}
        else:
            stale += self.then_pending
            self.pending, self.then_pending = collections.deque(), collections.deque()
            self.ids, self.then_ids = {}, {}
        self.forecast, self.next, self.script = forecast or None, 0, []
        self.then = then or None
        self.tests += 1
        return stale

    def send(
        self,
        post: Post,
        room: Callable[[int, bool], bool],
        new_id: Callable[[], int],
        runs: Callable[[str], bool],
    ) -> None:
        """Send the next requests not yet sent through `post`, all in one write, each call
        under a fresh id from `new_id`: once fewer than TOP_UP_BELOW are ahead, up to
        AHEAD_CALLS ahead, while `room(the batch's bytes, whether it is one request)`, and
        up to the first call of a function that would not reach the worker (`runs(name)`
        False: a stub, stubs.py, whose calls the proxy answers itself: sent ahead, the
        starter's would all raise in the worker for nothing; or a function no longer run
        after its timeouts or crashes: sent ahead, it would hold or kill the worker with
        every call behind it, and they would fail in its place). The current test's forecast
        goes first; once all of it is sent, the next test's follows, so the worker has work
        while this test's last checks run."""
        ahead = len(self.pending) + len(self.then_pending)
        if self.forecast is None or ahead >= TOP_UP_BELOW:
            return
        batch: list[tuple[ForecastCall, int]] = []
        owners: list[collections.deque] = []
        nbytes = 0
        for position, call, owner, ids in self._unsent():
            if ahead + len(batch) >= AHEAD_CALLS or not room(nbytes + len(call.key), not batch):
                break
            if call.name is not None and not runs(call.name):
                break
            if call.target is None:
                call_id = ids[position] = new_id()
            elif call.target in ids:
                call_id = ids[call.target]
            else:
                break  # not behind a call of its test sent ahead: the test asks for it itself
            batch.append((call, call_id))
            owners.append(owner)
            nbytes += len(call.key)
        if not batch:
            return
        seqs = post(batch)
        if seqs is None:  # a dead worker: the next request meets it and says so
            self.forecast = self.then = None
            return
        for owner, seq, (call, call_id) in zip(owners, seqs, batch, strict=True):
            owner.append((seq, call_id if call.target is None else None))
        self.sent += sum(call.target is None for call, _ in batch)

    @property
    def active(self) -> bool:
        """A forecast holds, or the next test's calls are ahead: a call that is not taken
        drops them (`drop`)."""
        return self.forecast is not None or bool(self.then_pending)

    def _unsent(self) -> Iterator[tuple[int, ForecastCall, collections.deque, dict[int, int]]]:
        """The requests not yet sent: each one's position in its forecast, the request, the
        queue its (seq, call id) joins once sent, and the ids its forecast's calls went with."""
        forecast = self.forecast or ()
        for position in range(self.next + len(self.pending), len(forecast)):
            yield position, forecast[position], self.pending, self.ids
        if self.then is not None:
            for position in range(len(self.then_pending), len(self.then)):
                yield position, self.then[position], self.then_pending, self.then_ids

    def take(self, call: ForecastCall) -> tuple[int, int | None] | None:
        """(seq, call id) of the request sent ahead that equals `call` (a backward: the same
        output gradients through the call at the same position), or None: the caller then
        drops the forecast (`drop`) and sends the request itself. Either way it is recorded
        in the test's script."""
        forecast = self.forecast
        if (
            forecast is not None
            and self.pending
            and forecast[self.next].key == call.key
            and forecast[self.next].target == call.target
        ):
            self.script.append(forecast[self.next])  # the same bytes, kept once
            self.next += 1
            self.answered += call.target is None
            return self.pending.popleft()
        self.script.append(call)
        return None

    def end(self) -> list[tuple[int, int | None]]:
        """The test ended: its own calls sent and not taken, whose replies are still due.
        The next test's calls stay ahead."""
        pending = list(self.pending)
        self.forecast = None
        self.pending.clear()
        self.ids = {}
        return pending

    def drop(self) -> list[tuple[int, int | None]]:
        """No more calls ahead in this test (a call the forecast did not predict), nor for
        the next one, which sends its forecast again when it begins: every call sent and
        not taken, whose replies are still due."""
        pending = [*self.end(), *self.then_pending]
        self.then = None
        self.then_pending.clear()
        self.then_ids = {}
        return pending


class Forecasts:
    """The forecasts one judge keeps for one exercise: per test, the calls of the last
    grading in which it passed. The key names the test and the mode it ran in."""

    def __init__(self) -> None:
        self._kept: dict[tuple, tuple[Forecast, bool]] = {}  # test -> (its calls, leads)

    def get(self, test: tuple) -> Forecast | None:
        kept = self._kept.get(test)
        return None if kept is None else kept[0]

    def leads(self, test: tuple) -> bool:
        """Whether the next test's calls may follow this test's: its last passing run
        waited for no reply to a request of its own (a backward with other weights than
        ones, a call the forecast did not predict), which would wait behind them, and time
        out, wrongly charged to this test, where the next test's inputs make the code hang."""
        kept = self._kept.get(test)
        return kept is not None and kept[1]

    def keep(self, test: tuple, calls: Forecast, round_trips: int = 0) -> None:
        """After a test passed (its calls made without a restart), its calls become its
        forecast for the next grading that runs it in the same mode; `round_trips`: the
        requests of its own it waited for (see `leads`)."""
        if not calls:
            return
        if test not in self._kept and len(self._kept) >= FORECASTS_KEPT:
            del self._kept[next(iter(self._kept))]
        self._kept[test] = (calls, round_trips == 0)

    def __len__(self) -> int:
        return len(self._kept)
