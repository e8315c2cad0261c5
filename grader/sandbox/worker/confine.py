"""Confine a process forked from the zygote: the same walls bwrap builds for a spawned worker.

The zygote runs as root inside bwrap (read-only system, no network), holding only CAP_SYS_ADMIN,
CAP_SETUID, CAP_SETGID and CAP_SETPCAP: the host's root when the judge is root, otherwise the
judge's uid with those capabilities in a user namespace of its own (not uid 0 there: since
Linux 5.12, mapping a parent's uid 0 into a new user namespace needs CAP_SETFCAP). A worker
forked from it goes through three steps before any student byte is read:

    new_pid_namespace()             in the zygote, for its next child only (then
                                    enter_pid_namespace takes it back to its own)
    enter_namespaces(tmpfs_bytes)   in the worker's init (that child, pid 1 of the new pid
                                    namespace): new mount, net, ipc and uts namespaces, a
                                    fresh size-capped /tmp of its own
    become_worker(uid)              then, in the init: its own /proc, a new session, the
                                    host uid `uid`, no capabilities, no_new_privs, and a user
                                    namespace in which no further user namespace can be made

Every step raises OSError on failure: the caller exits, so a half-confined process never
serves a request. Linux only; x86-64 and arm64 syscall numbers are not needed (libc wrappers).
"""

from __future__ import annotations

import ctypes
import os

from .contract import EXIT_CHILD_FAILED, INSIDE_UID, WORKDIR

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 1 << 14, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
CAP_LAST = 63  # PR_CAPBSET_DROP fails with EINVAL past the kernel's last capability
_CAPABILITY_V3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = ""):
    encode = lambda text: text.encode() if text else None  # noqa: E731
    result = _libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags),
                         encode(data))  # fmt: skip
    _check(result, f"mount {target}")


def _unshare(flags: int, what: str) -> None:
    _check(_libc.unshare(flags), f"unshare {what}")


def _prctl(option: int, value: int, what: str) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), what)


def die_with_parent(parent: int | None) -> None:
    """SIGKILL this process when its parent ends; end now if the parent `parent` already has.

    parent None: the caller is pid 1 of a new pid namespace, where its parent has no pid.
    """
    _prctl(PR_SET_PDEATHSIG, 9, "parent-death signal")
    if parent is not None and os.getppid() != parent:
        os._exit(EXIT_CHILD_FAILED)


def new_pid_namespace() -> None:
    """Put this process's next child in a new pid namespace, as its pid 1."""
    _unshare(CLONE_NEWPID, "pid namespace")


def enter_pid_namespace(fd: int) -> None:
    """Put this process's next children in the pid namespace `fd` (its own, opened from
    /proc/self/ns/pid): undoes new_pid_namespace, so that another one can be made."""
    _check(_libc.setns(fd, CLONE_NEWPID), "setns pid namespace")


def enter_namespaces(tmpfs_bytes: int, keep: tuple[str, ...] = ()) -> None:
    """New mount, net, ipc and uts namespaces; a private /tmp.

    Mounts are made private first, so nothing mounted here reaches the zygote or a sibling.
    keep: folders below /tmp that must stay visible (a venv below /tmp, as in a CI clone):
    the fresh tmpfs would hide them, so each is bound again, read-only, on top of it.
    """
    spaces = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    _unshare(spaces, "mount+net+ipc+uts namespaces")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    kept = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in keep]
    options = f"size={int(tmpfs_bytes)},mode=1777"
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, options)
    for path, fd in kept:
        _bind_again(path, fd)
    os.makedirs(WORKDIR, 0o777, exist_ok=True)
    os.chmod(WORKDIR, 0o777)  # mkdir's mode is filtered by the umask


def _bind_again(path: str, fd: int) -> None:
    """Bind the folder `fd` still points at (now hidden) at `path` again, read-only."""
    os.makedirs(path, 0o755, exist_ok=True)
    _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.close(fd)


def become_worker(uid: int | None) -> None:
    """In pid 1 of the new pid namespace: own /proc and session, then drop everything.

    uid None keeps the zygote's uid: a zygote started without root has a user namespace
    that maps no other uid; the nested user namespaces still take every capability away.
    """
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.setsid()
    session_follows_niceness()
    _drop_bounding_set()
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # clears the permitted and effective capabilities
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
    _prctl(PR_SET_DUMPABLE, 1, "dumpable")  # a uid change made /proc/self root's; take it back
    _forbid_user_namespaces()
    os.chdir(WORKDIR)


def session_follows_niceness() -> None:
    """Give this process's session its own CPU niceness. Where the kernel shares CPU time
    between sessions first (sched autogroup, for processes in the root cpu cgroup), a nice
    value only counts among the processes of one session, and judges and workers each have
    a session of their own: a regrade judge's niceness (grader/node/lanes.py) would not
    yield the cores to live work without this. Best effort: nothing where autogroups do not
    exist, or when the kernel refuses (it rate-limits these writes)."""
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if nice <= 0:
        return
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(nice))
    except OSError:
        pass


def set_dumpable(on: bool) -> None:
    """Non-dumpable: no process of the same uid may ptrace this one or read its memory."""
    _prctl(PR_SET_DUMPABLE, int(on), "dumpable")


def _drop_bounding_set() -> None:
    """Empty the capability bounding set (needs CAP_SETPCAP, which the zygote holds)."""
    for cap in range(CAP_LAST + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the last capability of this kernel
                return
            _check(-1, f"drop capability {cap} from the bounding set")


def _forbid_user_namespaces() -> None:
    """What bwrap's --disable-userns does: enter a user namespace, cap its children at one,
    and use that one up by entering it; then clear the capabilities the entry granted."""
    outer_uid, outer_gid = os.getuid(), os.getgid()
    _unshare(CLONE_NEWUSER, "user namespace")
    _map_self(INSIDE_UID, outer_uid, outer_gid)
    with open("/proc/sys/user/max_user_namespaces", "w") as limit:
        limit.write("1")
    _unshare(CLONE_NEWUSER, "nested user namespace")
    _map_self(INSIDE_UID, INSIDE_UID, INSIDE_UID)
    _clear_capabilities()


def _map_self(inside: int, outside_uid: int, outside_gid: int) -> None:
    """Map the one uid and the one gid this process has (each to `inside`); setgroups is
    denied, as the kernel requires of a process that maps its own gid."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{inside} {outside_uid} 1"),
                       ("gid_map", f"{inside} {outside_gid} 1")):  # fmt: skip
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


def _clear_capabilities() -> None:
    """capset(2) with every set empty: entering a user namespace grants a full set in it."""
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_V3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words: all zero
    _check(_libc.capset(header, data), "capset")
