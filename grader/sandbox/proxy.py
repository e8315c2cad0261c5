"""The judge's side of the sandbox: a proxy whose methods run the student's functions remotely.

    with open_student(source) as student:
        loss = student.gspo_loss(logp, old_logp, adv, mask)   # runs in the worker
        loss.backward()                                        # VJP asked of the worker

Each call sends its arguments over the data-only wire, waits at most
Limits.call_wall_seconds, and rebuilds the result here (see remote_autograd.py). A call that
times out or finds the worker dead raises StudentTimeout / StudentCrash, and the next call
starts a fresh worker and loads the source again: one crash fails one test, not the report.
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
        msg["release"], self._released = self._released, []
        self._seq += 1
        msg["seq"] = self._seq
        try:
            frame_out = encode(msg, self._channel.limits)
        except WireError:  # a value the wire refuses: the calling test's bug, not the student's
            self._released.extend(msg["release"])
            raise
        frame = self._exchange(frame_out, what)
        reply = frame.value
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise self._protocol_error("the worker sent a malformed reply")
        if reply.get("seq") != self._seq:
            raise self._protocol_error("the worker's reply answers another request")
        if not reply["ok"]:
            raise self._student_error(reply.get("error"))
        return reply, frame, frame_out.originals

    def _exchange(self, frame_out: Encoded, what: str) -> Frame:
        """Send a frame and wait for the reply frame; a dead or slow worker is stopped."""
        seconds = self.limits.call_wall_seconds
        deadline = time.monotonic() + seconds
        try:
            self._channel.send_frame(frame_out, deadline)
            return self._channel.recv(deadline)
        except WireTimeout:
            self._lose_worker(f"wall-clock limit of {seconds:g} s per call")
            raise StudentTimeout(f"{what} did not finish within {seconds:g} s") from None
        except WireClosed:
            description = self._lose_worker(None)
            raise StudentCrash(
                f"the worker died during {what}: {description}",
                description=description,
                filename=self.filename,
            ) from None
        except WireError as exc:
            raise self._protocol_error(f"the worker sent a malformed message: {exc}") from None

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

    def _call(self, name: str, args: tuple, kwargs: dict) -> object:
        if self.load_error is not None:
            raise StudentLoadError(self.load_error, filename=self.filename)
        self._ensure_worker()
        self._next_id += 1
        call_id, generation = self._next_id, self._generation
        msg = {"op": "call", "id": call_id, "name": name, "args": list(args), "kwargs": kwargs}
        msg["grad"] = torch.is_grad_enabled()
        reply, _, originals = self._request(msg, name)
        grad_inputs = [t for t in originals if t.requires_grad]
        vjp = functools.partial(self._backward, call_id, generation, grad_inputs, name)
        release = functools.partial(self._release, call_id, generation)
        try:
            remote_autograd.mirror_mutations(reply.get("mutated"), originals)
            return remote_autograd.attach(
                reply.get("result"), reply.get("grad_outputs"), grad_inputs, vjp, release
            )
        except remote_autograd.ProtocolError as exc:
            raise self._protocol_error(str(exc)) from None

    def _backward(self, call_id, generation, inputs, name, grad_outputs) -> list:
        if generation != self._generation or self._worker is None:
            raise StudentCrash(
                f"the worker that ran {name} has stopped since, so its graph is gone"
            )
        msg = {"op": "backward", "id": call_id, "grad_outputs": grad_outputs}
        reply, _, _ = self._request(msg, f"the backward of {name}")
        try:
            return remote_autograd.check_grads(reply.get("grads"), inputs)
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
