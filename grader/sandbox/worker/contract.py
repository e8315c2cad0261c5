"""What the judge and its sandboxed workers agree on: both sides import this module.

Standard library only: the worker's folder is bind-mounted into the sandbox on its own and
imports it as `.contract`; the judge imports the same file as
`grader.sandbox.worker.contract`, without loading torch.

    Limits       every resource limit of one worker (one grading), set by the operator
    WireLimits   the caps of one frame on the wire, checked before a byte is allocated
    Op           the kinds of request on the wire and on the zygote's control socket
    WAITS        every wait of the grader's own machinery, in one place
    WireError    a frame that broke the format or a cap (WireClosed, WireTimeout)
    constants    descriptors, exit statuses, the paths and uid a worker sees
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

CHANNEL_FD = 3  # the worker's end of the judge's socket (the zygote's control socket)
INFO_FD = 4  # bwrap writes {"child-pid": N} here: the pid namespace's init
EXIT_OUT_OF_MEMORY = 86  # the worker ran out of memory outside student code
EXIT_CONFINE_FAILED = 71  # a forked worker could not be confined: it never served
EXIT_CHILD_FAILED = 70  # a forked helper process failed before it could say why
INSIDE_UID = 65534  # "nobody": the uid a worker sees inside its user namespace
WORKDIR = "/tmp/work"  # the worker's private, empty working directory
SANDBOX_WORKER_DIR = "/sandbox/worker"  # where bwrap mounts this folder inside the sandbox
ENV_PREFIX = "GSPO_GRADER_SANDBOX_"
CALL_SECONDS_PER_ELEMENT = 0.001  # a call's wall clock grows with its inputs (Limits)

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
_SUFFIXES = {"K": KIB, "M": MIB, "G": GIB}


class Op:
    """Request kinds. Judge -> worker: LOAD, CALL, BACKWARD, RELEASE, EXIT; the worker's first
    frame is READY. Judge -> zygote: FORK (the zygote's first message is READY)."""

    READY = "ready"
    LOAD = "load"
    CALL = "call"
    BACKWARD = "backward"
    RELEASE = "release"
    EXIT = "exit"
    FORK = "fork"


@dataclass(frozen=True)
class Waits:
    """How long the grader's own machinery waits before it calls something a failure.

    None of these is a limit on student code (those are in Limits); each is generous, because
    a loaded two-core machine is slow, and each wait ends in a grader error, never in a
    verdict against the student."""

    worker_ready_s: float = 120.0  # a worker or zygote imports torch and says "ready"
    fork_s: float = 15.0  # the zygote forks and confines one worker
    confine_s: float = 10.0  # inside the zygote: a worker's init reports itself confined
    exit_after_eof_s: float = 2.0  # a worker that closed its channel finishes exiting
    output_settle_s: float = 0.05  # the pipes' last bytes reach the judge's drain threads
    send_ahead_s: float = 2.0  # a call sent ahead fits the socket's buffers: it leaves at once
    forecast_drop_s: float = 1.0  # the replies to calls sent ahead, once a call differs;
    # then the worker is stopped and the next call starts another (proxy.py)
    status_after_kill_s: float = 10.0  # the zygote reports how a forked worker ended
    pidfd_info_s: float = 10.0  # bwrap writes the init's pid on its info descriptor
    sweep_s: float = 5.0  # every process of a worker's uid is gone after the kill
    probe_s: float = 30.0  # one trial run of a sandbox level
    pool_health_check_s: float = 0.5  # idle workers are checked for having died
    pool_retry_s: float = 2.0  # after a failed start, the pool tries again
    judge_ready_s: float = 180.0  # a judge process imports torch, pytest and warms up
    judge_margin_s: float = 30.0  # past its grading's own limit, a judge is called hung
    judge_exit_s: float = 2.0  # a judge asked to exit does so before it is killed


WAITS = Waits()


class WireError(Exception):
    """A frame broke the format or a cap. The channel is out of step afterwards: drop it."""


class WireClosed(WireError):
    """The other end closed the channel (a dead worker, or a judge that went away)."""


class WireTimeout(WireError):
    """The deadline passed before a whole frame arrived or left."""


class LimitsError(ValueError):
    """A limit is missing, negative or not a number: raised at configuration time."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one worker (one grading). Times in seconds, sizes in bytes.

    Defaults sit in the range of the established judges: Judge0 allows 5 s of CPU and 10 s of
    wall clock per run, 60 processes and 1 MB of output; PrairieLearn gives a grading job 30 s
    and 2 GiB with the network off. A grading makes many small calls, so the CPU budget is per
    grading (30 s) and the wall clock is capped both per call (10 s) and per grading (60 s).
    Each field can be set as GSPO_GRADER_SANDBOX_<FIELD>; sizes accept K, M and G."""

    cpu_seconds: float = 30.0  # CPU time of the worker for a whole grading (RLIMIT_CPU)
    # Wall clock of one call (forward or backward): call_wall_min_seconds plus 1 ms per
    # element of its input tensors (CALL_SECONDS_PER_ELEMENT), at most call_wall_seconds.
    # The tiers' calls take milliseconds; the slowest correct code known (Python loops over
    # every token, with autograd) takes about 0.3 ms per element on a loaded 2-core machine,
    # so every call keeps a margin of 3x or more, tiny ones of 100x or more. Loading the
    # submission gets call_wall_seconds.
    call_wall_seconds: float = 10.0
    call_wall_min_seconds: float = 3.0
    # once any call of the grading timed out, later calls get retry_wall_seconds in place of
    # call_wall_min_seconds (plus the same 1 ms per element); a function's second timeout ends
    # the rest of its calls at once: code that never returns is judged in ~3 to 6 s of waiting
    # (one function or two), not after every test waited out its own limit
    retry_wall_seconds: float = 1.0
    grading_wall_seconds: float = 60.0  # wall clock of a whole grading, load included
    memory_bytes: int = 2 * GIB  # address space (RLIMIT_AS); torch needs about 400 MiB
    processes: int | None = 64  # RLIMIT_NPROC; None: not set (the rlimits level, unprivileged)
    open_files: int = 64  # RLIMIT_NOFILE
    file_size_bytes: int = 16 * MIB  # largest file the worker may write (RLIMIT_FSIZE)
    output_bytes: int = 1 * MIB  # stdout + stderr kept; the rest is dropped, marked cut
    tmpfs_bytes: int = 64 * MIB  # size of the private /tmp
    max_message_bytes: int = 64 * MIB  # largest wire message either side accepts
    max_tensor_elements: int = 4 * 1024 * 1024  # largest tensor on the wire (elements)

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None and field.name == "processes":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise LimitsError(f"{field.name} must be a number, got {value!r}")
            if value <= 0:
                raise LimitsError(f"{field.name} must be positive, got {value!r}")
        if self.call_wall_seconds > self.grading_wall_seconds:
            raise LimitsError(
                f"call_wall_seconds ({self.call_wall_seconds}) exceeds "
                f"grading_wall_seconds ({self.grading_wall_seconds})"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Limits:
        """Defaults, then GSPO_GRADER_SANDBOX_* variables, then keyword overrides."""
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in fields(cls):
            raw = environ.get(ENV_PREFIX + field.name.upper())
            if raw is not None:
                values[field.name] = _parse(field.name, raw)
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, text: str) -> Limits:
        """The limits a worker, zygote or judge was started with (`--limits JSON`)."""
        return cls.from_mapping(json.loads(text))

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Limits:
        """Limits from a dict as `to_json` writes it; unknown keys are ignored."""
        known = {field.name for field in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})  # type: ignore[arg-type]

    def call_limit_seconds(self, elements: int, after_timeout: bool) -> float:
        """The wall clock a call whose input tensors hold `elements` elements gets (see
        call_wall_seconds), rounded to 0.1 s; `after_timeout`: a call of this grading has
        already run past its limit."""
        base = self.retry_wall_seconds if after_timeout else self.call_wall_min_seconds
        return min(self.call_wall_seconds, round(base + elements * CALL_SECONDS_PER_ELEMENT, 1))

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def replace(self, **changes: object) -> Limits:
        """A copy with some limits changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    def wire(self) -> WireLimits:
        """The caps of the wire that these limits imply."""
        return WireLimits(
            max_message_bytes=self.max_message_bytes, max_elements=self.max_tensor_elements
        )

    def describe(self) -> list[str]:
        """One human line per limit, for `gspo-grader doctor`."""
        return [f"{f.name} = {_human(f.name, getattr(self, f.name))}" for f in fields(self)]


@dataclass(frozen=True)
class WireLimits:
    """Caps checked before allocating, so a forged header costs the receiver nothing."""

    max_header_bytes: int = 1 << 20
    max_message_bytes: int = 64 << 20  # header + every payload
    max_elements: int = 1 << 26  # per tensor, meta tensors included
    max_dims: int = 8
    max_tensors: int = 4096
    max_depth: int = 12  # nesting of lists / tuples / dicts, the frame's own envelope included
    max_str_chars: int = 512 << 10


def _parse(name: str, raw: str) -> float | int | None:
    """Read one environment value: int, float, a byte size with K/M/G, or 'none'."""
    text = raw.strip()
    if name == "processes" and text.lower() in ("none", "unlimited", ""):
        return None
    multiplier = 1
    if text[-1:].upper() in _SUFFIXES:
        multiplier, text = _SUFFIXES[text[-1].upper()], text[:-1]
    try:
        number = float(text) * multiplier
    except ValueError:
        raise LimitsError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a number") from None
    return number if name.endswith("seconds") else int(number)


def _human(name: str, value: object) -> str:
    if value is None:
        return "not set"
    if name.endswith("bytes") and isinstance(value, int):
        for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
        return f"{value} B"
    if name.endswith("seconds"):
        return f"{value:g} s"
    return str(value)
