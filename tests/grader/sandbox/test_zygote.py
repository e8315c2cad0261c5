"""The zygote: forked workers are as confined as spawned ones, share nothing with each
other, and the pool survives a zygote that dies or refuses.

The attacks of test_adversarial.py already run against forked workers (its pool fixture is
parametrized); these tests cover what only forking could break: state left behind by one
submission reaching the next, the confinement steps done by hand in worker/confine.py, and
the zygote's own failures.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from grader.sandbox import StudentCrash, WorkerPool, ZygoteClient, ZygoteError, zygote_possible
from grader.sandbox.remote import open_student

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.adversarial,
    pytest.mark.usefixtures("time_guard", "bwrap_level"),
]
GUARD_S = 120


@pytest.fixture(scope="module")
def forking_pool(small_limits):
    if not zygote_possible():
        pytest.skip("no zygote on this host (needs root and bwrap)")
    with WorkerPool(1, small_limits, zygote=True) as pool:
        assert pool.wait_ready(120), pool.last_error
        first = pool.acquire()
        first.kill()
        assert first.forked, pool.last_error  # not spawned: the zygote works here
        assert pool.wait_ready(60), pool.last_error
        yield pool


def _call(pool, source: str, *args):
    """f(*args) in a fresh worker of `pool`; (result or exception, the worker used)."""
    with open_student(source, functions=("f",), pool=pool) as student:
        worker = student.worker
        try:
            return student.f(*args), worker
        except Exception as exc:
            return exc, worker


LEAVE_BEHIND = """
import os, time
def f():
    with open("/tmp/left-behind", "w") as mark:
        mark.write("from the first submission")
    if os.fork() == 0:
        os.setsid()
        while True:
            time.sleep(0.1)
    return os.getpid()
"""

LOOK_AROUND = """
import json, os
def f():
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    return json.dumps({"tmp": sorted(os.listdir("/tmp")), "pids": pids})
"""


def test_a_submission_leaves_nothing_the_next_one_can_see(forking_pool, kit):
    pid, first = _call(forking_pool, LEAVE_BEHIND)
    assert first.forked and pid == 2  # pid 1 is the worker's own init
    # the daemon it forked dies with its namespace (the worker is ended in the background)
    assert kit.wait_until(lambda: kit.pids_of(first.uid) == [], 10)
    seen, _ = _call(forking_pool, LOOK_AROUND)
    seen = json.loads(_text_of(seen))
    assert seen["tmp"] == sorted({"work", *_python_folders_in_tmp()})  # no left-behind file
    assert seen["pids"] == [1, 2]  # its init and itself: no other submission's process


def _python_folders_in_tmp() -> set[str]:
    """The top folders of a venv below /tmp (a CI clone's), which every worker sees."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return {p.split("/")[2] for p in map(os.path.abspath, prefixes) if p.startswith("/tmp/")}


def _text_of(value) -> str:
    assert isinstance(value, str), value
    return value


CONFINEMENT = """
import ctypes, json, os, socket
def f():
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    libc = ctypes.CDLL(None, use_errno=True)
    new_user_ns = libc.unshare(0x10000000)
    mounted = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
    try:
        socket.create_connection(("127.0.0.1", 22), timeout=1)
        network = "reachable"
    except OSError as exc:
        network = type(exc).__name__
    return json.dumps({
        "uid": os.getuid(), "cap_eff": status["CapEff"].strip(),
        "cap_prm": status["CapPrm"].strip(), "nnp": status["NoNewPrivs"].strip(),
        "new_user_ns": new_user_ns, "mounted": mounted, "network": network,
        "hostname": socket.gethostname(),
    })
"""


def test_a_forked_worker_has_no_privilege_and_no_way_out(forking_pool):
    seen, worker = _call(forking_pool, CONFINEMENT)
    seen = json.loads(_text_of(seen))
    assert seen["uid"] == 65534 and 60000 <= worker.uid < 61000
    assert seen["cap_eff"] == seen["cap_prm"] == "0000000000000000"
    assert seen["nnp"] == "1"
    assert seen["new_user_ns"] == -1  # no nested user namespace
    assert seen["mounted"] == -1
    assert seen["network"] != "reachable"


def test_the_cpu_limit_stops_a_forked_worker_and_says_so(small_limits):
    if not zygote_possible():
        pytest.skip("no zygote on this host")
    limits = small_limits.replace(cpu_seconds=1.0, call_wall_seconds=20.0)
    with WorkerPool(0, limits, zygote=True) as pool:
        outcome, worker = _call(pool, "def f():\n    while True:\n        pass\n")
    assert worker.forked
    assert isinstance(outcome, StudentCrash), outcome
    assert outcome.description == "killed: CPU time limit"


def test_a_dead_zygote_is_replaced_and_grading_goes_on(small_limits, kit):
    if not zygote_possible():
        pytest.skip("no zygote on this host")
    before = kit.zygotes()
    with WorkerPool(0, small_limits, zygote=True) as pool:
        result, worker = _call(pool, "def f(x):\n    return x + 1\n", 1)
        assert result == 2 and worker.forked
        (zygote,) = kit.zygotes() - before
        os.kill(zygote, signal.SIGKILL)  # as if the OOM killer took it
        result, _ = _call(pool, "def f(x):\n    return x + 1\n", 1)  # may spawn, once
        assert result == 2
        result, worker = _call(pool, "def f(x):\n    return x + 1\n", 2)
        assert result == 3 and worker.forked  # a new zygote forked it
        assert zygote not in kit.zygotes() and len(kit.zygotes() - before) == 1


def test_a_zygote_that_refuses_falls_back_to_spawning(small_limits, monkeypatch):
    if not zygote_possible():
        pytest.skip("no zygote on this host")

    asked = 0

    def refuse(*args, **kwargs):
        nonlocal asked
        asked += 1
        raise ZygoteError("sandbox zygote: refused (test)")

    monkeypatch.setattr(ZygoteClient, "fork_worker", refuse)
    with WorkerPool(0, small_limits, zygote=True) as pool:
        for _ in range(4):
            worker = pool.acquire()
            assert not worker.forked  # spawned instead
            worker.kill()
        assert asked == 3  # three refusals in a row: the pool stopped asking
        assert "refused" in str(pool.last_error)


def test_forking_a_worker_takes_milliseconds(forking_pool, capsys):
    """Not a timed assertion: the figure is printed; the bound only catches a fallback."""
    seconds = []
    for _ in range(5):
        started = time.monotonic()
        worker = forking_pool.acquire()
        assert worker.forked and worker.has_spoken(timeout=30)
        seconds.append(time.monotonic() - started)
        worker.kill()
    seconds.sort()
    with capsys.disabled():
        print(f"\n[figures] fork a confined worker until ready: median {seconds[2] * 1000:.0f} ms")
    assert seconds[2] < 3.0  # a spawned worker needs seconds of CPU for import torch


def test_the_zygote_keeps_a_spare_worker_forked_ahead(forking_pool):
    assert forking_pool.wait_ready(60)
    worker = forking_pool.acquire()
    assert worker.forked and worker.has_spoken(timeout=0)  # ready before it was asked for
    worker.kill()
    assert forking_pool.wait_ready(60)  # forked again, and has spoken
    again = forking_pool.acquire()
    assert again.forked and again.has_spoken(timeout=0) and again.pid != worker.pid
    again.kill()
    assert forking_pool.wait_ready(60)


def test_a_forked_worker_imports_what_the_zygote_never_imported(forking_pool):
    """Its fresh /tmp must not hide a venv that lies below /tmp (a CI clone's)."""
    seen, _ = _call(forking_pool, "def f():\n    import pytest\n    return pytest.__version__\n")
    assert isinstance(seen, str) and seen[:1].isdigit(), seen
