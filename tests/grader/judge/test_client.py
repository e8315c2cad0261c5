"""JudgeClient (grader/judge/client.py): its link to a judge process and how it ends."""

from __future__ import annotations

import os
import threading

import pytest

from grader.judge import GradingRequest, JudgeClient, JudgeFailed


def _pipes_held() -> set[int]:
    """The inodes of the pipes this process holds an fd of."""
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (this listing's own fd among them)
            continue
        if target.startswith("pipe:["):
            held.add(int(target[len("pipe:[") : -1]))
    return held


@pytest.mark.slow
def test_two_kills_at_once_keep_no_copy_of_another_files_descriptor():
    """A Grader closed while a judge starts kills that judge from two threads at once (its
    close, and the starting thread that sees the link closed). The second kill used to copy
    the link's fd number after the first had closed it: by then the number could be a new
    pipe's, and the copy, never closed, kept that pipe open (seen in CI: a relay that never
    saw its pipe's end). Pipes opened and closed meanwhile on another thread must all be
    gone afterwards."""
    churned: set[int] = set()
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            read_end, write_end = os.pipe()
            churned.add(os.fstat(read_end).st_ino)
            os.close(read_end)
            os.close(write_end)

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    try:
        for _ in range(100):
            judge = JudgeClient(None, warm=False, one_shot=True, spare_workers=0)
            together = threading.Barrier(2)

            def kill(judge=judge, together=together) -> None:
                together.wait()
                judge.kill()

            killers = [threading.Thread(target=kill) for _ in range(2)]
            for killer in killers:
                killer.start()
            for killer in killers:
                killer.join()
            assert not judge.alive()
    finally:
        stop.set()
        churner.join()
    assert churned, "the other thread opened no pipe"
    assert not (_pipes_held() & churned), "a closed pipe is still held open by a copy"


def test_a_request_the_judge_cannot_place_is_answered_and_the_judge_keeps_serving():
    """An exercise that is not in the judge's catalog (the Grader checks first; a folder can
    vanish in between) fails that request only, rehearsal included: the judge answers with
    its error and lives on."""
    judge = JudgeClient(None, warm=False, one_shot=True, spare_workers=0)
    try:
        judge.wait_ready()
        with pytest.raises(JudgeFailed) as failed:
            judge.grade(GradingRequest(source="x = 1\n", exercise="no-such-exercise"))
        assert "the judge process failed" in str(failed.value)
        assert "no-such-exercise" in str(failed.value)
        assert judge.alive()
    finally:
        judge.close()
