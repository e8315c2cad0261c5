"""The judge's side of the sandbox: a proxy whose methods run the student's functions remotely.

    with open_student(source, functions=("f", "g")) as student:
        loss = student.g(x, y)        # runs in the worker
        loss.backward()               # the gradient of a sum came with the reply; any other
                                      # output gradient is asked of the worker

Each call sends its arguments over the data-only wire, waits at most
Limits.call_wall_seconds, and rebuilds the result here (see remote_autograd.py). A call that
times out or finds the worker dead raises StudentTimeout / StudentCrash, and the next call
starts a fresh worker and loads the source again: one crash fails one test, not the report.

A function that timed out gets Limits.retry_wall_seconds for its later calls; once it has
timed out twice, its remaining calls in this grading fail at once ("not run"), so code that
never returns is judged in seconds, not after every test has waited out its own limit.

Given a `Forecast` (the calls of an earlier grading of the same tests, see forecast.py), the
proxy sends the forecast's next calls ahead and answers a call that equals the forecast's
next one from the reply already on the way; replies are read strictly in request order.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import time
from collections.abc import Iterator, Sequence

import torch

from grader.sandbox import launch, remote_autograd
from grader.sandbox.errors import (
    LoadError,
    SandboxError,
    StudentCrash,
    StudentError,
    StudentLoadError,
    StudentTimeout,
)
from grader.sandbox.forecast import AHEAD_BYTES, AHEAD_CALLS, Forecast, ForecastCall, Script
from grader.sandbox.worker.contract import WAITS, Limits, Op
from grader.sandbox.worker.wire import (
    Channel,
    Encoded,
    Frame,
    WireClosed,
    WireError,
    WireTimeout,
    encode,
    with_fields,
)

MAX_RESTARTS = 20  # a submission that crashes on every call stops being restarted
TIMEOUTS_BEFORE_NOT_RUN = 2  # a function that timed out this often is not called again


class StudentProxy:
    """The student's module, as seen from the judge: one attribute per declared function."""

    def __init__(
        self,
        source: str,
        *,
        functions: Sequence[str],
        filename: str = "submission.py",
        limits: Limits | None = None,
        pool=None,
        forecast: Forecast | None = None,
    ) -> None:
        self.source, self.filename, self.functions = source, filename, tuple(functions)
        self.limits = limits or (pool.limits if pool is not None else Limits.from_env())
        self.load_error: LoadError | None = None
        self.restarts = 0
        self.requests = 0  # requests sent to a worker, load and calls sent ahead included
        self.calls_sent_ahead = self.calls_answered_ahead = 0
        self.script = Script()  # this grading's calls: a forecast for the next one
        self.worker_cpu_s = 0.0  # CPU time of this proxy's workers, as their replies said
        self.isolation = ""
        self._pool, self._worker, self._channel = pool, None, None
        self._generation, self._next_id, self._seq = 0, 0, 0
        self._cpu_s = 0.0  # the current worker's CPU time in its last reply
        self._released: list[int] = []
        self._timeouts: dict[str, int] = {}  # function name -> timeouts in this grading
        self._output: list[str] = []
        self._output_chars, self._truncated = 0, False
        self._forecast = forecast  # None once dropped: no more calls are sent ahead
        self._next = 0  # the forecast call that the next call should equal
        self._ahead: collections.deque[tuple[int, int]] = collections.deque()  # (seq, call id)
        self._unread: collections.deque[tuple[int, int]] = collections.deque()  # (seq, bytes)
        self._unread_bytes = 0
        self._stash: dict[int, tuple[dict, Frame]] = {}  # replies read before they were wanted
        for name in self.functions:
            if name.startswith("_") or hasattr(type(self), name) or name in vars(self):
                raise ValueError(f"cannot proxy a function named {name!r}")
            setattr(self, name, _RemoteFunction(self, name))

    @property
    def worker(self):
        """The WorkerHandle serving now (None between workers): for diagnostics and the
        sandbox's own tests, which check what a worker left behind."""
        return self._worker

    # -- worker lifecycle ------------------------------------------------------------------

    def start(self) -> StudentProxy:
        """Start (or take from the pool) a worker and load the source into it."""
        worker = (
            self._pool.acquire() if self._pool is not None else launch.start_worker(self.limits)
        )
        self._worker, self._generation = worker, self._generation + 1
        self.limits, self.isolation = worker.limits, worker.isolation
        self._channel = Channel(worker.sock, worker.limits.wire())
        self._wait_ready()
        self.load_error = self._load()
        if self.load_error is None:
            self._send_ahead()
        return self

    def _wait_ready(self) -> None:
        try:
            frame = self._channel.recv(time.monotonic() + WAITS.worker_ready_s)
        except WireError as exc:
            description = self._lose_worker("did not become ready")
            text, _ = self.output()
            raise SandboxError(f"the worker did not start ({exc}; {description})\n{text}") from None
        if not (isinstance(frame.value, dict) and frame.value.get("op") == Op.READY):
            self._lose_worker("sent no ready message")
            raise SandboxError("the worker's first message was not 'ready'")

    def _load(self) -> LoadError | None:
        msg = {"op": Op.LOAD, "source": self.source, "filename": self.filename}
        msg["functions"] = list(self.functions)
        cap = self._channel.limits.max_str_chars
        if len(self.source) > cap:
            size = f"{len(self.source)} characters; the limit is {cap}"
            return LoadError("import_error", f"The submission is too large ({size}).")
        try:
            reply, _ = self._request(msg, "loading the submission", self.limits.call_wall_seconds)
        except StudentError as exc:  # a timeout or crash while the module body ran
            kind = exc.kind if exc.kind != "exception" else "import_error"
            return LoadError(kind, str(exc), exc.line, exc.student_traceback)
        error = reply.get("load_error")
        if error is None:
            return None
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            self._lose_worker("broke the wire protocol")
            return LoadError("crash", "The worker sent a malformed reply while loading.")
        line = error.get("line") if type(error.get("line")) is int else None
        return LoadError(str(error.get("kind")), error["message"], line, str(error.get("detail")))

    def _ensure_worker(self) -> None:
        if self._worker is not None:
            return
        if self.restarts >= MAX_RESTARTS:
            raise StudentCrash(f"the worker crashed {self.restarts} times; not restarting")
        self.restarts += 1
        error = self.start().load_error
        if error is not None:  # loaded before, fails now: this call fails with it
            self.load_error = None
            self._lose_worker("the submission failed to load again")
            raise StudentLoadError(error, filename=self.filename)

    def _lose_worker(self, reason: str | None, wait_s: float = WAITS.exit_after_eof_s) -> str:
        """Kill (reason given) or reap (it is exiting: wait up to `wait_s`) the worker;
        describe its end."""
        worker, self._worker, self._channel = self._worker, None, None
        self._forget_ahead()
        if worker is None:
            return "no worker"
        if reason is None:
            deadline = time.monotonic() + wait_s
            while worker.alive() and time.monotonic() < deadline:
                time.sleep(0.002)
        worker.kill(reason=reason or "did not exit in time")
        self._collect_output(worker)
        self._count_cpu()
        return worker.exit_description()

    def _count_cpu(self) -> None:
        self.worker_cpu_s += self._cpu_s
        self._cpu_s = 0.0

    def close(self) -> None:
        """The grading is over: keep what the worker printed, and end it in the background
        (idempotent). The captured output stays readable."""
        worker, self._worker, self._channel = self._worker, None, None
        self._forget_ahead()
        if worker is None:
            return
        self._collect_output(worker, settle_s=WAITS.output_settle_s)
        self._count_cpu()
        worker.end_soon("grading finished")

    # -- requests --------------------------------------------------------------------------

    def _request(
        self, msg: dict, what: str, seconds: float, body: Encoded | None = None
    ) -> tuple[dict, Frame]:
        """One request and its reply within `seconds`; student failures become StudentError."""
        frame_out = self._encode(msg, body)
        deadline = time.monotonic() + seconds
        self._send(msg["seq"], frame_out, what, seconds, deadline)
        return self._receive(msg["seq"], what, seconds, deadline)

    def _send(self, seq: int, frame: Encoded, what: str, seconds: float, deadline: float) -> None:
        """Send a request once the unread replies leave it room (see forecast.AHEAD_BYTES)."""
        while self._unread and self._unread_bytes + frame.nbytes > AHEAD_BYTES:
            self._read_reply(what, seconds, deadline)
        self.requests += 1
        try:
            self._channel.send_frame(frame, deadline)
        except WireError as exc:
            raise self._wire_failure(exc, what, seconds) from None
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

    def _read_reply(self, what: str, seconds: float, deadline: float) -> None:
        """Read the reply to the oldest request not yet answered, into the stash."""
        try:
            frame = self._channel.recv(deadline)
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
        if not isinstance(error, dict) or not isinstance(error.get("type_name"), str):
            return self._protocol_error("the worker sent a malformed error reply")
        line = error.get("line") if type(error.get("line")) is int else None
        return StudentError(
            error["type_name"],
            str(error.get("message", "")),
            student_traceback=str(error.get("traceback", "")),
            line=line,
            filename=self.filename,
        )

    # -- calls -----------------------------------------------------------------------------

    def _timed(
        self, name: str, what: str, msg: dict | None, seq: int = 0, body: Encoded | None = None
    ) -> tuple[dict, Frame]:
        """A request for function `name` (or, msg None, the reply to request `seq`, sent
        ahead), within the wall clock the function has left (see above)."""
        timeouts = self._timeouts.get(name, 0)
        if timeouts >= TIMEOUTS_BEFORE_NOT_RUN:
            raise StudentTimeout(f"not run: {name} timed out earlier in this grading")
        seconds = self.limits.call_wall_seconds
        if timeouts:
            seconds = min(seconds, self.limits.retry_wall_seconds)
        try:
            if msg is None:
                return self._receive(seq, what, seconds, time.monotonic() + seconds)
            return self._request(msg, what, seconds, body)
        except StudentTimeout:
            self._timeouts[name] = timeouts + 1
            raise

    def _call(self, name: str, args: tuple, kwargs: dict) -> object:
        if self.load_error is not None:
            raise StudentLoadError(self.load_error, filename=self.filename)
        body = {"op": Op.CALL, "name": name, "args": list(args), "kwargs": kwargs}
        body["grad"] = torch.is_grad_enabled()
        encoded = encode(body, self.limits.wire())  # a WireError is the calling test's bug
        call = ForecastCall.of(encoded)
        ahead = self._take_ahead(call.key)
        if ahead is not None:
            self.script.record(self._forecast.calls[self._next - 1])
            seq, call_id = ahead
            reply, _ = self._timed(name, name, None, seq)
            self._send_ahead()
        else:
            self.script.record(call)
            if self._timeouts.get(name, 0) < TIMEOUTS_BEFORE_NOT_RUN:
                self._ensure_worker()
            self._next_id += 1
            call_id = self._next_id
            reply, _ = self._timed(name, name, {"id": call_id}, body=encoded)
        return self._finish_call(name, call_id, reply, encoded.originals)

    # -- calls sent ahead (forecast.py) ----------------------------------------------------

    def _send_ahead(self) -> None:
        """Send the forecast's next calls, up to AHEAD_CALLS not yet asked for and about
        AHEAD_BYTES of requests not yet answered."""
        forecast = self._forecast
        while forecast is not None and self._worker is not None:
            index = self._next + len(self._ahead)
            if index >= len(forecast.calls) or len(self._ahead) >= AHEAD_CALLS:
                return
            call = forecast.calls[index]
            if self._unread and self._unread_bytes + len(call.key) > AHEAD_BYTES:
                return
            self._next_id += 1
            msg = {"id": self._next_id}
            frame = self._encode(msg, call.body())
            try:  # it fits the socket's buffers: sending never waits for the worker
                self._channel.send_frame(frame, time.monotonic() + WAITS.send_ahead_s)
            except WireError:  # a dead worker: the next request meets it and says so
                self._forecast = None
                return
            self.requests += 1
            self._unread.append((msg["seq"], frame.nbytes))
            self._unread_bytes += frame.nbytes
            self._ahead.append((msg["seq"], msg["id"]))
            self.calls_sent_ahead += 1

    def _take_ahead(self, key: bytes) -> tuple[int, int] | None:
        """(seq, call id) of the call sent ahead that equals this one; else None, and the
        forecast is dropped."""
        if self._forecast is None:
            return None
        if self._ahead and self._forecast.calls[self._next].key == key:
            self._next += 1
            self.calls_answered_ahead += 1
            return self._ahead.popleft()
        self._drop_forecast()
        return None

    def _drop_forecast(self) -> None:
        """No more calls ahead: read the replies still coming, then release their graphs.
        A worker slower than WAITS.forecast_drop_s is stopped; the next call starts another."""
        self._forecast = None
        pending, generation = list(self._ahead), self._generation
        self._ahead.clear()
        deadline = time.monotonic() + WAITS.forecast_drop_s
        with contextlib.suppress(StudentError):  # the worker was stopped (_wire_failure)
            for seq, call_id in pending:
                while seq not in self._stash:
                    self._read_reply("calls sent ahead", WAITS.forecast_drop_s, deadline)
                self._stash.pop(seq)
                self._release(call_id, generation)

    def _forget_ahead(self) -> None:
        """The worker is gone, and with it every request not yet answered."""
        self._forecast = None
        self._ahead.clear()
        self._unread.clear()
        self._unread_bytes = 0
        self._stash.clear()

    def _finish_call(self, name: str, call_id: int, reply: dict, originals: list) -> object:
        """The call's result for the judge: mutations mirrored, gradients wired."""
        generation = self._generation
        grad_inputs = [t for t in originals if t.requires_grad]
        early = self._early_vjp(reply)
        vjp = functools.partial(self._backward, call_id, generation, grad_inputs, name, early)
        release = functools.partial(self._release, call_id, generation)
        try:
            remote_autograd.mirror_mutations(reply.get("mutated"), originals)
            return remote_autograd.attach(
                reply.get("result"), reply.get("grad_outputs"), grad_inputs, vjp, release
            )
        except remote_autograd.ProtocolError as exc:
            raise self._protocol_error(str(exc)) from None

    def _early_vjp(self, reply: dict) -> remote_autograd.EarlyVjp | None:
        """The gradient of the outputs' sum that came with the reply, or the error it met."""
        if "sum_error" in reply:
            return remote_autograd.EarlyVjp(None, self._student_error(reply["sum_error"]))
        if "sum_grads" in reply:
            return remote_autograd.EarlyVjp(reply["sum_grads"], None)
        return None

    def _backward(self, call_id, generation, inputs, name, early, grad_outputs) -> list:
        if early is not None and remote_autograd.all_ones(grad_outputs):
            if early.error is not None:
                raise early.error
            grads = early.grads
        else:
            if generation != self._generation or self._worker is None:
                raise StudentCrash(
                    f"the worker that ran {name} has stopped since, so its graph is gone"
                )
            msg = {"op": Op.BACKWARD, "id": call_id, "grad_outputs": grad_outputs}
            reply, _ = self._timed(name, f"the backward of {name}", msg)
            grads = reply.get("grads")
        try:
            return remote_autograd.check_grads(grads, inputs)
        except remote_autograd.ProtocolError as exc:
            raise self._protocol_error(str(exc)) from None

    def _release(self, call_id: int, generation: int) -> None:
        """Called by the GC: no I/O here; the id rides along with the next request."""
        if generation == self._generation:
            self._released.append(call_id)

    # -- output ----------------------------------------------------------------------------

    def _collect_output(self, worker, settle_s: float = 0.0) -> None:
        text, truncated = worker.take_output(settle_s)
        room = max(self.limits.output_bytes - self._output_chars, 0)
        self._truncated |= truncated or len(text) > room
        if text[:room]:
            self._output.append(text[:room])
            self._output_chars += len(text[:room])

    def output(self) -> tuple[str, bool]:
        """All output the student's code printed so far (every worker), and if it was cut.

        Complete once `close()` has run: while a worker lives, the launcher's drain threads
        may not yet have read what its last call printed.
        """
        if self._worker is not None:
            self._collect_output(self._worker)
        return "".join(self._output), self._truncated


class _RemoteFunction:
    """`student.f(...)`: a callable that runs the named function in the worker."""

    def __init__(self, proxy: StudentProxy, name: str) -> None:
        self._proxy, self.__name__ = proxy, name

    def __call__(self, *args, **kwargs):
        return self._proxy._call(self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<student function {self.__name__}>"


@contextlib.contextmanager
def open_student(
    source: str,
    *,
    functions: Sequence[str],
    filename: str = "submission.py",
    limits: Limits | None = None,
    pool=None,
    forecast: Forecast | None = None,
) -> Iterator[StudentProxy]:
    """A loaded StudentProxy; its worker is stopped on exit. See .load_error first."""
    proxy = StudentProxy(
        source, filename=filename, functions=functions, limits=limits, pool=pool, forecast=forecast
    )
    try:
        yield proxy.start()
    finally:
        proxy.close()
