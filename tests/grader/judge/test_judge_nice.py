"""`Grader(nice=N)`: its judge processes, and the sandboxed workers they start, run N steps
of CPU niceness below the process that made the Grader (a grading node's judges for
regrade work, grader/node/lanes.py), and so do their sessions where the kernel shares CPU
between sessions first (sched autogroup); nice=0 leaves them where it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.judge import Grader
from grader.sandbox import Limits


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def niceness(pid: int) -> int | None:
    try:
        return os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:  # it ended meanwhile
        return None


def autogroups() -> bool:
    """Whether this kernel shares CPU between sessions first (sched autogroup)."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False


def autogroup_nice(pid: int) -> int | None:
    try:  # "/autogroup-42 nice 7"
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def judge_processes(pids: list[int]) -> list[int]:
    return [pid for pid in pids if b"grader.judge_process" in cmdline(pid)]


@pytest.mark.parametrize("nice", [0, 7])
def test_the_judges_and_their_workers_run_at_the_graders_niceness(nice):
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    before = set(descendants(os.getpid()))
    with Grader(pool_size=1, limits=Limits.from_env(), warm=False, nice=nice) as grader:
        assert grader.wait_ready(300), grader.start_error
        source = Path(__file__).parents[3].joinpath("reference", "gspo.py").read_text()
        report = grader.grade(source, mode="run", exercise="gspo")
        assert report.grader_error is None and report.passed
        started = [p for p in descendants(os.getpid()) if p not in before]
        [judge] = judge_processes(started)
        below = descendants(judge)
        assert below, "the judge keeps a sandboxed worker started ahead"
        levels = {niceness(p) for p in [judge, *below]} - {None}
        assert levels == {min(19, ours + nice)}
        if autogroups() and nice:  # each session (judge, zygote, worker) at it too; the
            working = [p for p in [judge, *below] if b"bwrap" not in cmdline(p)]  # bwrap waits
            groups = {autogroup_nice(p) for p in working} - {None}
            assert groups == {min(19, ours + nice)}


def test_a_niceness_outside_0_to_19_is_refused():
    with pytest.raises(ValueError, match="nice must be from 0 to 19; got 20"):
        Grader(pool_size=1, nice=20)
