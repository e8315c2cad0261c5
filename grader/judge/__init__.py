"""The judge: tier registry, the pytest plugin the tier suites run under, and the runner.

    from grader.judge import grade, Grader, load_tiers

    report = grade(source, mode="submit")        # cold, one shot
    with Grader(pool_size=2) as grader:          # warm judge processes
        report = grader.grade(source, mode="run")

Names are imported lazily so that `import grader.judge.registry` (the CLI's `tiers`, the
service's exercise page) does not pay for torch and pytest.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "grade": "grader.judge.runner",
    "Grader": "grader.judge.runner",
    "load_tiers": "grader.judge.registry",
    "Tier": "grader.judge.registry",
    "TierRegistryError": "grader.judge.registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grader.judge' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
