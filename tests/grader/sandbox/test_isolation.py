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

from grader.sandbox import (
    INSIDE_UID,
    LEVEL_ENV,
    REQUIRE_ENV,
    WORKDIR,
    IsolationError,
    IsolationInfo,
    Level,
    blocked_bwrap_hint,
    check_host,
    check_required,
    detect_isolation,
    doctor_report,
    lock_uid,
    probe,
    read_only_view,
    running_as_root,
    spawn_worker,
    uid_slots,
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
    assert Level.NONE < Level.RLIMITS < Level.BWRAP
    assert Level.parse(" BWrap ") is Level.BWRAP
    with pytest.raises(IsolationError, match="unknown isolation level 'docker'"):
        Level.parse("docker")


def test_probe_names_the_missing_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no tool at all
    assert probe(Level.BWRAP) == "bwrap, setpriv, env not found on PATH"


def test_probe_actually_runs_the_sandbox(monkeypatch, tmp_path):
    """A `bwrap` that exists but fails is reported as failing, not trusted from PATH."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: creating new namespace failed' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert probe(Level.BWRAP) == ("bwrap probe exited 1: bwrap: creating new namespace failed")


def test_detect_prefers_bwrap_when_the_host_offers_it():
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed on this host")
    info = detect_isolation(refresh=True)
    assert info.level is Level.BWRAP, info.problems
    assert info.tool.startswith("bubblewrap")
    assert all(info.layers.values()) or not running_as_root()


def test_strict_setting_refuses_a_weaker_host(monkeypatch):
    monkeypatch.setenv(LEVEL_ENV, "rlimits")  # this host, capped below bwrap
    with pytest.raises(IsolationError, match=r"bwrap is required .* offers only (rlimits|none)"):
        spawn_worker(require=Level.BWRAP)
    monkeypatch.setenv(REQUIRE_ENV, "bwrap")
    with pytest.raises(IsolationError, match="bwrap is required"):
        spawn_worker()
    assert uid_slots.held() == set()  # no uid slot leaked by the refusal


def test_strict_setting_accepts_an_equal_or_stronger_host():
    check_required(_fake_info(Level.BWRAP), Level.BWRAP)
    check_required(_fake_info(Level.BWRAP), Level.RLIMITS)
    with pytest.raises(IsolationError):
        check_required(_fake_info(Level.RLIMITS), Level.BWRAP)


def test_the_host_check_refuses_only_what_the_strict_setting_requires(monkeypatch):
    """What `gspo-grader grade`, `serve` and `worker` run before they start judges: a host
    capped to no isolation at all passes while nothing is required, and is refused once
    rlimits is."""
    monkeypatch.setenv(LEVEL_ENV, "none")
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    check_host()
    monkeypatch.setenv(REQUIRE_ENV, "rlimits")
    with pytest.raises(IsolationError, match=r"rlimits is required .* offers only none"):
        check_host()
    monkeypatch.setenv(REQUIRE_ENV, "none")
    check_host()


def test_doctor_report_shows_level_layers_limits_and_an_unmet_requirement(monkeypatch):
    monkeypatch.setenv(LEVEL_ENV, "rlimits")
    monkeypatch.setenv(REQUIRE_ENV, "bwrap")
    text = doctor_report()
    assert text.startswith(("Sandbox level: rlimits", "Sandbox level: none"))
    assert "NOT MET" in text and "WARNING: the sandbox runs on resource limits only" in text
    assert "memory_bytes = 2 GiB" in text and "not available: bwrap: not tried" in text


def test_doctor_report_on_this_host_lists_every_layer():
    text = doctor_report()
    for layer in detect_isolation().layers:
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
    assert seen["cwd"] == WORKDIR and seen["cwd_entries"] == []
    assert not seen["repo_visible"]
    assert "home" not in seen["root_entries"] and "etc" not in seen["root_entries"]
    assert seen["loopback"] in ("ConnectionRefusedError", "OSError")
    with pytest.raises(BlockingIOError):
        loopback_listener.accept()
    assert seen["uid"] == seen["euid"] == INSIDE_UID != 0
    assert int(seen["cap_eff"], 16) == 0 and seen["no_new_privs"] == "1"
    assert seen["new_userns"] is False  # nested user namespaces are disabled
    assert "uid 65534 inside" in worker.isolation
    worker.sock.close()
    assert kit.wait_until(lambda: not worker.alive(), 10)
    assert worker.exit_description() == "exited with status 0"


@pytest.mark.sandbox
def test_as_root_each_worker_runs_as_its_own_unprivileged_host_uid(start, kit, tmp_path):
    if not running_as_root():
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
    if not running_as_root():
        pytest.skip("uid slots are only used when the judge is root")
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from grader.sandbox import uid_slots\nprint(uid_slots.take(), flush=True)\ninput()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        theirs = int(other.stdout.readline())
        mine = uid_slots.take()
        uid_slots.give_back(mine)
        assert mine != theirs
    finally:
        other.communicate("\n", timeout=30)
    lock = lock_uid(theirs)  # their flock went away with their process
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


def test_a_venv_below_tmp_is_bound_after_the_private_tmp():
    """bwrap applies its arguments in order: a bind before `--tmpfs /tmp` would be hidden."""
    argv = read_only_view([("/tmp/ci/venv", "/tmp/ci/venv")], 1 << 20)
    tmpfs = argv.index("--tmpfs")
    bind = argv.index("/tmp/ci/venv")
    assert argv[tmpfs + 1] == "/tmp" and tmpfs < bind
    assert argv[argv.index("/tmp/ci") - 2 : argv.index("/tmp/ci")] == ["0755", "--dir"]


def test_an_installed_but_blocked_bwrap_points_to_the_container_flags(monkeypatch, tmp_path):
    """What a container run with the engine's defaults shows: bwrap is there, its probe
    fails; doctor and the refusal to start name the flags of docs/deploy.md."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: Can'\\''t mount proc on /newroot/proc: Operation not permitted'"
        " >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv(REQUIRE_ENV, "bwrap")
    try:
        info = detect_isolation(refresh=True)
        text = doctor_report()
        with pytest.raises(IsolationError, match="in a container, run it with the flags in docs"):
            check_required(info)
    finally:
        monkeypatch.undo()  # the real PATH, then the real probe, for the tests that follow
        detect_isolation(refresh=True)
    assert info.level < Level.BWRAP
    hint = next(line for line in text.splitlines() if line.startswith("HINT: "))
    assert "bwrap probe exited 1: bwrap: Can't mount proc on /newroot/proc" in hint
    assert "seccomp=unconfined" in hint and "systempaths=unconfined" in hint
    assert "unmask=/proc/*" in hint and "docs/deploy.md" in hint


def test_no_container_hint_when_bwrap_works_or_is_missing(monkeypatch, tmp_path):
    assert blocked_bwrap_hint(_fake_info(Level.BWRAP)) is None
    failed = IsolationInfo(Level.RLIMITS, "fake", "", {}, ("bwrap: bwrap probe exited 1: x",))
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap installed: install it, no flags
    assert blocked_bwrap_hint(failed) is None
