"""The judge's side of the sandbox: a proxy whose methods run the student's functions remotely.

    with open_student(source) as student:
        loss = student.gspo_loss(logp, old_logp, adv, mask)   # runs in the worker
        loss.backward()                                        # VJP asked of the worker

Each call sends its arguments over the data-only wire, waits at most
Limits.call_wall_seconds, and rebuilds the result here (see remote_autograd.py). A call that
times out or finds the worker dead raises StudentTimeout / StudentCrash, and the next call
starts a fresh worker and loads the source again: one crash fails one test, not the report.

Each round trip wakes both processes (~1 ms a call on a busy 2-core machine), so two ways
to send several requests at once exist: `backward_ahead` lets a call take its backward
along when the test knows the output gradient in advance, and `call_many` sends calls that
do not need each other's results back to back. Both send exactly the requests the plain
calls would send, in the same order.
"""

from __future__ import annotations

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
from grader.sandbox.limits import Limits
from grader.sandbox.worker.codec import tensors_in
from grader.sandbox.worker.wire import (
    Channel,
    Encoded,
    Frame,
    WireClosed,
    WireError,
    WireLimits,
    WireTimeout,
    encode,
)

_WINDOW_BYTES = 64 << 10  # call_many: requests sent before the first reply is read
READY_TIMEOUT_S = 120.0  # importing torch on a loaded machine; beyond this, a grader error
MAX_RESTARTS = 20  # a submission that crashes on every call stops being restarted
_EXIT_WAIT_S = 2.0  # after EOF, how long the worker gets to finish exiting on its own


def wire_limits(limits: Limits) -> WireLimits:
    return WireLimits(
        max_message_bytes=limits.max_message_bytes, max_elements=limits.max_tensor_elements
    )


class StudentProxy:
    """The student's module, as seen from the judge: one attribute per declared function."""

    def __init__(
        self,
        source: str,
        *,
        filename: str = "submission.py",
        functions: Sequence[str] = ("sequence_ratio", "gspo_loss"),
        limits: Limits | None = None,
        pool=None,
    ) -> None:
        self.source, self.filename, self.functions = source, filename, tuple(functions)
        self.limits = limits or (pool.limits if pool is not None else Limits.from_env())
        self.load_error: LoadError | None = None
        self.restarts = 0
        self.isolation = ""
        self._pool, self._worker, self._channel = pool, None, None
        self._generation, self._next_id, self._seq = 0, 0, 0
        self._released: list[int] = []
        self._ahead: list | None = None  # output gradients of the next call's early backward
        self._output: list[str] = []
        self._output_chars, self._truncated = 0, False
        for name in self.functions:
            if name.startswith("_") or hasattr(type(self), name) or name in vars(self):
                raise ValueError(f"cannot proxy a function named {name!r}")
            setattr(self, name, _RemoteFunction(self, name))

    # -- worker lifecycle ------------------------------------------------------------------

    def start(self) -> StudentProxy:
        """Start (or take from the pool) a worker and load the source into it."""
        worker = (
            self._pool.acquire() if self._pool is not None else launch.start_worker(self.limits)
        )
        self._worker, self._generation = worker, self._generation + 1
        self.limits, self.isolation = worker.limits, worker.isolation
        self._channel = Channel(worker.sock, wire_limits(worker.limits))
        self._wait_ready()
        self.load_error = self._load()
        return self

    def _wait_ready(self) -> None:
        try:
            frame = self._channel.recv(time.monotonic() + READY_TIMEOUT_S)
        except WireError as exc:
            description = self._lose_worker("did not become ready")
            text, _ = self.output()
            raise SandboxError(f"the worker did not start ({exc}; {description})\n{text}") from None
        if not (isinstance(frame.value, dict) and frame.value.get("op") == "ready"):
            self._lose_worker("sent no ready message")
            raise SandboxError("the worker's first message was not 'ready'")

    def _load(self) -> LoadError | None:
        msg = {"op": "load", "source": self.source, "filename": self.filename}
        msg["functions"] = list(self.functions)
        cap = self._channel.limits.max_str_chars
        if len(self.source) > cap:
            size = f"{len(self.source)} characters; the limit is {cap}"
            return LoadError("import_error", f"The submission is too large ({size}).")
        try:
            reply, _, _ = self._request(msg, "loading the submission")
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

    def _lose_worker(self, reason: str | None) -> str:
        """Kill (reason given) or reap (it closed the channel) the worker; describe its end."""
        worker, self._worker, self._channel = self._worker, None, None
        if worker is None:
            return "no worker"
        if reason is None:
            deadline = time.monotonic() + _EXIT_WAIT_S
            while worker.alive() and time.monotonic() < deadline:
                time.sleep(0.005)
        worker.kill(reason=reason or "did not exit after closing its channel")
        self._collect_output(worker)
        return worker.exit_description()

    def close(self) -> None:
        """Stop the worker (idempotent). Its captured output stays readable."""
        if self._worker is not None:
            self._lose_worker("grading finished")

    # -- requests --------------------------------------------------------------------------

    def _request(self, msg: dict, what: str) -> tuple[dict, Frame, list[torch.Tensor]]:
        """One request and its reply; student failures become StudentError subclasses."""
        frame_out = self._encode(msg)
        deadline = time.monotonic() + self.limits.call_wall_seconds
        self._send(frame_out, what, deadline)
        reply, frame = self._receive(msg["seq"], what, deadline)
        return reply, frame, frame_out.originals

    def _encode(self, msg: dict) -> Encoded:
        """Number the request and let it carry the graphs to release."""
        msg["release"], self._released = self._released, []
        self._seq += 1
        msg["seq"] = self._seq
        try:
            return encode(msg, self._channel.limits)
        except WireError:  # a value the wire refuses: the calling test's bug, not the student's
            self._released.extend(msg["release"])
            raise

    def _send(self, frame_out: Encoded, what: str, deadline: float) -> None:
        try:
            self._channel.send_frame(frame_out, deadline)
        except WireError as exc:
            raise self._wire_failure(exc, what) from None

    def _receive(self, seq: int, what: str, deadline: float) -> tuple[dict, Frame]:
        """The reply to request `seq`; a dead or slow worker is stopped."""
        try:
            frame = self._channel.recv(deadline)
        except WireError as exc:
            raise self._wire_failure(exc, what) from None
        reply = frame.value
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise self._protocol_error("the worker sent a malformed reply")
        if reply.get("seq") != seq:
            raise self._protocol_error("the worker's reply answers another request")
        if not reply["ok"]:
            raise self._student_error(reply.get("error"))
        return reply, frame

    def _wire_failure(self, exc: WireError, what: str) -> StudentError:
        """What a failed send or receive means for the student; the worker is stopped."""
        seconds = self.limits.call_wall_seconds
        if isinstance(exc, WireTimeout):
            self._lose_worker(f"wall-clock limit of {seconds:g} s per call")
            return StudentTimeout(f"{what} did not finish within {seconds:g} s")
        if isinstance(exc, WireClosed):
            description = self._lose_worker(None)
            return StudentCrash(
                f"the worker died during {what}: {description}",
                description=description,
                filename=self.filename,
            )
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

    @contextlib.contextmanager
    def backward_ahead(self, grad_outputs: list[torch.Tensor | None]) -> Iterator[None]:
        """Send the next call's backward for `grad_outputs` right behind the call.

        A test that will backpropagate a result with gradients it knows beforehand (a
        loss: ones; sum(w * ratio): w) saves a round trip: both requests go out together,
        and when backward then asks for exactly these output gradients, the worker's
        answer is already here. For any other gradients it is dropped and backward asks
        the worker as usual. The same request gets the same answer (or error) either way.
        """
        self._ahead = grad_outputs
        try:
            yield
        finally:
            self._ahead = None

    def _call(self, name: str, args: tuple, kwargs: dict) -> object:
        self._ready_to_call()
        ahead, self._ahead = self._ahead, None
        msg = self._call_message(name, args, kwargs)
        if ahead is None:
            reply, _, originals = self._request(msg, name)
            early = None
        else:
            reply, originals, early = self._request_with_backward(msg, name, ahead)
        return self._finish_call(name, msg["id"], reply, originals, early)

    def _ready_to_call(self) -> None:
        if self.load_error is not None:
            raise StudentLoadError(self.load_error, filename=self.filename)
        self._ensure_worker()

    def _call_message(self, name: str, args: tuple, kwargs: dict) -> dict:
        self._next_id += 1
        msg = {"op": "call", "id": self._next_id, "name": name, "args": list(args)}
        msg["kwargs"], msg["grad"] = kwargs, torch.is_grad_enabled()
        return msg

    def _finish_call(self, name, call_id, reply, originals, early) -> object:
        """The call's result for the judge: mutations mirrored, gradients wired."""
        generation = self._generation
        grad_inputs = [t for t in originals if t.requires_grad]
        vjp = functools.partial(self._backward, call_id, generation, grad_inputs, name, early)
        release = functools.partial(self._release, call_id, generation)
        try:
            remote_autograd.mirror_mutations(reply.get("mutated"), originals)
            return remote_autograd.attach(
                reply.get("result"), reply.get("grad_outputs"), grad_inputs, vjp, release
            )
        except remote_autograd.ProtocolError as exc:
            raise self._protocol_error(str(exc)) from None

    def call_many(self, name: str, arguments: Sequence[tuple[tuple, dict]]) -> list[object]:
        """`[f(*args, **kwargs) for args, kwargs in arguments]` for the function `name`, with
        the requests sent back to back.

        For calls that do not need each other's results (the toy's sweeps make 63): the
        worker serves them one after the other as always, but the requests of a window go out
        together, which saves both processes a wake-up per call. A window holds at most
        _WINDOW_BYTES of requests (or one larger request alone), well within a socket's
        buffer, so sending it never waits for a worker that is busy answering. Results and
        errors are the calls' own; only the calls after a failing one in its window have run
        too (their results are dropped). Calls that share a tensor go one by one: an in-place
        change must be mirrored before the next call is sent.
        """
        if name not in self.functions:
            raise ValueError(f"{name!r} is not one of the submission's functions")
        if _share_tensors(arguments):
            return [self._call(name, args, kwargs) for args, kwargs in arguments]
        self._ready_to_call()  # a failing window raises, so later ones find the worker alive
        results: list[object] = []
        window: list[tuple[dict, Encoded]] = []
        size = 0
        for args, kwargs in arguments:
            msg = self._call_message(name, args, kwargs)
            frame = self._encode(msg)
            if window and size + frame.nbytes > _WINDOW_BYTES:
                results += self._call_window(name, window)
                window, size = [], 0
            window.append((msg, frame))
            size += frame.nbytes
        return results + (self._call_window(name, window) if window else [])

    def _call_window(self, name: str, window: list[tuple[dict, Encoded]]) -> list[object]:
        """Send a window's requests, then read every reply (each within its call's limit),
        so the channel stays in step even when one of the calls fails."""
        deadline = self._call_deadline()
        for _, frame in window:
            self._send(frame, name, deadline)
        results, failure = [], None
        for msg, frame in window:
            try:
                reply, _ = self._receive(msg["seq"], name, self._call_deadline())
            except StudentError as error:
                if self._channel is None:  # timed out or crashed: the rest is lost
                    raise (failure or error) from None
                failure = failure or error
                continue
            if failure is None:
                results.append(self._finish_call(name, msg["id"], reply, frame.originals, None))
            else:  # not wanted any more: let the worker drop its graph
                self._released.append(msg["id"])
        if failure is not None:
            raise failure
        return results

    def _request_with_backward(self, msg: dict, name: str, grad_outputs: list) -> tuple:
        """The call, and its backward sent right behind it: (reply, inputs, EarlyVjp | None)."""
        call_out = self._encode(msg)
        back = {"op": "backward", "id": msg["id"], "grad_outputs": grad_outputs}
        try:
            back_out = self._encode(back)
        except WireError:  # gradients the wire refuses: no early backward, the call goes alone
            back_out = None
        deadline = time.monotonic() + self.limits.call_wall_seconds
        self._send(call_out, name, deadline)
        if back_out is not None:
            self._send(back_out, name, deadline)
        try:
            reply, _ = self._receive(msg["seq"], name, deadline)
        except StudentError:
            if back_out is not None and self._channel is not None:  # keep the channel in step
                with contextlib.suppress(StudentError):
                    self._receive(back["seq"], name, self._call_deadline())
            raise
        early = None if back_out is None else self._early_vjp(back["seq"], name, grad_outputs)
        return reply, call_out.originals, early

    def _early_vjp(self, seq: int, name: str, grad_outputs: list) -> remote_autograd.EarlyVjp:
        """The answer to a backward sent ahead; a failure is kept to be raised by backward,
        where the test would have met it."""
        try:
            reply, _ = self._receive(seq, f"the backward of {name}", self._call_deadline())
        except StudentError as error:
            return remote_autograd.EarlyVjp(grad_outputs, None, error)
        return remote_autograd.EarlyVjp(grad_outputs, reply.get("grads"), None)

    def _call_deadline(self) -> float:
        return time.monotonic() + self.limits.call_wall_seconds

    def _backward(self, call_id, generation, inputs, name, early, grad_outputs) -> list:
        if early is not None and early.answers(grad_outputs):
            if early.error is not None:
                raise early.error
            grads = early.grads
        else:
            if generation != self._generation or self._worker is None:
                raise StudentCrash(
                    f"the worker that ran {name} has stopped since, so its graph is gone"
                )
            msg = {"op": "backward", "id": call_id, "grad_outputs": grad_outputs}
            reply, _, _ = self._request(msg, f"the backward of {name}")
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

    def _collect_output(self, worker) -> None:
        text, truncated = worker.take_output()
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


def _share_tensors(arguments: Sequence[tuple[tuple, dict]]) -> bool:
    """Whether two calls get the same tensor object (an in-place change would cross over)."""
    seen: set[int] = set()
    for args, kwargs in arguments:
        mine = {id(t) for t in tensors_in([list(args), kwargs])}
        if mine & seen:
            return True
        seen |= mine
    return False


class _RemoteFunction:
    """`student.gspo_loss(...)`: a callable that runs the named function in the worker."""

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
    filename: str = "submission.py",
    functions: Sequence[str] = ("sequence_ratio", "gspo_loss"),
    limits: Limits | None = None,
    pool=None,
) -> Iterator[StudentProxy]:
    """A loaded StudentProxy; its worker is stopped on exit. See .load_error first."""
    proxy = StudentProxy(source, filename=filename, functions=functions, limits=limits, pool=pool)
    try:
        yield proxy.start()
    finally:
        proxy.close()
