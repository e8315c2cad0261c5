"""Hostile submissions against the sandbox, driven through `open_student` as the judge does.

Every attack runs against a worker forked from the zygote (the warm path) and a spawned one
(the cold path and the fallback); test_judge_in_a_view.py runs this whole module again with
an unprivileged judge. Every test ends with the verdict a report would show (the exception
type and message, or the load error) inside its limit, an unchanged host, and no process of
the worker left (none in its pid namespace; as root, none of its uid).
The limits are small (conftest.SMALL_LIMITS: 3 s per call, 1 GiB, 32 processes, 64 KiB of
output, 1 MiB files, a 16 MiB /tmp) so the suite stays safe on a shared 2-core machine.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import subprocess
import time

import pytest
import torch

from grader.sandbox import (
    StudentCrash,
    StudentError,
    StudentTimeout,
    WorkerPool,
    running_as_root,
    zygote_possible,
)
from grader.sandbox.remote import open_student

pytestmark = [
    pytest.mark.adversarial,
    pytest.mark.sandbox,
    pytest.mark.usefixtures("time_guard", "bwrap_level"),
]
GUARD_S = 120  # per test, torch's import on a loaded machine included
SLACK_S = 4.0  # kill, reap and Python overhead on top of a limit, on a loaded machine


@pytest.fixture(scope="module", params=["forked", "spawned"])
def forked(request) -> bool:
    """Whether the workers are forked from the zygote (the warm path, where the host allows
    one) or spawned from scratch (the cold path and the fallback): every attack runs
    against both."""
    if request.param == "forked" and not zygote_possible():
        pytest.skip("no zygote on this host (needs root and bwrap)")
    return request.param == "forked"


@pytest.fixture(scope="module")
def pool(forked, small_limits):
    """One pooled worker kept warm, of the kind `forked` says."""
    with WorkerPool(1, small_limits, zygote=forked) as warm:
        assert warm.wait_ready(120), "no pooled worker became ready"
        first = warm.acquire()
        first.kill()
        assert first.forked == forked, warm.last_error  # a zygote did not fall back, or none
        yield warm


@pytest.fixture
def handed_out(monkeypatch, kit):
    """Every worker a pool handed out in this test; afterwards none may be alive, nor have a
    process left in its pid namespace (nor, as root, of its uid)."""
    got, namespaces = [], []
    acquire = WorkerPool.acquire

    def recording(self):
        worker = acquire(self)
        got.append(worker)
        namespaces.append(kit.pid_namespace(worker))
        return worker

    monkeypatch.setattr(WorkerPool, "acquire", recording)
    yield got
    for worker, namespace in zip(got, namespaces, strict=True):
        # a finished grading's worker is ended in the background
        assert kit.wait_until(lambda w=worker: not w.alive(), 10), "a worker was left running"
        assert kit.wait_until(lambda ns=namespace: not kit.namespace_members(ns), 10)
        if worker.uid is not None:
            assert kit.pids_of(worker.uid) == [], f"a process of uid {worker.uid} survived"


@pytest.fixture
def run(pool, handed_out):
    """run(source, *args) -> (outcome, seconds, output): f(*args) in a fresh worker."""

    def _run(source: str, *args, functions=("f",)):
        assert pool.wait_ready(120), "no pooled worker became ready"  # time only the attack
        started = time.monotonic()
        with open_student(source, functions=functions, pool=pool) as student:
            if student.load_error is not None:
                outcome = student.load_error
            else:
                try:
                    outcome = student.f(*args)
                except StudentError as exc:
                    outcome = exc
        seconds = time.monotonic() - started
        return outcome, seconds, student.output()  # complete once the worker is stopped

    return _run


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


# -- endless loops, exits, signals --------------------------------------------------------


def test_endless_loop_at_import_is_a_timeout_load_error(run, kit):
    outcome, seconds, _ = run("while True:\n    pass\n\ndef f():\n    return 1\n")
    assert outcome.kind == "timeout" and "3 s" in outcome.message
    assert seconds < kit.small_limits.call_wall_seconds + SLACK_S


def test_endless_loop_in_a_call_is_a_student_timeout(run, kit):
    outcome, seconds, _ = run("def f():\n    while True:\n        pass\n")
    assert isinstance(outcome, StudentTimeout)
    assert str(outcome) == "Timeout: f did not finish within 3 s"
    assert seconds < kit.small_limits.call_wall_seconds + SLACK_S


def test_sys_exit_at_import_fails_the_load_only(run):
    outcome, _, _ = run("import sys\nsys.exit(3)\n")
    assert outcome.kind == "import_error" and "SystemExit" in outcome.message


def test_os_exit_at_import_is_a_crash_with_its_status(run):
    outcome, _, _ = run("import os\nos._exit(3)\n")
    assert outcome.kind == "crash" and "exited with status 3" in outcome.message


def test_sys_exit_in_a_call_is_an_exception(run):
    outcome, _, _ = run("import sys\ndef f():\n    sys.exit(4)\n")
    assert isinstance(outcome, StudentError) and outcome.type_name == "SystemExit"


def test_os_exit_in_a_call_is_a_crash(run):
    outcome, _, _ = run("import os\ndef f():\n    os._exit(7)\n")
    assert isinstance(outcome, StudentCrash) and outcome.description == "exited with status 7"


def test_segfault_is_described_by_its_signal(run):
    outcome, _, _ = run("import ctypes\ndef f():\n    ctypes.string_at(0)\n")
    assert isinstance(outcome, StudentCrash)
    assert outcome.description == "killed by signal SIGSEGV"


SIGTERM_IGNORED = """
import os, signal, time
def f():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for _ in range(3):
        if os.fork() == 0:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
    os.kill(os.getpid(), signal.SIGTERM)
    return 1
"""


def test_ignoring_sigterm_and_forking_setsid_children_does_not_survive_the_kill(run):
    outcome, _, _ = run(SIGTERM_IGNORED)
    assert outcome == 1  # the stray children are checked by the `handed_out` fixture


@pytest.fixture
def bystanders(start, kit, tmp_path):
    """A host process and another sandboxed worker that hostile code must not reach."""
    host = subprocess.Popen(["sleep", "60"])
    folder = kit.write_scripts(tmp_path / "b", **{"idle.py": "import os\nos.read(3, 1)\n"})
    other = start(worker_dir=folder, script="idle.py", args=[])
    yield host, other
    host.kill()
    host.wait()


@pytest.mark.parametrize(
    ("attack", "under_init"),
    [
        # where the worker's parent is its namespace's init (forked, or spawned by an
        # unprivileged judge: one bwrap), the init ignores the signal: the call sleeps past
        # its limit
        ("os.kill(os.getppid(), signal.SIGKILL)", "Timeout"),
        # kill(-1) spares init and the caller: nothing else is there to signal
        ("os.kill(-1, signal.SIGKILL)", "ProcessLookupError"),
        # the worker's own process group: it kills itself
        ("os.killpg(0, 9)", "Crash"),
    ],
)
def test_killing_the_parent_or_everything_only_kills_the_worker(
    run, forked, bystanders, attack, under_init, kit
):
    host, other = bystanders
    zygotes = kit.zygotes()  # the pool's, when it forks
    assert bool(zygotes) == forked
    outcome, _, _ = run(f"import os, signal, time\ndef f():\n    {attack}\n    time.sleep(5)\n")
    # as root, a spawned worker's parent is the inner bwrap: it dies with it, a crash
    init_is_parent = forked or not running_as_root()
    expected = under_init if init_is_parent else "Crash"
    assert isinstance(outcome, StudentError) and outcome.type_name == expected, outcome
    assert host.poll() is None and other.alive()
    assert kit.zygotes() == zygotes, "zygote reached"


# -- resources: memory, processes, output, disk ------------------------------------------


@pytest.mark.parametrize(
    "bomb",
    [
        "x = bytearray(8 * 2**30)",
        "x = []\n    while True:\n        x.append(bytearray(64 * 2**20))",
        "x = torch.empty(2**31, dtype=torch.float64)",
    ],
)
def test_memory_bomb_is_a_clear_error_and_the_judge_is_untouched(run, bomb):
    before = _rss_bytes()
    outcome, _, _ = run(f"import torch\ndef f():\n    {bomb}\n    return 1\n")
    assert isinstance(outcome, StudentError) and outcome.kind == "memory_limit", str(outcome)
    assert outcome.type_name in ("MemoryError", "RuntimeError"), str(outcome)
    assert _rss_bytes() - before < 64 * 2**20


FORK_BOMB = """
import os
def f():
    started = 0
    for _ in range(4):
        try:
            child = os.fork()
        except OSError:  # the first children's bomb filled the cap already
            break
        if child == 0:
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
        started += 1
    return started
"""


def test_fork_bomb_is_capped_and_killed_fast(pool, handed_out, kit, capsys):
    """Capped by RLIMIT_NPROC, as root (a uid per worker) and not (a user namespace per
    worker, where the kernel counts its processes apart from the judge's)."""
    with open_student(FORK_BOMB, functions=("f",), pool=pool) as student:
        assert student.f() >= 1  # returns while the bomb grows behind it
        worker = handed_out[-1]
        time.sleep(1.0)
        count = len(kit.namespace_members(kit.pid_namespace(worker)))
        started = time.monotonic()
        worker.kill(reason="test")
        seconds = time.monotonic() - started
    assert 4 < count <= kit.small_limits.processes + 1  # + 1: the worker's own init
    with capsys.disabled():
        print(f"\n[figures] fork bomb of {count} processes killed and reaped in {seconds:.3f} s")
    assert seconds < 10.0  # about 0.6 s on a quiet machine, 3.5 s seen under heavy load


def test_huge_stdout_is_truncated_and_marked(run, kit):
    outcome, _, (text, truncated) = run("def f():\n    print('x' * 10**7)\n    return 2\n")
    assert outcome == 2 and truncated
    assert 0 < len(text) <= kit.small_limits.output_bytes


FILL_DISK = """
import os
def f():
    seen = []
    try:
        with open("one_big_file", "wb") as out:
            while True:
                out.write(b"x" * 2**16)
    except OSError as exc:
        seen.append(exc.errno)
    try:
        for i in range(64):
            with open(f"fill_{i}", "wb") as out:
                out.write(b"x" * (2**20 - 1))
    except OSError as exc:
        seen.append(exc.errno)
    return seen
"""


def test_filling_the_disk_hits_the_file_size_and_tmpfs_caps(run, kit):
    outcome, _, _ = run(FILL_DISK)
    assert outcome == [errno.EFBIG, errno.ENOSPC]
    assert not any(p.name.startswith("fill_") for p in kit.repo.iterdir())


# -- what the worker can see and reach ----------------------------------------------------


@pytest.mark.parametrize(
    ("source", "type_name"),
    [
        ("import reference.gspo", "ModuleNotFoundError"),
        ("import grader", "ModuleNotFoundError"),
        ("open({ref!r}).read()", "FileNotFoundError"),
        ("open({tiers!r}).read()", "FileNotFoundError"),
    ],
)
def test_reference_and_tests_cannot_be_read(run, kit, source, type_name):
    ref = str(kit.repo / "reference" / "gspo.py")
    tiers = str(kit.repo / "tests" / "tiers" / "tiers.toml")
    outcome, _, _ = run(f"def f():\n    {source.format(ref=ref, tiers=tiers)}\n")
    assert isinstance(outcome, StudentError) and outcome.type_name == type_name


WALK = """
import os
def f():
    found = []
    for top, dirs, files in os.walk("/"):
        if top in ("/proc", "/sys", "/dev", "/usr") or top.endswith("site-packages"):
            dirs[:] = []  # the system and the libraries: large, and not ours to hide
            continue
        for name in files + dirs:
            path = os.path.join(top, name)
            if name in ("gspo.py", "tiers.toml", "statement.md", "pytest-of-root"):
                found.append(path)
            elif path.startswith(REPO + "/") and not path.startswith(REPO + "/.venv"):
                found.append(path)
    return found
"""


def test_walking_the_file_system_finds_no_exercise_file(forked, handed_out, kit):
    limits = kit.small_limits.replace(call_wall_seconds=20.0, grading_wall_seconds=90.0)
    source = f"REPO = {str(kit.repo)!r}\n{WALK}"
    slow = WorkerPool(0, limits, zygote=forked)  # the same kind of worker as `pool`
    with slow, open_student(source, functions=("f",), pool=slow) as student:
        assert student.worker.forked == forked
        assert student.f() == []


def test_loopback_listener_is_unreachable(run):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        connect = f"socket.create_connection(('127.0.0.1', {port}), 1)"
        source = f"import socket\ndef f():\n    {connect}\n"
        outcome, _, _ = run(source)
        assert isinstance(outcome, StudentError)
        assert outcome.type_name in ("ConnectionRefusedError", "OSError"), str(outcome)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


SECRETS = """
import os
def f():
    seen = dict(os.environ)
    for path in ("/proc/1/environ", "/proc/self/environ"):
        try:
            seen[path] = open(path, "rb").read().decode(errors="replace")
        except OSError as exc:
            seen[path] = type(exc).__name__
    return str(seen)
"""


def test_environment_secrets_do_not_reach_the_worker(run, monkeypatch):
    monkeypatch.setenv("GSPO_FAKE_SECRET", "hunter2-secret")
    outcome, _, _ = run(SECRETS)
    assert isinstance(outcome, str) and "hunter2" not in outcome
    assert "OMP_NUM_THREADS" in outcome


def test_writing_project_files_fails_and_they_stay_unchanged(run, kit):
    watched = [kit.repo / "reference" / "gspo.py", kit.repo / ".venv" / "pyvenv.cfg"]
    watched += sorted((kit.repo / "grader" / "sandbox" / "worker").glob("*.py"))
    before = [hashlib.sha256(p.read_bytes()).hexdigest() for p in watched]
    targets = [str(watched[0]), str(watched[1]), "/sandbox/worker/main.py", "/usr/pwned"]
    source = (
        "def f():\n    codes = []\n"
        f"    for path in {targets!r}:\n"
        "        try:\n            open(path, 'a').write('pwned')\n            codes.append(0)\n"
        "        except OSError as exc:\n            codes.append(exc.errno)\n"
        "    return codes\n"
    )
    outcome, _, _ = run(source)
    assert outcome[0] == errno.ENOENT and 0 not in outcome
    assert set(outcome[1:]) <= {errno.EROFS, errno.EACCES}
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in watched] == before


# -- lying values and forged reports ------------------------------------------------------


def test_printing_a_fake_passing_report_is_only_output(run, tmp_path):
    fake = json.dumps({"passed": True, "score": 100, "max_score": 100})
    source = (
        f"import torch\ndef f():\n    print({fake!r})\n"
        "    open('results.json', 'w').write('{}')\n    return torch.tensor([0.0])\n"
    )
    outcome, _, (text, _) = run(source)
    assert fake in text
    assert torch.equal(outcome, torch.tensor([0.0]))  # the judge still sees the true value
    assert not (tmp_path / "results.json").exists() and not os.path.exists("results.json")


def test_monkeypatching_torch_or_pytest_inside_does_not_reach_the_judge(run):
    allclose, eq = torch.allclose, torch.Tensor.__eq__
    source = (
        "import torch, pytest\ndef f():\n"
        "    torch.allclose = lambda *a, **k: True\n"
        "    torch.Tensor.__eq__ = lambda self, other: True\n"
        "    pytest.approx = lambda *a, **k: object()\n"
        "    return torch.tensor([1.0, 2.0])\n"
    )
    outcome = run(source)[0]
    assert torch.allclose is allclose and torch.Tensor.__eq__ is eq
    assert pytest.approx.__module__.startswith("_pytest")
    assert not torch.allclose(outcome, torch.tensor([9.0, 9.0]))


LIAR = """
import torch
class Liar(torch.Tensor):
    def __eq__(self, other):
        return torch.ones(self.shape, dtype=torch.bool)
    __hash__ = torch.Tensor.__hash__
def f():
    return torch.tensor([1.0, 2.0, 3.0]).as_subclass(Liar)
"""

LIAR_TORCH_FUNCTION = """
import torch
class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func.__name__ in ("equal", "allclose", "eq", "__eq__"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
def f():
    return torch.tensor([1.0, 2.0, 3.0]).as_subclass(Liar)
"""


@pytest.mark.parametrize("source", [LIAR, LIAR_TORCH_FUNCTION])
def test_tensor_subclass_arrives_as_a_plain_tensor_with_its_true_values(run, source):
    outcome = run(source)[0]
    assert type(outcome) is torch.Tensor
    assert outcome.tolist() == [1.0, 2.0, 3.0]
    assert not torch.equal(outcome, torch.zeros(3))


def test_an_object_that_would_run_a_command_when_unpickled_is_refused(run, tmp_path):
    marker = tmp_path / "pwned"
    source = (
        "import os\nclass Evil:\n    def __reduce__(self):\n"
        f"        return (os.system, ('touch {marker}',))\n"
        "def f():\n    return Evil()\n"
    )
    outcome = run(source)[0]
    assert isinstance(outcome, StudentError) and outcome.type_name == "TypeError"
    assert "cannot carry" in outcome.message
    assert not marker.exists()


def test_a_huge_returned_tensor_is_a_clean_error(run):
    before = _rss_bytes()
    outcome = run("import torch\ndef f():\n    return torch.zeros(20_000_000)\n")[0]
    assert isinstance(outcome, StudentError) and outcome.type_name == "TypeError"
    assert "cannot carry" in outcome.message
    assert _rss_bytes() - before < 64 * 2**20
