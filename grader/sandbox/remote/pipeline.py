"""Requests to one sandboxed worker, pipelined: the base of the student proxy.

Every request is numbered (`seq`) and carries the ids of the autograd graphs the judge has
let go; several may be sent before their replies are read (the calls sent ahead, forecast.py,
several in one write), within AHEAD_BYTES of unread requests, and replies are read strictly
in request order, each kept until its request asks for it. The replies to calls sent ahead
and then not used are read with their tensors' bytes skipped, and their graphs released.
A round trip is a request whose reply the judge then waits for (`round_trips`); a call
answered from a reply already on its way is none. A failed send or receive means something for the
student (a crash, a timeout, a worker that broke the protocol): `_wire_failure` says what,
after the proxy has stopped the worker (`_lose_worker`, which the proxy defines).
"""

from __future__ import annotations

import collections
import contextlib
import time

from grader.sandbox.errors import StudentCrash, StudentError, StudentTimeout
from grader.sandbox.remote.forecast import AHEAD_BYTES, CallsAhead, ForecastCall
from grader.sandbox.worker.codec import Encoded, Frame, encode, with_fields
from grader.sandbox.worker.contract import WAITS, WireClosed, WireError, WireTimeout
from grader.sandbox.worker.wire import Channel


class Pipeline:
    """The request side of a StudentProxy: numbering, sending, reading replies in order."""

    filename: str
    ahead: CallsAhead

    def __init__(self) -> None:
        self.requests = 0  # requests sent to a worker, load and calls sent ahead included
        self.round_trips = 0  # requests sent and then waited for: load, calls, backwards
        self._channel: Channel | None = None
        self._worker = None  # the WorkerHandle serving now
        self._generation, self._next_id, self._seq = 0, 0, 0
        self._cpu_s = 0.0  # the current worker's CPU time in its last reply
        self._released: list[int] = []
        self._unread: collections.deque[tuple[int, int]] = collections.deque()  # (seq, bytes)
        self._unread_bytes = 0
        self._stash: dict[int, tuple[dict, Frame]] = {}  # replies read before they were wanted
        # (seq, call id; None for a backward) sent ahead, not to be used
        self._abandoned: list[tuple[int, int | None]] = []

    def _lose_worker(self, reason: str | None) -> str:
        raise NotImplementedError  # the proxy's

    def _release(self, call_id: int, generation: int) -> None:
        """Called by the GC: no I/O here; the id rides along with the next request."""
        if generation == self._generation:
            self._released.append(call_id)

    def _request(
        self, msg: dict, what: str, seconds: float, body: Encoded | None = None
    ) -> tuple[dict, Frame]:
        """One request and its reply within `seconds`; student failures become StudentError."""
        frame_out = self._encode(msg, body)
        deadline = time.monotonic() + seconds
        self.round_trips += 1
        self._send(msg["seq"], frame_out, what, seconds, deadline)
        return self._receive(msg["seq"], what, seconds, deadline)

    def _send(self, seq: int, frame: Encoded, what: str, seconds: float, deadline: float) -> None:
        """Send a request once the unread replies leave it room (see forecast.AHEAD_BYTES)."""
        while self._unread and self._unread_bytes + frame.nbytes > AHEAD_BYTES:
            self._read_reply(what, seconds, deadline)
        try:
            self._post(seq, frame, deadline)
        except WireError as exc:
            raise self._wire_failure(exc, what, seconds) from None

    def _post(self, seq: int, frame: Encoded, deadline: float) -> None:
        """Send request `seq`; its reply is then due, in order."""
        self.requests += 1
        self._channel.send_frame(frame, deadline)
        self._unread.append((seq, frame.nbytes))
        self._unread_bytes += frame.nbytes

    def _receive(self, seq: int, what: str, seconds: float, deadline: float) -> tuple[dict, Frame]:
        """The reply to request `seq`; replies to earlier requests are read and kept."""
        while seq not in self._stash:
            self._read_reply(what, seconds, deadline)
        reply, frame = self._stash.pop(seq)
        if not reply["ok"]:
            raise self._student_error(reply.get("error"))
        return reply, frame

    def _read_reply(self, what: str, seconds: float, deadline: float, skip: bool = False) -> None:
        """Read the reply to the oldest request not yet answered, into the stash (`skip`:
        a reply nobody uses, its tensors' bytes dropped unread)."""
        try:
            frame = self._channel.recv(deadline, skip_payloads=skip)
        except WireError as exc:
            raise self._wire_failure(exc, what, seconds) from None
        reply = frame.value
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise self._protocol_error("the worker sent a malformed reply")
        if isinstance(reply.get("cpu_s"), float):
            self._cpu_s = reply["cpu_s"]
        if not self._unread or reply.get("seq") != self._unread[0][0]:
            raise self._protocol_error("the worker's reply answers another request")
        seq, nbytes = self._unread.popleft()
        self._unread_bytes -= nbytes
        self._stash[seq] = (reply, frame)

    def _encode(self, msg: dict, body: Encoded | None = None) -> Encoded:
        """Number the request and let it carry the graphs to release; `body`, the rest of
        the request (a call's), is encoded already."""
        msg["release"], self._released = self._released, []
        self._seq += 1
        msg["seq"] = self._seq
        try:
            if body is not None:
                return with_fields(body, msg, self._channel.limits)
            return encode(msg, self._channel.limits)
        except WireError:  # a value the wire refuses: the calling test's bug, not the student's
            self._released.extend(msg["release"])
            raise

    def _wire_failure(self, exc: WireError, what: str, seconds: float) -> StudentError:
        """What a failed send or receive means for the student; the worker is stopped."""
        if isinstance(exc, WireClosed):
            description = self._lose_worker(None)
            return StudentCrash(
                f"the worker died during {what}: {description}",
                description=description,
                filename=self.filename,
            )
        if isinstance(exc, WireTimeout):
            self._lose_worker(f"wall-clock limit of {seconds:g} s per call")
            return StudentTimeout(f"{what} did not finish within {seconds:g} s")
        return self._protocol_error(f"the worker sent a malformed message: {exc}")

    def _protocol_error(self, message: str) -> StudentCrash:
        """The worker broke the protocol (student code wrote to its channel?): stop it."""
        self._lose_worker("broke the wire protocol")
        return StudentCrash(message, filename=self.filename)

    def _student_error(self, error: object) -> StudentError:
        found = StudentError.from_reply(error, self.filename)
        return found or self._protocol_error("the worker sent a malformed error reply")

    # -- calls sent ahead (forecast.py) ----------------------------------------------------

    def _send_ahead(self) -> None:
        self.ahead.send(self._post_ahead, self._room_ahead, self._new_id, self._runs)

    def _runs(self, name: str) -> bool:
        """Whether a call of function `name` would reach the worker (True unless a subclass
        answers some calls itself)."""
        return True

    def _new_id(self) -> int:
        """A call id not used before with this proxy: its graph is kept under it."""
        self._next_id += 1
        return self._next_id

    def _room_ahead(self, nbytes: int, alone: bool) -> bool:
        """A worker to send to, and room below AHEAD_BYTES of requests not yet answered for
        a batch of `nbytes` (one call, `alone`, may pass it when nothing else is unread: the
        worker reads it whole before it answers). A batch over the bound could fill the
        socket's buffers while the worker waits to send a reply: both would wait."""
        fits = self._unread_bytes + nbytes <= AHEAD_BYTES or (alone and not self._unread)
        return self._worker is not None and fits

    def _post_ahead(self, requests: list[tuple[ForecastCall, int]]) -> list[int] | None:
        """Send `requests` in one write, each under its call id (a backward's: the call it
        differentiates); the seq of each, or None for a dead worker."""
        sent, frames = [], []
        for request, call_id in requests:
            msg = {"id": call_id}
            frames.append(self._encode(msg, request.body()))
            sent.append(msg["seq"])
        try:  # it fits the socket's buffers: sending never waits for the worker
            self._channel.send_frames(frames, time.monotonic() + WAITS.send_ahead_s)
        except WireError:  # part of a frame may have left: this channel is out of step
            self._lose_worker("did not take the calls sent ahead")
            return None
        for seq, frame in zip(sent, frames, strict=True):
            self.requests += 1
            self._unread.append((seq, frame.nbytes))
            self._unread_bytes += frame.nbytes
        return sent

    def _drop_ahead(self) -> None:
        """No more calls ahead in this test: the calls sent and not used are abandoned; their
        replies are read (`_settle`) before any other reply is waited for."""
        self._abandoned.extend(self.ahead.drop())

    def _settle(self) -> None:
        """Read the replies to abandoned calls (their tensors skipped), then release their
        graphs. A worker slower than WAITS.forecast_drop_s is stopped; the next call starts
        another."""
        if not self._abandoned:
            return
        abandoned, self._abandoned = self._abandoned, []
        generation = self._generation
        seqs = {seq for seq, _ in abandoned}
        deadline = time.monotonic() + WAITS.forecast_drop_s
        with contextlib.suppress(StudentError):  # the worker was stopped (_wire_failure)
            for seq, call_id in abandoned:
                while seq not in self._stash:
                    skip = bool(self._unread) and self._unread[0][0] in seqs
                    self._read_reply("calls sent ahead", WAITS.forecast_drop_s, deadline, skip)
                self._stash.pop(seq)
                if call_id is not None:  # a backward's: the call's graph is not its to free
                    self._release(call_id, generation)

    def _forget_ahead(self) -> None:
        """The worker is gone, and with it every request not yet answered."""
        self.ahead.drop()
        self._abandoned.clear()
        self._unread.clear()
        self._unread_bytes = 0
        self._stash.clear()
