"""WorkerPool: pre-started workers, handed out once, replaced when they die, all killed on
close; plus the figures the lead asked for (cold start, warm acquire, fork-bomb kill)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from procs import processes

from grader.sandbox import WorkerPool
from grader.sandbox.remote import open_student

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("time_guard")]

# Waits for the judge to close its end; says which process it is first.
IDLE = "import os\nprint(os.getpid(), flush=True)\nos.read(3, 1)\n"


def idle_processes(with_wrappers: bool = False) -> list[int]:
    """Host pids of the interpreters running the idle script, of any pool (procs.py); with
    wrappers, the setpriv and bwrap processes above them too (they name the script too)."""
    return [
        p.pid
        for p in processes()
        if (with_wrappers or p.program.startswith("python"))
        and any(arg.endswith("/idle.py") for arg in p.argv)
    ]


@pytest.fixture
def idle_dir(kit, tmp_path):
    return kit.write_scripts(tmp_path / "w", **{"idle.py": IDLE})


@pytest.fixture
def make_pool(idle_dir, small_limits, kit):
    pools: list[WorkerPool] = []

    def _make(size: int, limits=small_limits) -> WorkerPool:
        pool = WorkerPool(size, limits, worker_dir=idle_dir, script="idle.py")
        pools.append(pool)
        return pool

    yield _make
    for pool in pools:
        pool.close()


def test_acquire_hands_out_a_fresh_live_worker_and_refills(make_pool, workers, kit):
    pool = make_pool(2)
    assert pool.wait_filled(30)
    first = pool.acquire()
    workers.append(first)
    assert first.alive()
    # the one handed out, and two idle again
    assert pool.wait_filled(30) and kit.wait_until(lambda: len(idle_processes()) == 3, 30)
    second = pool.acquire()
    workers.append(second)
    assert second.pid != first.pid  # never reused
    if first.uid is not None:
        assert second.uid != first.uid


def test_a_worker_that_died_in_the_pool_is_never_handed_out(make_pool, workers, kit):
    pool = make_pool(1)
    assert pool.wait_filled(30) and kit.wait_until(lambda: len(idle_processes()) == 1, 30)
    (doomed,) = idle_processes()
    tree = idle_processes(with_wrappers=True)
    os.kill(doomed, signal.SIGKILL)  # dies while waiting in the pool, as if OOM-killed
    # the bwrap processes above it end a moment later; once they have, the pool can tell
    assert kit.wait_until(lambda: not set(tree) & set(idle_processes(with_wrappers=True)), 5)
    handed = pool.acquire()
    workers.append(handed)
    assert handed.alive() and kit.wait_until(lambda: len(idle_processes()) == 2, 30)
    assert doomed not in idle_processes()  # the one handed out, and its replacement


def test_size_zero_starts_cold_on_acquire(make_pool, workers, kit):
    pool = make_pool(0)
    worker = pool.acquire()
    workers.append(worker)
    assert worker.alive() and kit.wait_until(lambda: len(idle_processes()) == 1, 30)
    time.sleep(1.0)  # a pool of size 0 starts none to keep idle
    assert len(idle_processes()) == 1


def test_concurrent_acquires_get_distinct_workers(make_pool, workers):
    pool = make_pool(2)
    got, lock = [], threading.Lock()

    def take() -> None:
        worker = pool.acquire()
        with lock:
            got.append(worker)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    workers.extend(got)
    assert len({w.pid for w in got}) == 4


def test_close_kills_every_idle_worker(make_pool, kit):
    pool = make_pool(2)
    assert pool.wait_filled(30) and kit.wait_until(lambda: len(idle_processes()) == 2, 30)
    pool.close()
    assert idle_processes() == []
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire()


def test_acquire_arms_the_grading_wall_clock(make_pool, small_limits, workers, kit):
    limits = small_limits.replace(call_wall_seconds=1.0, grading_wall_seconds=1.5)
    pool = make_pool(1, limits)
    assert pool.wait_filled(30)
    time.sleep(2.0)  # waiting in the pool does not count
    worker = pool.acquire()
    workers.append(worker)
    assert worker.alive()
    assert kit.wait_until(lambda: not worker.alive(), 5)
    assert worker.exit_description() == "killed: wall-clock limit of 1.5 s per grading"


@pytest.mark.slow
def test_figures_cold_start_and_warm_acquire(small_limits, capsys):
    """The real worker: cold open_student (start, torch import, load) against one from a
    filled pool whose worker has finished importing torch."""
    started = time.monotonic()
    with open_student("def f():\n    return 1\n", functions=("f",), limits=small_limits) as s:
        cold = time.monotonic() - started
        assert s.f() == 1
    with WorkerPool(1, small_limits) as pool:
        assert pool.wait_ready(120)  # torch imported in the pooled worker
        started = time.monotonic()
        worker = pool.acquire()
        acquire = time.monotonic() - started
        worker.kill()
        assert pool.wait_ready(120)
        started = time.monotonic()
        with open_student("def f():\n    return 2\n", functions=("f",), pool=pool) as s:
            warm = time.monotonic() - started
            assert s.f() == 2
    with capsys.disabled():
        print(f"\n[figures] cold open_student (spawn + torch import + load): {cold:.3f} s")
        print(f"[figures] pool.acquire() from a filled pool: {acquire * 1000:.1f} ms")
        print(f"[figures] warm open_student from a filled pool (acquire + load): {warm:.3f} s")
    assert warm < cold and acquire < 0.5
