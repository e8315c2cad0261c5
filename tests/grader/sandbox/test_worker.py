"""The worker's request loop, driven over a plain socketpair (no isolation, no proxy).

One worker process serves the whole module (importing torch costs seconds on a loaded
machine); each test loads the submission it needs, which the protocol allows.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from grader.sandbox import WORKER_DIR, WORKER_SCRIPT
from grader.sandbox.remote import Channel

pytestmark = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[3]
REFERENCE = (REPO / "reference" / "gspo.py").read_text()
FUNCTIONS = ["sequence_ratio", "gspo_loss"]
LIMITS = {"memory_bytes": 3 << 30, "cpu_seconds": 60, "open_files": 64, "file_size_bytes": 1 << 20}
READY_S, REPLY_S = 120.0, 30.0


class Worker:
    """A worker process on a socketpair, with request/reply helpers."""

    def __init__(self, limits: dict) -> None:
        judge_end, worker_end = socket.socketpair()
        main = str(WORKER_DIR / WORKER_SCRIPT)
        argv = [sys.executable, "-I", "-B", main, "--fd", str(worker_end.fileno())]
        argv += ["--limits", json.dumps(limits)]
        self.process = subprocess.Popen(argv, pass_fds=[worker_end.fileno()])
        worker_end.close()
        self.channel = Channel(judge_end)
        self.ready = self.channel.recv(time.monotonic() + READY_S).value

    def request(self, msg: dict) -> dict:
        """The reply, without its CPU time (checked here: every reply carries it)."""
        self.channel.send(msg, time.monotonic() + REPLY_S)
        reply = self.channel.recv(time.monotonic() + REPLY_S).value
        assert isinstance(reply.pop("cpu_s"), float)
        return reply

    def load(self, source: str, functions=FUNCTIONS, filename: str = "submission.py") -> dict:
        msg = {"op": "load", "source": source, "filename": filename, "functions": functions}
        return self.request(msg)

    def call(self, call_id: int, name: str, *args, grad: bool = True, **kwargs) -> dict:
        msg = {"op": "call", "id": call_id, "name": name, "args": list(args), "kwargs": kwargs}
        return self.request({**msg, "grad": grad})

    def close(self) -> int:
        self.channel.sock.close()
        return self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def worker():
    w = Worker(LIMITS)
    yield w
    try:  # EOF on its channel: the worker must exit by itself, with status 0
        assert w.close() == 0
    finally:
        if w.process.poll() is None:
            w.process.kill()
            w.process.wait()


@pytest.fixture(scope="module")
def reference():
    spec = importlib.util.spec_from_file_location(
        "gspo_reference_for_worker_tests", REPO / "reference" / "gspo.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(B: int = 4, L: int = 8, old_requires_grad: bool = False):
    torch.manual_seed(1)
    logp = (-torch.rand(B, L) * 2).requires_grad_()  # [B, L]
    old = (logp.detach() + 0.3 * torch.randn(B, L)).requires_grad_(old_requires_grad)  # [B, L]
    mask = torch.ones(B, L)  # [B, L]
    mask[1, 5:] = 0
    return logp, old, torch.randn(B), mask  # adv [B]


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_ready_message_comes_first_and_limits_are_applied(worker):
    assert worker.ready["op"] == "ready" and worker.ready["torch"] == torch.__version__
    source = (
        "import resource, sys, torch\n"
        "def probe():\n"
        "    names = ('RLIMIT_AS', 'RLIMIT_NOFILE', 'RLIMIT_FSIZE', 'RLIMIT_CORE', 'RLIMIT_CPU')\n"
        "    limits = [resource.getrlimit(getattr(resource, n))[0] for n in names]\n"
        "    return limits, torch.get_num_threads(), [p for p in sys.path if 'worker' in p]\n"
    )
    assert worker.load(source, ["probe"]) == {"ok": True, "load_error": None, "seq": None}
    reply = worker.call(1, "probe")
    (address_space, files, file_size, core, cpu), threads, worker_paths = reply["result"]
    assert (address_space, files, file_size, core) == (3 << 30, 64, 1 << 20, 0)
    assert 60 < cpu < 60 + 30  # the budget starts after torch's import
    assert threads == 1 and worker_paths == []


def test_call_and_backward_match_local_autograd(worker, reference):
    assert worker.load(REFERENCE)["load_error"] is None
    logp, old, adv, mask = inputs(old_requires_grad=True)
    reply = worker.call(10, "gspo_loss", logp, old, adv, mask)
    expected = reference.gspo_loss(logp, old, adv, mask)
    assert reply["ok"] and reply["mutated"] == [] and reply["grad_outputs"] == [0]
    assert torch.equal(reply["result"], expected.detach())
    grads = worker.request({"op": "backward", "id": 10, "grad_outputs": [torch.tensor(1.0)]})
    expected.backward()
    assert torch.equal(grads["grads"][0], logp.grad) and grads["grads"][1] is None  # frozen
    again = worker.request({"op": "backward", "id": 10, "grad_outputs": [torch.tensor(2.0)]})
    assert torch.equal(again["grads"][0], 2 * logp.grad)  # the graph is retained until released
    assert worker.request({"op": "release", "ids": [10], "seq": 5}) == {"ok": True, "seq": 5}
    gone = worker.request({"op": "backward", "id": 10, "grad_outputs": [torch.tensor(1.0)]})
    assert not gone["ok"] and "no autograd graph" in gone["error"]["message"]


def test_release_rides_along_with_the_next_request(worker):
    assert worker.load(REFERENCE)["load_error"] is None
    logp, old, _, mask = inputs()
    assert worker.call(12, "sequence_ratio", logp, old, mask)["grad_outputs"] == [0]
    msg = {"op": "call", "id": 13, "name": "sequence_ratio", "args": [logp, old, mask]}
    assert worker.request({**msg, "kwargs": {}, "release": [12]})["ok"]
    for call_id, kept in ((12, False), (13, True)):
        grad = {"op": "backward", "id": call_id, "grad_outputs": [torch.ones(4)]}
        assert worker.request(grad)["ok"] is kept


def test_no_grad_call_keeps_no_graph(worker):
    assert worker.load(REFERENCE)["load_error"] is None
    reply = worker.call(11, "sequence_ratio", *inputs()[:2], inputs()[3], grad=False)
    assert reply["ok"] and reply["grad_outputs"] == [] and not reply["result"].requires_grad


def test_in_place_changes_are_reported_even_without_version_bump(worker):
    source = (
        "def scale(x, y, z):\n"
        "    x.mul_(2)\n"
        "    y.data.add_(1)  # .data writes bypass the version counter\n"
        "    return z.sum()\n"
    )
    assert worker.load(source, ["scale"])["load_error"] is None
    x, y, z = torch.ones(2), torch.zeros(3), torch.full((2,), float("nan"))
    reply = worker.call(20, "scale", x, y, z)
    assert [i for i, _ in reply["mutated"]] == [0, 1]  # NaN == NaN bitwise: z unchanged
    assert torch.equal(reply["mutated"][0][1], torch.full((2,), 2.0))
    assert torch.equal(reply["mutated"][1][1], torch.ones(3))


def test_shrinking_an_arguments_storage_fails_the_call_and_the_worker_lives(worker):
    source = (
        "def shrink(x):\n"
        "    x.untyped_storage().resize_(0)  # the tensor now points past its storage\n"
        "    return 1.0\n"
    )
    assert worker.load(source, ["shrink"])["load_error"] is None
    reply = worker.call(22, "shrink", torch.ones(4, dtype=torch.bool))  # a resizable one
    assert not reply["ok"] and "shrank the storage" in reply["error"]["message"]
    assert worker.load(REFERENCE)["load_error"] is None  # still serving
    assert worker.call(23, "sequence_ratio", *inputs()[:2], inputs()[3])["ok"]


def test_non_leaf_inputs_stay_non_leaves(worker):
    source = (
        "def bump(x):\n    x.add_(1)  # legal on a non-leaf, illegal on a leaf\n    return x * 3\n"
    )
    assert worker.load(source, ["bump"])["load_error"] is None
    base = torch.randn(3, requires_grad=True)
    reply = worker.call(21, "bump", base * 1)
    assert reply["ok"] and reply["grad_outputs"] == [0]
    grads = worker.request({"op": "backward", "id": 21, "grad_outputs": [torch.ones(3)]})
    assert torch.equal(grads["grads"][0], torch.full((3,), 3.0))
    leaf_reply = worker.call(22, "bump", base)
    assert not leaf_reply["ok"] and "leaf Variable" in leaf_reply["error"]["message"]


def test_student_exception_carries_only_student_frames(worker):
    source = (
        "import torch\n\ndef inner(x):\n    return 1 // 0\n\ndef outer(x):\n    return inner(x)\n"
    )
    assert worker.load(source, ["outer"], filename="mine.py")["load_error"] is None
    error = worker.call(30, "outer", 1)["error"]
    assert error["type_name"] == "ZeroDivisionError" and error["line"] == 4
    assert error["message"] == "integer division or modulo by zero"
    tb = error["traceback"]
    assert 'File "mine.py", line 7, in outer' in tb and 'File "mine.py", line 4, in inner' in tb
    for leak in ("serve.py", "calls.py", "student.py", "gspo_worker", "grader"):
        assert leak not in tb


def test_sys_exit_and_uncarriable_results_fail_one_call_only(worker):
    source = "import sys\ndef leave():\n    sys.exit(3)\n"
    source += "def odd():\n    return object()\ndef ok():\n    return 7\n"
    source += (
        "import torch\n"
        "class Hostile(torch.Tensor):\n"
        "    def detach(self):\n"
        "        raise RuntimeError('no detaching me')\n"
        "def hostile():\n"
        "    return torch.ones(2).as_subclass(Hostile)\n"
    )
    assert worker.load(source, ["leave", "odd", "ok", "hostile"])["load_error"] is None
    assert worker.call(40, "leave")["error"]["type_name"] == "SystemExit"
    odd = worker.call(41, "odd")["error"]
    assert odd["type_name"] == "TypeError" and "cannot carry back" in odd["message"]
    hostile = worker.call(43, "hostile")["error"]
    assert hostile["type_name"] == "TypeError" and "no detaching me" in hostile["message"]
    expected = {"ok": True, "result": 7, "mutated": [], "grad_outputs": [], "seq": None}
    assert worker.call(42, "ok") == expected


def test_syntax_error_has_line_and_caret(worker):
    error = worker.load("def f(x):\n    return (x +\n\ndef g(): pass\n", ["f"])["load_error"]
    assert error["kind"] == "syntax_error" and error["line"] == 2
    assert "^" in error["detail"] and "submission.py" in error["message"]


def test_import_error_and_missing_function(worker):
    source = "x = 1\nraise ValueError('bad module')\n"
    error = worker.load(source, ["f"])["load_error"]
    assert error["kind"] == "import_error" and error["line"] == 2
    assert error["message"] == "ValueError: bad module (submission.py, line 2)"
    assert 'File "submission.py", line 2, in <module>' in error["detail"]
    missing = worker.load("def sequence_ratio(a, b, c):\n    pass\ngspo_loss = 3\n")["load_error"]
    assert missing["kind"] == "missing_function" and "gspo_loss" in missing["message"]
    assert "sequence_ratio" not in missing["message"]
