"""Resource limits the worker sets on itself, after `import torch` and before the submission.

Why here and not in the launcher: importing torch needs more address space and file
descriptors than a submission should get, and a pre-started worker must be able to import
it. The launcher passes its Limits as JSON (`--limits`); unknown keys are ignored, and a
limit is only ever lowered, never raised above the hard limit the launcher already set.
"""

from __future__ import annotations

import resource

# Limits field -> the rlimits it sets
_FIELDS = {
    "memory_bytes": ("RLIMIT_AS", "RLIMIT_DATA"),
    "processes": ("RLIMIT_NPROC",),
    "open_files": ("RLIMIT_NOFILE",),
    "file_size_bytes": ("RLIMIT_FSIZE",),
}


def _lower(name: str, soft: int, hard: int | None = None) -> None:
    which = getattr(resource, name)
    _, current_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def apply(limits: dict) -> dict[str, int]:
    """Set every limit named in `limits`; returns {rlimit name: soft value} as set."""
    applied: dict[str, int] = {}
    for field, names in _FIELDS.items():
        value = limits.get(field)
        if value is None:  # e.g. processes = None: the judge runs unprivileged, leave it
            continue
        for name in names:
            _lower(name, int(value))
            applied[name] = int(value)
    if limits.get("cpu_seconds") is not None:
        # the budget starts now: torch's import does not count against the student
        soft = int(_cpu_used() + float(limits["cpu_seconds"])) + 1
        _lower("RLIMIT_CPU", soft, soft + 1)  # SIGXCPU at soft, SIGKILL a second later
        applied["RLIMIT_CPU"] = soft
    _lower("RLIMIT_CORE", 0)
    applied["RLIMIT_CORE"] = 0
    return applied
