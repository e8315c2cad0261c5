"""The judge's side of the sandbox: a proxy whose methods run the student's functions remotely.

    with open_student(source, functions=("f", "g")) as student:
        loss = student.g(x, y)        # runs in the worker
        loss.backward()               # the gradient of a sum came with the reply; any other
                                      # output gradient is asked of the worker

Each call sends its arguments over the data-only wire, waits at most its wall-clock limit
(Limits.call_limit_seconds: a few seconds, more for large inputs), and rebuilds the result
here (see autograd.py). A call that times out or finds the worker dead raises
StudentTimeout / StudentCrash, and the next call starts a fresh worker and loads the source
again: one crash fails one test, not the report.

Hung code: once any call of the grading has timed out, every later call gets the shorter
Limits.retry_wall_seconds as its base; a function that has timed out twice is not called
again in this grading ("not run"), so code that never returns is judged in seconds, not
after every test has waited out its own limit, and the other functions' tests still run.
A function that killed its worker CRASHES_BEFORE_NOT_RUN times is not run again either (a
crash costs a restart, ~50 ms, not a wait, so it gets more tries; one that only some inputs
cause fails those calls only): its crashes never use up the other functions' restarts.

The starter: a function whose first calls all raised the same NotImplementedError, and that
never returned, is not called again: its later calls raise that same error at once in the
judge (stubs.py).

Requests are pipelined (pipeline.py): the judge tells the proxy where each test starts
(`begin_test`, with that test's forecast) and ends (`end_test`, which gives the test's calls
back), and the proxy sends the test's forecast calls ahead (`.ahead`, forecast.py).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator, Sequence

import torch

from grader.sandbox.errors import (
    LoadError,
    SandboxError,
    StudentCrash,
    StudentError,
    StudentLoadError,
    StudentTimeout,
)
from grader.sandbox.output import StudentOutput
from grader.sandbox.remote import autograd as remote_autograd
from grader.sandbox.remote.forecast import CallsAhead, Forecast, ForecastCall
from grader.sandbox.remote.pipeline import Pipeline
from grader.sandbox.remote.stubs import Stubs
from grader.sandbox.spawn import spawn_worker
from grader.sandbox.worker.codec import Encoded, Frame, encode
from grader.sandbox.worker.contract import WAITS, Limits, Op, WireError
from grader.sandbox.worker.wire import Channel

MAX_RESTARTS = 20  # a submission that crashes on every call stops being restarted
TIMEOUTS_BEFORE_NOT_RUN = 2  # a function that timed out this often is not called again
CRASHES_BEFORE_NOT_RUN = 5  # ... that killed its worker this often (see above)


class StudentProxy(Pipeline):
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
        then: Forecast | None = None,
    ) -> None:
        super().__init__()
        self.source, self.filename, self.functions = source, filename, tuple(functions)
        self.limits = limits or (pool.limits if pool is not None else Limits.from_env())
        self.load_error: LoadError | None = None
        self.restarts = 0
        self.ahead = CallsAhead(forecast, then)  # calls sent ahead; this grading's own calls
        self.worker_cpu_s = 0.0  # CPU time of this proxy's workers, as their replies said
        self.isolation = ""
        self._pool = pool
        self._timeouts: dict[str, int] = {}  # function name -> timeouts in this grading
        self._crashes: dict[str, int] = {}  # function name -> workers it killed
        self._stubs = Stubs()  # the functions the submission has not written
        self._losses = 0  # workers stopped or lost (a timeout, a crash, a broken protocol)
        self._test_losses = 0  # ... when the current test began
        self._test_round_trips = 0  # round trips when the current test began (or loaded)
        self.test_round_trips = 0  # ... that the test that ended last waited for
        self._output = StudentOutput(self.limits.output_bytes)
        for name in self.functions:
            if name.startswith("_") or hasattr(type(self), name) or name in vars(self):
                raise ValueError(f"cannot proxy a function named {name!r}")
            setattr(self, name, _RemoteFunction(self, name))

    @property
    def worker(self):
        """The WorkerHandle serving now (None between workers): which worker, how isolated."""
        return self._worker

    # -- worker lifecycle ------------------------------------------------------------------

    def start(self) -> StudentProxy:
        """Start (or take from the pool) a worker and load the source into it."""
        worker = self._pool.acquire() if self._pool is not None else spawn_worker(self.limits)
        self._worker, self._generation = worker, self._generation + 1
        self.limits, self.isolation = worker.limits, worker.isolation
        self._channel = Channel(worker.sock, worker.limits.wire())
        self._wait_ready()
        self.load_error = self._load()
        self._test_round_trips = self.round_trips  # the load is no test's own request
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
        found = None if error is None else LoadError.from_reply(error)
        if error is not None and found is None:
            self._lose_worker("broke the wire protocol")
            return LoadError("crash", "The worker sent a malformed reply while loading.")
        return found

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
        """Kill (reason given) or reap (it is exiting) the worker; describe its end."""
        worker, self._worker, self._channel = self._worker, None, None
        self._forget_ahead()
        if worker is None:
            return "no worker"
        self._losses += 1
        if reason is None:
            deadline = time.monotonic() + WAITS.exit_after_eof_s
            while worker.alive() and time.monotonic() < deadline:
                time.sleep(0.002)
        worker.kill(reason=reason or "did not exit in time")
        self._output.collect(worker)
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
        self._output.collect(worker, settle_s=WAITS.output_settle_s)
        self._count_cpu()
        worker.end_soon("grading finished")

    # -- tests -----------------------------------------------------------------------------

    def begin_test(self, forecast: Forecast | None, then: Forecast | None = None) -> None:
        """A test starts: its forecast's calls go to the worker now (unless sent already as
        the previous test's `then`), in one write, and the replies to other calls still
        ahead are dropped. `then`: the next test's forecast, sent once this one's is.
        Calls too large to go behind the dropped replies (AHEAD_BYTES) go once those are read."""
        self._abandoned.extend(self.ahead.begin(forecast, then))
        self._test_losses, self._test_round_trips = self._losses, self.round_trips
        if self._worker is not None and self.load_error is None:
            self._send_ahead()
        self._settle()
        if self._worker is not None and self.load_error is None:
            self._send_ahead()

    def end_test(self) -> Forecast | None:
        """The test ended: its calls, in order (the next run's forecast, if it passed), or
        None when a worker was lost during it. Its own calls still ahead are abandoned."""
        self._abandoned.extend(self.ahead.end())
        self.test_round_trips = self.round_trips - self._test_round_trips
        script, self.ahead.script = tuple(self.ahead.script), []
        return script if self._losses == self._test_losses else None

    # -- calls -----------------------------------------------------------------------------

    def _timed(
        self,
        name: str,
        what: str,
        msg: dict | None,
        seq: int = 0,
        body: Encoded | None = None,
        elements: int = 0,
    ) -> tuple[dict, Frame]:
        """A request for function `name` (or, msg None, the reply to request `seq`, sent
        ahead) on inputs of `elements` elements, within the wall clock it gets (see above)."""
        stopped = self._not_run(name)
        if stopped is not None:
            raise stopped
        seconds = self.limits.call_limit_seconds(elements, bool(self._timeouts))
        try:
            if msg is None:
                return self._receive(seq, what, seconds, time.monotonic() + seconds)
            return self._request(msg, what, seconds, body)
        except (StudentTimeout, StudentCrash) as error:
            counts = self._timeouts if isinstance(error, StudentTimeout) else self._crashes
            counts[name] = counts.get(name, 0) + 1
            raise

    def _not_run(self, name: str) -> StudentError | None:
        """Why function `name` is not called again in this grading (see above), or None."""
        if self._timeouts.get(name, 0) >= TIMEOUTS_BEFORE_NOT_RUN:
            return StudentTimeout(f"not run: {name} timed out earlier in this grading")
        crashes = self._crashes.get(name, 0)
        if crashes >= CRASHES_BEFORE_NOT_RUN:
            message = f"not run: {name} crashed {crashes} times earlier in this grading"
            return StudentCrash(message, filename=self.filename)
        return None

    def _runs(self, name: str) -> bool:
        """Not a stub (its calls are answered here), nor a function no longer run."""
        return self._not_run(name) is None and not self._stubs.stubbed(name)

    def _call(self, name: str, args: tuple, kwargs: dict) -> object:
        if self.load_error is not None:
            raise StudentLoadError(self.load_error, filename=self.filename)
        self._settle()
        body = {"op": Op.CALL, "name": name, "args": list(args), "kwargs": kwargs}
        body["grad"] = torch.is_grad_enabled()
        encoded = encode(body, self.limits.wire())  # a WireError is the calling test's bug
        elements = sum(t.numel() for t in encoded.originals)
        ahead = self.ahead.take(ForecastCall.of(encoded, name=name))
        position = (self.ahead.tests, len(self.ahead.script) - 1)  # for its backwards
        try:
            if ahead is not None:
                seq, call_id = ahead
                reply, _ = self._timed(name, name, None, seq, elements=elements)
                self._send_ahead()
            else:
                if self.ahead.active:
                    self._drop_ahead()
                    self._settle()
                stub = self._stubs.error_for(name)
                if stub is not None:
                    raise stub
                if self._not_run(name) is None:
                    self._ensure_worker()
                call_id = self._new_id()
                msg = {"id": call_id}
                reply, _ = self._timed(name, name, msg, body=encoded, elements=elements)
        except StudentError as error:
            self._stubs.raised(name, error)
            raise
        self._stubs.returned(name)
        return self._finish_call(name, (call_id, position), reply, encoded.originals, elements)

    def _finish_call(
        self, name: str, call: tuple[int, tuple], reply: dict, originals: list, elements: int
    ) -> object:
        """The call's result for the judge: mutations mirrored, gradients wired. `call`: its
        id, and (test, position in that test's script) for its backwards' forecast."""
        (call_id, position), generation = call, self._generation
        grad_inputs = [t for t in originals if t.requires_grad]
        early = self._early_vjp(reply)
        vjp = functools.partial(
            self._backward, call_id, position, generation, grad_inputs, name, early, elements
        )
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

    def _backward(
        self, call_id, position, generation, inputs, name, early, elements, grad_outputs
    ) -> list:
        if early is not None and remote_autograd.all_ones(grad_outputs):
            if early.error is not None:
                raise early.error
            grads = early.grads
        else:
            self._settle()  # may stop a worker stuck in calls sent ahead
            if generation != self._generation or self._worker is None:
                raise StudentCrash(
                    f"the worker that ran {name} has stopped since, so its graph is gone"
                )
            msg = {"op": Op.BACKWARD, "grad_outputs": grad_outputs}
            body = encode(msg, self._channel.limits)
            reply = self._backward_reply(name, call_id, position, body, elements)
            grads = reply.get("grads")
        try:
            return remote_autograd.check_grads(grads, inputs)
        except remote_autograd.ProtocolError as exc:
            raise self._protocol_error(str(exc)) from None

    def _backward_reply(self, name, call_id, position, body: Encoded, elements: int) -> dict:
        """The worker's answer to a backward through call `call_id`: sent ahead, when the
        forecast has this one next (the same output gradients, the same call of this test),
        else asked now. A backward of a call of an earlier test is never forecast."""
        test, index = position
        what = f"the backward of {name}"
        request = ForecastCall.of(body, target=index) if test == self.ahead.tests else None
        ahead = None if request is None else self.ahead.take(request)
        if ahead is not None:
            reply, _ = self._timed(name, what, None, ahead[0], elements=elements)
            self._send_ahead()
            return reply
        if request is not None and self.ahead.active:
            self._drop_ahead()
            self._settle()  # may stop a worker stuck in calls sent ahead, and its graphs
            if self._worker is None:
                raise StudentCrash(f"the worker that ran {name} stopped, so its graph is gone")
        reply, _ = self._timed(name, what, {"id": call_id}, body=body, elements=elements)
        return reply

    def output(self) -> tuple[str, bool]:
        """All output the student's code printed so far (every worker), and if it was cut.

        Complete once `close()` has run: while a worker lives, the spawner's drain threads
        may not yet have read what its last call printed.
        """
        if self._worker is not None:
            self._output.collect(self._worker)
        return self._output.text()


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
    then: Forecast | None = None,
) -> Iterator[StudentProxy]:
    """A loaded StudentProxy; its worker is stopped on exit. See .load_error first."""
    proxy = StudentProxy(source, filename=filename, functions=functions, limits=limits,
                         pool=pool, forecast=forecast, then=then)  # fmt: skip
    try:
        yield proxy.start()
    finally:
        proxy.close()
