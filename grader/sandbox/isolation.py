"""What isolation this host offers, the command line that wraps a worker, and its words.

Strongest first:

    BWRAP     bubblewrap: user, pid, network, ipc, uts and mount namespaces; only the system,
              the interpreter, the venv and the worker folder are visible, read-only; a
              private size-capped /tmp; no nested user namespaces; as root, a host uid per
              worker (60000 + slot) with no capabilities.
    RLIMITS   resource limits and (as root) a host uid per worker only: network and file
              system visible. What a container without user namespaces can do.
    NONE      a clean environment and nothing else (not Linux, or util-linux missing).

Each level is probed once by really running a trivial sandboxed interpreter, then cached.
`describe()` is the one text of a level, used by doctor, /healthz and every report; what a
deployment requires, and doctor's text, are in doctor.py.
"""

from __future__ import annotations

import enum
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox.worker.contract import INSIDE_UID, SANDBOX_WORKER_DIR, WAITS, WORKDIR, Limits

LEVEL_ENV = "GSPO_GRADER_SANDBOX_LEVEL"  # cap the level used (tests and debugging)
PROBE_UID = 59999  # an unused uid for the one-off probe when the judge is root
# what the zygote keeps to confine a forked worker: namespaces and mounts, the uid drop,
# emptying the bounding set (worker/confine.py); nothing else
ZYGOTE_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")


class Level(enum.IntEnum):
    """Isolation levels, ordered: a larger value isolates more."""

    NONE = 0
    RLIMITS = 1
    BWRAP = 3

    @classmethod
    def parse(cls, text: str) -> Level:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(level.name.lower() for level in cls)
            raise IsolationError(f"unknown isolation level {text!r}; use one of {names}") from None


class IsolationError(RuntimeError):
    """The host cannot isolate a worker as strongly as the configuration requires."""


@dataclass(frozen=True)
class IsolationInfo:
    """The strongest level this host offers, the tool behind it, and each layer on or off."""

    level: Level
    tool: str  # "bwrap 0.8.0", "prlimit+setpriv", "none"
    details: str  # describe(level) for this host
    layers: dict[str, bool] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # why stronger levels were not available

    @property
    def weak(self) -> bool:
        """Below bubblewrap: the grader says so loudly wherever it reports its isolation."""
        return self.level < Level.BWRAP


def running_as_root() -> bool:
    return os.geteuid() == 0


def describe(level: Level, uid: int | None = None, forked: bool = False) -> str:
    """The one text of a level, for one worker (`uid`: its host uid, None: the judge's) or,
    with uid None and a root judge, for the host in general."""
    if uid is not None:
        who = f"uid {uid}, no capabilities"
    elif running_as_root():
        who = "uid 60000+slot, no capabilities"
    else:
        who = f"uid {os.geteuid()} (judge's)"
    if level == Level.BWRAP:
        head = "bwrap (zygote fork)" if forked else "bwrap"
        return (
            f"{head}: user+pid+net+ipc+uts+mount namespaces, {who}, uid {INSIDE_UID} inside, "
            "no nested user namespaces, read-only system, private /tmp"
        )
    if level == Level.RLIMITS:
        return f"RLIMITS ONLY: {who}, no namespaces: network and file system visible"
    return f"NONE: no sandbox at all, {who}"


def venv_python() -> str:
    """The interpreter path the worker is started with (the venv's, unresolved)."""
    return os.path.abspath(sys.executable)


def worker_args(level: Level, worker_dir: str, script: str, args: list[str]) -> list[str]:
    """`-I -B -u <worker folder as seen inside>/<script> args...`: -I keeps only the script's
    folder on sys.path and ignores PYTHON* variables; -B writes no bytecode; -u leaves
    stdout unbuffered, so what the student printed is in the pipe before the reply leaves."""
    folder = SANDBOX_WORKER_DIR if level == Level.BWRAP else os.path.realpath(worker_dir)
    return ["-I", "-B", "-u", f"{folder}/{script}", *args]


def minimal_env(home: str) -> dict[str, str]:
    """Everything the worker's environment holds; nothing comes from the judge's."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def python_binds() -> list[tuple[str, str]]:
    """(source, destination) pairs for the venv and interpreter prefixes, outermost only."""
    pairs: list[tuple[str, str]] = []
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        dest = os.path.abspath(prefix)
        if dest.startswith("/usr/") or dest == "/usr":
            continue
        pairs.append((os.path.realpath(prefix), dest))
    pairs.sort(key=lambda pair: pair[1])
    kept: list[tuple[str, str]] = []
    for src, dest in pairs:
        if not any(dest.startswith(d + "/") or dest == d for _, d in kept):
            kept.append((src, dest))
    return kept


def read_only_view(binds: list[tuple[str, str]], tmpfs_bytes: int | None = None) -> list[str]:
    """bwrap arguments: the system read-only, a private /tmp, then each (source, dest) bound
    read-only below world-traversable parents (bwrap would copy a 0700 /root).

    The tmpfs comes first: a venv below /tmp (a CI clone) is then bound on top of it."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    size = [] if tmpfs_bytes is None else ["--size", str(tmpfs_bytes)]
    argv += ["--perms", "1777", *size, "--tmpfs", "/tmp"]
    made: set[str] = {"/tmp"}
    for src, dest in binds:
        argv += [*_parent_dirs(dest, made), "--ro-bind", src, dest]
    return argv


def _bwrap_filesystem(worker_dir: str, tmpfs_bytes: int) -> list[str]:
    """The worker's view: read_only_view of python and the worker folder, /proc, /dev."""
    binds = [*python_binds(), (os.path.realpath(worker_dir), SANDBOX_WORKER_DIR)]
    argv = read_only_view(binds, tmpfs_bytes)
    argv += ["--perms", "0777", "--dir", WORKDIR, "--chdir", WORKDIR]
    return [*argv, "--proc", "/proc", "--dev", "/dev"]


def _parent_dirs(dest: str, made: set[str]) -> list[str]:
    """World-traversable parents of `dest`, each created once."""
    argv: list[str] = []
    parent = Path(dest).parent
    for part in reversed([parent, *parent.parents][:-1]):
        if str(part) not in made:
            made.add(str(part))
            argv += ["--perms", "0755", "--dir", str(part)]
    return argv


def _which(tool: str) -> str:
    """The tool's absolute path on the judge's PATH (what the probe tested is what runs)."""
    return shutil.which(tool) or tool


def _drop_to(uid: int) -> list[str]:
    """setpriv to an unprivileged uid/gid, no groups, no capabilities, no new privileges."""
    return [
        _which("setpriv"),
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--pdeathsig=KILL",
        "--",
    ]


def _outside_rlimits(limits: Limits, uid: int | None) -> list[str]:
    """prlimit for what can be set before the interpreter starts (NPROC only per own uid)."""
    argv = [_which("prlimit"), f"--fsize={limits.file_size_bytes}", "--core=0"]
    if uid is not None and limits.processes is not None:
        argv.append(f"--nproc={limits.processes}")
    return [*argv, "--"]


def wrap_command(
    level: Level,
    limits: Limits,
    *,
    worker_dir: str,
    python_args: list[str],
    uid: int | None,
    workdir: str,
    info_fd: int | None = None,
    zygote: bool = False,
) -> list[str]:
    """The whole argv that starts `python <python_args>` at `level`.

    worker_dir: the folder bwrap mounts read-only at SANDBOX_WORKER_DIR.
    uid: the host uid the worker runs as when the judge is root (None: the judge's own uid).
    workdir: the private working directory for the levels without bwrap.
    info_fd: an fd on which bwrap writes {"child-pid": N} (the pid namespace's init).
    zygote: bwrap keeping ZYGOTE_CAPS to confine the workers it forks.
    """
    env = [f"{k}={v}" for k, v in minimal_env("/tmp" if level == Level.BWRAP else workdir).items()]
    python = [_which("env"), "-i", "-C", workdir, *env, venv_python(), *python_args]
    if level == Level.NONE:  # no tool works: only a clean environment and folder
        return python
    head = _outside_rlimits(limits, uid)
    if level == Level.BWRAP:
        info = [] if info_fd is None else ["--info-fd", str(info_fd)]
        bwrap = _bwrap_argv(limits, worker_dir, uid, env, zygote)
        return [*head, bwrap[0], *info, *bwrap[1:], venv_python(), *python_args]
    drop = _drop_to(uid) if uid is not None else [_which("setpriv"), "--pdeathsig=KILL", "--"]
    return head + drop + python


def _bwrap_argv(limits, worker_dir: str, uid: int | None, env: list[str], zygote: bool):
    """As root: privileged bwrap builds the namespaces, setpriv drops to `uid`, and an inner
    unprivileged bwrap adds a user namespace that forbids nested user namespaces.
    Unprivileged: one bwrap with a user namespace does all of it.
    The zygote: one bwrap keeping ZYGOTE_CAPS (as root, the privileged one)."""
    setenv = [arg for pair in env for arg in ["--setenv", *pair.split("=", 1)]]
    common = ["--die-with-parent", "--new-session", "--clearenv", *setenv]
    spaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    spaces.append("--unshare-cgroup-try")
    userns = ["--unshare-user", "--disable-userns"]
    userns += ["--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID)]
    fs = _bwrap_filesystem(worker_dir, limits.tmpfs_bytes)
    if zygote:  # root: the host's root; otherwise its own uid, capable in its own user ns
        caps = ["--cap-drop", "ALL"] + [arg for cap in ZYGOTE_CAPS for arg in ["--cap-add", cap]]
        user = [] if running_as_root() else ["--unshare-user"]  # not uid 0: see confine.py
        return [_which("bwrap"), *spaces, *user, *common, *fs, *caps, "--"]
    if uid is None:
        return [_which("bwrap"), *spaces, *userns, *common, *fs, "--"]
    inner = [_which("bwrap"), *userns, "--die-with-parent", "--bind", "/", "/", "--dev", "/dev"]
    return [_which("bwrap"), *spaces, *common, *fs, "--", *_drop_to(uid), *inner, "--"]


def _closed_to_others(path: str) -> str | None:
    """The first folder on `path` that other users cannot traverse, described, or None."""
    for folder in reversed(Path(path).parents):
        mode = folder.stat().st_mode
        if not mode & 0o001:
            return f"{folder} is mode {mode & 0o777:o}"
    return None


def probe(level: Level) -> str | None:
    """Run a trivial interpreter at `level`; None if it worked, else why not."""
    tool = {Level.BWRAP: "bwrap", Level.RLIMITS: "prlimit"}[level]
    missing = [t for t in (tool, "setpriv", "env") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not found on PATH"
    uid = PROBE_UID if running_as_root() else None
    blocked = _closed_to_others(os.path.realpath(venv_python()))
    if uid is not None and level < Level.BWRAP and blocked:
        return f"an unprivileged uid cannot reach the interpreter: {blocked}"
    folder = str(Path(__file__).parent)  # any readable folder will do: the probe runs -c
    python_args = ["-I", "-c", "import os; os.urandom(1)"]  # /dev must work
    argv = wrap_command(
        level, Limits(), worker_dir=folder, python_args=python_args, uid=uid, workdir="/"
    )
    try:
        done = subprocess.run(argv, capture_output=True, timeout=WAITS.probe_s, env={}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{tool} probe failed: {exc}"
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        return f"{tool} probe exited {done.returncode}: {(message or [''])[-1]}"
    return None


def _layers(level: Level, root: bool) -> dict[str, bool]:
    """Which protection is on at `level` (as tested in tests/grader/sandbox)."""
    bwrap = level >= Level.BWRAP
    return {
        "resource limits (rlimits)": level >= Level.RLIMITS,
        "unprivileged uid, no capabilities": level >= Level.RLIMITS and root,
        "pid namespace (kill takes the whole tree)": bwrap,
        "network namespace (no network, loopback refused)": bwrap,
        "ipc and uts namespaces": bwrap,
        "private file system view (reference, tests, data invisible)": bwrap,
        "read-only system and venv": bwrap,
        "private size-capped /tmp": bwrap,
        "user namespace, nested user namespaces disabled": bwrap,
        "minimal environment (no secrets)": True,
    }


def _tool(level: Level) -> str:
    if level == Level.BWRAP:
        done = subprocess.run(
            [_which("bwrap"), "--version"], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() or "bwrap"
    return {Level.RLIMITS: "prlimit+setpriv", Level.NONE: "none"}[level]


@functools.cache
def _detect(cap: Level) -> IsolationInfo:
    problems: list[str] = []
    found = Level.NONE
    if sys.platform.startswith("linux"):
        for level in (Level.BWRAP, Level.RLIMITS):
            if level > cap:
                problems.append(f"{level.name.lower()}: not tried (capped at {cap.name.lower()})")
                continue
            why = probe(level)
            if why is None:
                found = level
                break
            problems.append(f"{level.name.lower()}: {why}")
    else:
        problems.append(f"{sys.platform}: only Linux is supported by the sandbox")
    root = running_as_root()
    return IsolationInfo(
        found, _tool(found), describe(found), _layers(found, root), tuple(problems)
    )


def detect_isolation(refresh: bool = False, cap: Level | None = None) -> IsolationInfo:
    """The strongest level this host offers, at most `cap` (probed once, then cached).

    GSPO_GRADER_SANDBOX_LEVEL=rlimits also caps the level: to test the fallback.
    """
    cap_text = os.environ.get(LEVEL_ENV, "").strip()
    env_cap = Level.parse(cap_text) if cap_text else Level.BWRAP
    if refresh:
        _detect.cache_clear()
    return _detect(env_cap if cap is None else min(cap, env_cap))
