"""The judge: tier registry, the pytest sessions the tier suites run in, and the Grader.

    from grader.judge import Grader, grade

    report = grade(source, mode="submit")                  # cold, one shot
    with Grader(pool_size=2) as grader:                    # warm judge processes
        report = grader.grade(source, mode="run", exercise="gspo")

One Submit, hop by hop: Grader.grade (grader.py) -> JudgeClient.grade (client.py, over the
link of link.py) -> the judge process's loop (process.py) -> Judge.grade and the prepared
pytest session (engine.py) -> the tier tests, with the fixtures of plugin.py and the
Grading of grading.py -> the sandboxed student (grader.sandbox) -> Grading.report -> back.

Names are imported lazily so that `import grader.judge.registry` (the CLI's `tiers`, the
service's exercise page) does not pay for torch and pytest.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Grader": "grader.judge.grader",
    "grade": "grader.judge.grader",
    "grade_files": "grader.judge.grader",
    "GradingRequest": "grader.judge.link",
    "load_tiers": "grader.judge.registry",
    "Tier": "grader.judge.registry",
    "TierRegistryError": "grader.judge.registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grader.judge' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
