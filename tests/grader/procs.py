"""The host's processes as the tests look at them: read from /proc, one snapshot per call.

    from procs import alive, processes
    judges = [p.pid for p in processes() if p.session == server.pid]
    plotters = [p for p in processes() if p.ppid == os.getpid() and "serve_plots" in p.command]

A process that ends while it is read is left out; a zombie (ended, not yet reaped by its
parent) is listed with state "Z", and `alive` says no for it. A process caught between
Popen's return and its new program's arguments is read again until they show.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

EXEC_SETTLE_S = 2.0  # the longest a started process's command line is waited for
KTHREADD = 2  # the parent of the kernel's own threads


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    session: int  # the session id (stat's field 6)
    state: str  # R, S, D, Z, ... (stat's field 3)
    nice: int  # (stat's field 19)
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    @property
    def program(self) -> str:
        """The executable's base name (python3.11, bwrap, setpriv, ...)."""
        return os.path.basename(self.argv[0]) if self.argv else ""


def _read(pid: int) -> Process | None:
    """One process as /proc shows it now. A process that has just been started (Popen has
    returned) may still show an empty command line for a moment: the kernel lets the parent
    go on before it sets up the new program's arguments. It is read again until they show."""
    deadline = time.monotonic() + EXEC_SETTLE_S
    while (process := _read_once(pid)) is not None and not process.argv:
        if process.state == "Z" or process.ppid in (0, KTHREADD) or time.monotonic() > deadline:
            break  # a zombie or a kernel thread has no command line at all
        time.sleep(0.001)
    return process


def _read_once(pid: int) -> Process | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().rstrip(b"\0").split(b"\0")
    except OSError:  # it ended meanwhile
        return None
    words = tuple(arg.decode(errors="replace") for arg in argv if arg)
    return Process(pid, int(fields[1]), int(fields[3]), fields[0], int(fields[16]), words)


def processes() -> list[Process]:
    """Every process on the host now."""
    found = (_read(int(name)) for name in os.listdir("/proc") if name.isdigit())
    return [process for process in found if process is not None]


def alive(pid: int) -> bool:
    """A running process (not ended, not a zombie waiting for its parent)."""
    process = _read(pid)
    return process is not None and process.state != "Z"
