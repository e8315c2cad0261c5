"""The worker's request loop: one request frame in, one reply frame out, until EOF or `exit`.

Requests (dicts; any of them may carry "release": [call ids] to drop kept graphs first;
every reply carries "cpu_s", the CPU time this process has used, for the judge's metrics):
    {"op": "load", "source", "filename", "functions"}  -> {"ok", "load_error"}
    {"op": "call", "id", "name", "args", "kwargs", "grad"}
        -> {"ok": True, "result", "mutated": [[input index, tensor]], "grad_outputs": [pos],
            "sum_grads": [tensor | None] or "sum_error": {...}}
    {"op": "backward", "id", "grad_outputs": [tensor | None]} -> {"ok": True, "grads": [...]}
    {"op": "release", "ids": [...]}  -> {"ok": True}
    {"op": "exit"}                   -> no reply; the worker exits 0
A failure in student code replies {"ok": False, "error": {"type_name", "message", "line",
"traceback"}}. Every reply echoes the request's "seq", so the judge notices a frame that
student code wrote to the channel itself. The first frame the worker sends, unasked, is
{"op": "ready", ...}.

A call whose outputs require grad also answers, unasked, the gradient of their sum
("sum_grads"): most tests backpropagate a loss (`loss.backward()`) or a sum, and the judge
then needs no second round trip. A backward with any other output gradient asks as usual.
"""

from __future__ import annotations

import os
import socket
import sys
import time

import torch

from . import calls, student
from .codec import encode
from .contract import EXIT_OUT_OF_MEMORY, Op, WireClosed, WireError, WireLimits
from .wire import Channel, Frame


class Worker:
    """The state one worker process keeps: the loaded submission and the kept graphs."""

    def __init__(self) -> None:
        self.module = None
        self.filename = "submission.py"
        self.graphs = calls.Graphs()

    def handle(self, msg: dict, frame: Frame) -> dict:
        self.graphs.release(msg.get("release") or [])
        op = msg.get("op")
        try:
            if op == Op.LOAD:
                return self.load(msg)
            if op == Op.CALL:
                return self.call(msg, frame)
            if op == Op.BACKWARD:
                return {"ok": True, "grads": self.graphs.vjp(msg["id"], msg["grad_outputs"])}
            if op == Op.RELEASE:
                self.graphs.release(msg.get("ids") or [])
                return {"ok": True}
        except BaseException as exc:  # student code (sys.exit included fails one call only)
            return {"ok": False, "error": student.describe_exception(exc, self.filename)}
        return {"ok": False, "error": _worker_error(f"unknown request op {op!r}")}

    def load(self, msg: dict) -> dict:
        self.filename = msg["filename"]
        self.module, error = student.load(msg["source"], self.filename, list(msg["functions"]))
        return {"ok": True, "load_error": error}  # ok: the request was served

    def call(self, msg: dict, frame: Frame) -> dict:
        if self.module is None:
            return {"ok": False, "error": _worker_error("no submission is loaded")}
        fn = getattr(self.module, msg["name"])
        inputs = calls.prepare_inputs(frame, msg["args"], msg["kwargs"])
        result, mutated = calls.run_call(fn, inputs, bool(msg.get("grad", True)))
        graph, positions = calls.graph_of(result, inputs)
        reply = {"ok": True, "result": result, "mutated": mutated, "grad_outputs": positions}
        if graph is not None:
            self.graphs.keep(msg["id"], graph)
            reply.update(self.sum_grads(msg["id"], graph))
        return reply

    def sum_grads(self, call_id: int, graph: calls.Graph) -> dict:
        """The gradient of the sum of the outputs, or the student's error computing it."""
        if not all(o.dtype.is_floating_point for o in graph.outputs):
            return {}
        ones = [torch.ones_like(o) for o in graph.outputs]
        try:
            return {"sum_grads": self.graphs.vjp(call_id, ones)}
        except BaseException as exc:  # raised to the judge only if it asks for this backward
            return {"sum_error": student.describe_exception(exc, self.filename)}


def _worker_error(message: str) -> dict:
    return {"type_name": "WorkerError", "message": message, "line": None, "traceback": ""}


def _send_reply(channel: Channel, worker: Worker, msg: dict, reply: dict) -> None:
    """Send a reply; a result the wire cannot carry becomes a TypeError for the student."""
    try:
        frame = encode(reply, channel.limits)
    except Exception as exc:  # WireError, or a hostile tensor subclass raising in encode
        if msg.get("op") == Op.CALL:
            worker.graphs.release([msg.get("id")])
        name = msg.get("name", "the function")
        reason = student.cap_text(student.safe_str(exc), 2000)
        text = f"{name} returned a value the grader cannot carry back: {reason}"
        error = {"type_name": "TypeError", "message": text, "line": None, "traceback": ""}
        failed = {"ok": False, "error": error, "seq": msg.get("seq"), "cpu_s": reply["cpu_s"]}
        frame = encode(failed, channel.limits)
    channel.send_frame(frame)


def serve_requests(
    sock: socket.socket, limits: WireLimits | None = None, worker: Worker | None = None
) -> int:
    """Answer requests until the judge closes the channel; returns the exit status.
    `worker`: the state to serve with (a fresh Worker unless given)."""
    channel = Channel(sock, limits)
    channel.send({"op": Op.READY, "pid": os.getpid(), "torch": torch.__version__})
    worker = worker or Worker()
    while True:
        try:
            frame = channel.recv()
        except WireClosed:
            return 0
        msg = frame.value
        if not isinstance(msg, dict) or msg.get("op") == Op.EXIT:
            return 0 if isinstance(msg, dict) else 2
        reply = {**worker.handle(msg, frame), "seq": msg.get("seq"), "cpu_s": time.process_time()}
        try:
            _send_reply(channel, worker, msg, reply)
        except WireClosed:
            return 0


def serve_guarded(sock: socket.socket, limits: WireLimits | None = None) -> int:
    """`serve`, with running out of memory outside student code turned into status 86."""
    try:
        return serve_requests(sock, limits)
    except MemoryError:
        os.write(2, b"worker: out of memory outside student code\n")
        return EXIT_OUT_OF_MEMORY
    except WireError as exc:
        print(f"worker: bad request frame: {exc}", file=sys.stderr)
        return 2
