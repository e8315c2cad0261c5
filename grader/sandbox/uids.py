"""Host uids for workers: one per live worker (60000 + n), and the sweep that proves none
of a worker's processes is left.

Why a uid per worker: RLIMIT_NPROC counts the processes of a uid, and the final sweep kills
every process of that uid; two workers sharing one would share the budget and the sweep.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import tempfile
import threading
import time

from grader.sandbox import isolation
from grader.sandbox.worker.contract import WAITS

FIRST_SLOT_UID = 60000  # as root, worker n runs as uid 60000 + n (own RLIMIT_NPROC budget)
SLOT_COUNT = 1000
UID_LOCK_DIR = "/run/gspo-grader"


def _process_owners() -> dict[int, int]:
    """{pid: uid} of every process on the host (from /proc)."""
    owners: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                owners[int(entry.name)] = entry.stat().st_uid
    return owners


def pids_of(uid: int) -> list[int]:
    """The processes of `uid` now (tests use it to prove nothing of a worker survived)."""
    return [pid for pid, owner in _process_owners().items() if owner == uid]


class UidSlots:
    """Hands out host uids 60000+n: none used by a live process, and each held with an
    flock on /run/gspo-grader/uid-<n>.lock so judges in other processes never share one
    (a shared uid would share RLIMIT_NPROC, and one worker's kill would sweep the other)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}  # uid -> fd of its lock file

    def take(self) -> int:
        with self._lock:
            busy = set(self._held) | set(_process_owners().values())
            for uid in range(FIRST_SLOT_UID, FIRST_SLOT_UID + SLOT_COUNT):
                if uid not in busy and (fd := lock_uid(uid)) is not None:
                    self._held[uid] = fd
                    return uid
        raise isolation.IsolationError(f"all {SLOT_COUNT} worker uids are in use")

    def give_back(self, uid: int) -> None:
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # releases the flock

    def held(self) -> set[int]:
        with self._lock:
            return set(self._held)


def lock_uid(uid: int) -> int | None:
    """An fd holding an exclusive flock for `uid`, or None if another judge holds it."""
    folder = UID_LOCK_DIR
    if not os.access("/run", os.W_OK):
        folder = os.path.join(tempfile.gettempdir(), "gspo-grader-uids")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd = os.open(f"{folder}/uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def sweep_uid(uid: int) -> None:
    """SIGKILL every process of `uid` until none is left (escapees of levels without pid ns)."""
    deadline = time.monotonic() + WAITS.sweep_s
    while (pids := pids_of(uid)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


slots = UidSlots()  # one table per judge process, shared by the launcher and the zygote
