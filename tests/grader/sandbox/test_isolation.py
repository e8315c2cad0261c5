"""Isolation: the probe, the strict setting, and what a worker can see and do inside."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest

from grader.sandbox import isolation, launch, uids
from grader.sandbox.isolation import (
    IsolationError,
    IsolationInfo,
    Level,
    check_required,
    detect_isolation,
    doctor_report,
)

pytestmark = pytest.mark.usefixtures("time_guard")

# Prints what the worker can see, then waits for EOF on fd 3 so the judge can look at it.
INSIDE = textwrap.dedent(
    """
    import ctypes, json, os, socket, sys
    port = int(sys.argv[1])
    seen = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
            "groups": os.getgroups(), "env": dict(os.environ), "cwd": os.getcwd(),
            "cwd_entries": os.listdir("."), "root_entries": sorted(os.listdir("/"))}
    seen["repo_visible"] = os.path.exists(sys.argv[2])
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    seen["cap_eff"] = status["CapEff"].strip()
    seen["no_new_privs"] = status["NoNewPrivs"].strip()
    libc = ctypes.CDLL(None, use_errno=True)
    seen["new_userns"] = libc.unshare(0x10000000) == 0
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        seen["loopback"] = "connected"
    except OSError as exc:
        seen["loopback"] = type(exc).__name__
    seen["fds"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    open("scratch.txt", "w").write("ok")
    print(json.dumps(seen), flush=True)
    os.read(3, 1)
    """
)

MINIMAL_ENV_KEYS = {"PATH", "HOME", "LANG", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PWD"}


def _fake_info(level: Level) -> IsolationInfo:
    return IsolationInfo(level, "fake", f"{level.name.lower()} (simulated)", {}, ("simulated",))


def test_levels_are_ordered_and_parse():
    assert Level.NONE < Level.RLIMITS < Level.UNSHARE < Level.BWRAP
    assert Level.parse(" BWrap ") is Level.BWRAP
    with pytest.raises(IsolationError, match="unknown isolation level 'docker'"):
        Level.parse("docker")


def test_probe_names_the_missing_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no tool at all
    assert isolation.probe(Level.BWRAP) == "bwrap, setpriv, env not found on PATH"


def test_probe_actually_runs_the_sandbox(monkeypatch, tmp_path):
    """A `bwrap` that exists but fails is reported as failing, not trusted from PATH."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: creating new namespace failed' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert isolation.probe(Level.BWRAP) == (
        "bwrap probe exited 1: bwrap: creating new namespace failed"
    )


def test_detect_prefers_bwrap_when_the_host_offers_it():
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed on this host")
    info = detect_isolation(refresh=True)
    assert info.level is Level.BWRAP, info.problems
    assert info.tool.startswith("bubblewrap")
    assert all(info.layers.values()) or not isolation.running_as_root()


def test_strict_setting_refuses_a_weaker_host(monkeypatch):
    monkeypatch.setattr(isolation, "_detect", lambda cap: _fake_info(Level.RLIMITS))
    monkeypatch.setattr(launch, "_launch", lambda *a: pytest.fail("must not start a worker"))
    with pytest.raises(IsolationError, match=r"bwrap is required .* offers only rlimits"):
        launch.start_worker(require=Level.BWRAP)
    monkeypatch.setenv(isolation.REQUIRE_ENV, "unshare")
    with pytest.raises(IsolationError, match="unshare is required"):
        launch.start_worker()
    assert uids.slots.held() == set()  # no uid slot leaked by the refusal


def test_strict_setting_accepts_an_equal_or_stronger_host():
    check_required(_fake_info(Level.BWRAP), Level.BWRAP)
    check_required(_fake_info(Level.BWRAP), Level.UNSHARE)
    with pytest.raises(IsolationError):
        check_required(_fake_info(Level.UNSHARE), Level.BWRAP)


def test_doctor_report_shows_level_layers_limits_and_an_unmet_requirement(monkeypatch):
    monkeypatch.setattr(isolation, "_detect", lambda cap: _fake_info(Level.UNSHARE))
    monkeypatch.setenv(isolation.REQUIRE_ENV, "bwrap")
    text = doctor_report()
    assert text.startswith("Sandbox level: unshare (fake)")
    assert "NOT MET" in text and "WARNING: weaker than bwrap" in text
    assert "memory_bytes = 2 GiB" in text and "not available: simulated" in text


def test_doctor_report_on_this_host_lists_every_layer():
    text = doctor_report()
    for layer in isolation._layers(Level.BWRAP, True):
        assert layer in text


@pytest.fixture
def loopback_listener():
    """A listener on 127.0.0.1 the worker must not reach."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    yield listener
    listener.close()


def _inside(start, kit, tmp_path, port: int, **kwargs) -> tuple[dict, object]:
    folder = kit.write_scripts(tmp_path / "w", **{"inside.py": INSIDE})
    hidden = str(kit.repo / "reference" / "gspo.py")
    worker = start(worker_dir=folder, script="inside.py", args=[str(port), hidden], **kwargs)
    text = ""

    def printed_a_line() -> bool:
        nonlocal text
        text += worker.take_output()[0]
        return "\n" in text

    assert kit.wait_until(printed_a_line, 30), worker.exit_description()
    return json.loads(text), worker


@pytest.fixture
def leaked_fd():
    """An inheritable fd in the judge (as a careless library or parent would leave one)."""
    read_end, write_end = os.pipe()
    os.dup2(write_end, 50)  # inheritable by default
    yield 50
    for fd in (read_end, write_end, 50):
        os.close(fd)


@pytest.mark.sandbox
def test_bwrap_worker_sees_nothing_of_the_judge(
    start, kit, tmp_path, monkeypatch, loopback_listener, leaked_fd, bwrap_level
):
    monkeypatch.setenv("GSPO_FAKE_SECRET", "hunter2")
    port = loopback_listener.getsockname()[1]
    seen, worker = _inside(start, kit, tmp_path, port)
    assert set(seen["fds"]) <= {0, 1, 2, 3, 4}  # 4: listdir's own; fd 50 did not leak
    assert set(seen["env"]) <= MINIMAL_ENV_KEYS and "hunter2" not in json.dumps(seen)
    assert seen["env"]["OMP_NUM_THREADS"] == "1"
    assert seen["cwd"] == isolation.SANDBOX_WORKDIR and seen["cwd_entries"] == []
    assert not seen["repo_visible"]
    assert "home" not in seen["root_entries"] and "etc" not in seen["root_entries"]
    assert seen["loopback"] in ("ConnectionRefusedError", "OSError")
    with pytest.raises(BlockingIOError):
        loopback_listener.accept()
    assert seen["uid"] == seen["euid"] == isolation.SANDBOX_INNER_UID != 0
    assert int(seen["cap_eff"], 16) == 0 and seen["no_new_privs"] == "1"
    assert seen["new_userns"] is False  # nested user namespaces are disabled
    assert "uid 65534 inside" in worker.isolation
    worker.sock.close()
    assert kit.wait_until(lambda: not worker.alive(), 10)
    assert worker.exit_description() == "exited with status 0"


@pytest.mark.sandbox
def test_as_root_each_worker_runs_as_its_own_unprivileged_host_uid(start, kit, tmp_path):
    if not isolation.running_as_root():
        pytest.skip("the judge is not root: workers keep the judge's uid")
    first, second = start(), start()
    assert first.uid != second.uid and {first.uid, second.uid} <= set(range(60000, 61000))
    for worker in (first, second):
        assert kit.wait_until(lambda w=worker: kit.pids_of(w.uid), 10)
        for pid in kit.pids_of(worker.uid):
            ids = _status_field(pid, "Uid")
            assert ids and set(ids) == {str(worker.uid)}  # real, effective, saved, fs
            assert _status_field(pid, "Groups") == []


def test_judges_in_two_processes_never_share_a_worker_uid():
    if not isolation.running_as_root():
        pytest.skip("uid slots are only used when the judge is root")
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from grader.sandbox import uids\nprint(uids.slots.take(), flush=True)\ninput()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        theirs = int(other.stdout.readline())
        mine = uids.slots.take()
        uids.slots.give_back(mine)
        assert mine != theirs
    finally:
        other.communicate("\n", timeout=30)
    lock = uids.lock_uid(theirs)  # their flock went away with their process
    assert lock is not None
    os.close(lock)


def _status_field(pid: int, name: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].split()
    except OSError:
        return None
    return None


@pytest.mark.sandbox
@pytest.mark.parametrize("level", [Level.UNSHARE, Level.RLIMITS])
def test_fallback_levels_still_isolate_what_they_promise(
    level, start, kit, tmp_path, loopback_listener, monkeypatch
):
    info = detect_isolation(cap=level)
    if info.level != level:
        pytest.skip(f"{level.name.lower()} is not available here: {'; '.join(info.problems)}")
    monkeypatch.setenv("GSPO_FAKE_SECRET", "hunter2")
    seen, worker = _inside(start, kit, tmp_path, loopback_listener.getsockname()[1], level=level)
    assert "hunter2" not in json.dumps(seen) and set(seen["env"]) <= MINIMAL_ENV_KEYS
    assert seen["cwd_entries"] == [] and worker.isolation.startswith(level.name.lower())
    if isolation.running_as_root():
        assert seen["uid"] != 0
    if level == Level.UNSHARE:
        assert seen["loopback"] != "connected"


def _same_as_host(top: str) -> list[str]:
    if os.path.islink(top):
        return ["--symlink", os.readlink(top), top]
    return ["--ro-bind", top, top] if os.path.isdir(top) else []


_UNPRIVILEGED_JUDGE = textwrap.dedent(
    """
    import json, logging, sys, time
    logging.basicConfig()  # the pool's warnings reach stderr, which a failure shows
    from grader.sandbox.isolation import Level, detect_isolation
    from grader.sandbox.launch import start_worker
    from grader.sandbox.limits import Limits
    info = detect_isolation()
    out = {"level": info.level.name, "problems": info.problems, "workers": []}
    for level in (Level.BWRAP, Level.UNSHARE, Level.RLIMITS):
        w = start_worker(Limits(call_wall_seconds=5, grading_wall_seconds=20), level=level,
                         worker_dir=sys.argv[1], script="id.py", args=[])
        deadline = time.monotonic() + 20
        while w.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        text, _ = w.take_output()
        out["workers"].append([w.isolation, text.strip(), w.exit_description(), w.uid])
        w.kill()
    from grader.sandbox import WorkerPool, open_student
    source = "import os\\ndef f():\\n    return open('/proc/self/status').read()\\n"
    with WorkerPool(0, Limits(call_wall_seconds=5), zygote=True) as pool:
        with open_student(source, functions=("f",), pool=pool) as student:
            out["forked"] = [student.isolation, student.f(), pool.forks]
    print(json.dumps(out))
    """
)


@pytest.mark.sandbox
@pytest.mark.slow
def test_grader_works_as_an_unprivileged_user(kit, tmp_path, bwrap_level):
    """As root, run the judge itself as uid 65534 (in a read-only view of the system, the
    interpreter under /root and the repo) and start a worker at each level from there."""
    if not isolation.running_as_root():
        pytest.skip("already unprivileged: the other tests cover this path")
    folder = kit.write_scripts(tmp_path / "w", **{"id.py": "import os; print(os.getuid())"})
    argv = ["bwrap", "--unshare-pid", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    argv += [arg for top in ("/bin", "/lib", "/lib64", "/sbin") for arg in _same_as_host(top)]
    # the private /tmp first: a repo or venv below /tmp (a CI clone) is bound after it
    argv += ["--perms", "1777", "--tmpfs", "/tmp"]
    made: set[str] = set()
    for src, dest in isolation._python_binds():
        argv += [*isolation._parent_dirs(dest, made), "--ro-bind", src, dest]
    argv += [
        *isolation._parent_dirs(str(kit.repo), made),
        "--ro-bind",
        str(kit.repo),
        str(kit.repo),
    ]
    argv += isolation._parent_dirs(str(folder), made)
    argv += ["--ro-bind", str(folder), str(folder)]
    argv += ["--bind", "/proc", "/proc", "--dev", "/dev", "--die-with-parent"]  # see docs
    argv += ["--chdir", str(kit.repo)]
    argv += ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    argv += [sys.executable, "-c", _UNPRIVILEGED_JUDGE, str(folder)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["level"] == "BWRAP", out["problems"]
    bwrap, unshare, rlimits = out["workers"]
    assert bwrap[1:] == ["65534", "exited with status 0", None] and "judge's" in bwrap[0]
    assert unshare[0].startswith("unshare") and unshare[2] == "exited with status 0"
    assert rlimits[1:] == ["65534", "exited with status 0", None]
    isolation_text, status, forks = out["forked"]  # a zygote works without root too
    assert forks and isolation_text.startswith("bwrap (zygote fork)"), done.stderr[-2000:]
    assert "judge's" in isolation_text and "\nCapEff:\t0000000000000000\n" in status
    assert "\nNoNewPrivs:\t1\n" in status and "\nUid:\t65534\t" in status


def test_a_venv_below_tmp_is_bound_after_the_private_tmp(monkeypatch):
    """bwrap applies its arguments in order: a bind before `--tmpfs /tmp` would be hidden."""
    monkeypatch.setattr(isolation, "_python_binds", lambda: [("/tmp/ci/venv", "/tmp/ci/venv")])
    argv = isolation._bwrap_filesystem("/somewhere/worker", 1 << 20)
    tmpfs = argv.index("--tmpfs")
    bind = argv.index("/tmp/ci/venv")
    assert argv[tmpfs + 1] == "/tmp" and tmpfs < bind
    assert argv[argv.index("/tmp/ci") - 2 : argv.index("/tmp/ci")] == ["0755", "--dir"]
