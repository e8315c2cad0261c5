"""Every resource limit of a sandboxed worker, in one place.

Defaults sit in the range of the established judges: Judge0 allows 5 s of CPU and 10 s of
wall clock per run, 60 processes and 1 MB of output; PrairieLearn gives a grading job 30 s
and 2 GiB with the network off. A grading here makes many small calls, so the CPU budget is
per grading (30 s) and the wall clock is capped both per call (10 s) and per grading (60 s).

Each field can be overridden from the environment as GSPO_GRADER_SANDBOX_<FIELD> (upper
case), e.g. GSPO_GRADER_SANDBOX_MEMORY_BYTES=1073741824. Byte sizes accept a suffix:
"512M", "2G", "64K" (binary units).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

ENV_PREFIX = "GSPO_GRADER_SANDBOX_"
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
_SUFFIXES = {"K": KIB, "M": MIB, "G": GIB}


class LimitsError(ValueError):
    """A limit is missing, negative or not a number: raised at configuration time."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one worker (one grading). Times in seconds, sizes in bytes."""

    cpu_seconds: float = 30.0  # CPU time of the worker for a whole grading (RLIMIT_CPU)
    call_wall_seconds: float = 10.0  # wall clock of one call (forward or backward)
    grading_wall_seconds: float = 60.0  # wall clock of a whole grading, load included
    memory_bytes: int = 2 * GIB  # address space (RLIMIT_AS); torch needs about 400 MiB
    processes: int | None = 64  # RLIMIT_NPROC; None = not set (judge runs unprivileged)
    open_files: int = 64  # RLIMIT_NOFILE
    file_size_bytes: int = 16 * MIB  # largest file the worker may write (RLIMIT_FSIZE)
    output_bytes: int = 1 * MIB  # stdout + stderr kept; the rest is dropped, marked truncated
    tmpfs_bytes: int = 64 * MIB  # size of the private /tmp (bwrap only)
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

    def replace(self, **changes: object) -> Limits:
        """A copy with some limits changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_json(self) -> str:
        """The `--limits` argument the worker main reads (see docs/sandbox-seam.md)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def describe(self) -> list[str]:
        """One human line per limit, for `gspo-grader doctor`."""
        return [f"{f.name} = {_human(f.name, getattr(self, f.name))}" for f in fields(self)]


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
    is_seconds = name.endswith("seconds")
    return number if is_seconds else int(number)


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
