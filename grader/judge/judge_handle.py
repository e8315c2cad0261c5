"""The Grader's handle on one judge process: start it, send it gradings, kill it.

Every way a judge can fail (it dies, it hangs past the grading's time limit, it answers
garbage) ends here as an exception the Grader turns into a Report; nothing leaks to callers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

from grader.exercise import default_exercise
from grader.judge.channel import Channel, ChannelClosed
from grader.report import Report

if TYPE_CHECKING:  # importing grader.sandbox loads torch, which this process does not need
    from grader.sandbox import Limits

STARTUP_TIMEOUT_S = 180.0  # torch + pytest import on a loaded 2-core machine, with margin


class JudgeFailed(RuntimeError):
    """The judge process died or broke the protocol: the grader's fault."""


class JudgeTimeout(TimeoutError):
    """The judge did not answer within the grading's time limit."""


class JudgeProcess:
    """One `python -m grader.judge.judge_process` child and its channel."""

    def __init__(
        self,
        limits: Limits | None,
        *,
        warm: bool = True,
        one_shot: bool = False,
        spare_workers: int = 1,
    ):
        self.gradings = 0
        self.grading_wall_seconds = limits.grading_wall_seconds if limits else 60.0
        ours, theirs = socket.socketpair()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the judge)
        argv = [sys.executable, "-m", "grader.judge.judge_process", "--fd", str(theirs.fileno())]
        argv += ["--limits", limits.to_json()] if limits is not None else []
        argv += ["--warm"] if warm else []
        argv += ["--one-shot"] if one_shot else ["--spare-workers", str(spare_workers)]
        self.process = subprocess.Popen(
            argv,
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            cwd=default_exercise().root,
            start_new_session=True,
        )
        theirs.close()
        self.channel = Channel(ours)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        try:
            message = self.channel.receive(timeout)
        except (TimeoutError, ChannelClosed, ValueError) as error:
            detail = f"{error}{self.log_tail()}"
            self.kill()
            raise JudgeFailed(f"the judge process did not start: {detail}") from None
        if not message.get("ready"):
            self.kill()
            raise JudgeFailed(f"the judge process sent {message!r} instead of ready")
        self.grading_wall_seconds = float(message.get("grading_wall_seconds", 60.0))

    def grade(self, job: dict, timeout: float) -> Report:
        """Send one grading; the Report, or JudgeTimeout / JudgeFailed."""
        self.gradings += 1
        try:
            self.channel.send({"op": "grade", **job})
            message = self.channel.receive(timeout)
        except TimeoutError:
            self.kill()
            raise JudgeTimeout(f"no answer within {timeout:g} s") from None
        except (ChannelClosed, ValueError) as error:
            detail = f"{error}{self.log_tail()}"
            self.kill()
            raise JudgeFailed(f"the judge process died: {detail}") from None
        if "report" not in message:
            raise JudgeFailed(f"the judge process failed: {message.get('error', message)}")
        return Report.model_validate(message["report"])

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, timeout: float = 5.0) -> None:
        """Ask the judge to exit; kill it if it does not."""
        with contextlib.suppress(ChannelClosed, OSError):
            self.channel.send({"op": "exit"})
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)
        self.kill()

    def kill(self) -> None:
        """SIGKILL the judge's process group (its sandbox workers die with their parent)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        with contextlib.suppress(OSError):
            self.channel.close()
        self._log.close()

    def log_tail(self, limit: int = 1500) -> str:
        """The end of the judge's stderr, for a grader_error's detail."""
        with contextlib.suppress(OSError, ValueError):
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - limit))
            text = self._log.read().decode("utf-8", "replace").strip()
            return f"\n{text}" if text else ""
        return ""
