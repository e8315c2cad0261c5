"""The sandbox: student code runs in an isolated worker; the judge holds a proxy to it.

    from grader.sandbox import open_student, Limits

    with open_student(source_text, functions=("f",)) as student:
        if student.load_error:                  # LoadError | None
            ...
        y = student.f(x)                        # runs in the worker
        y.sum().backward()                      # gradients come back from the worker

The parts: `worker/` (runs inside the sandbox; `worker/contract.py` is what both sides
agree on), `proxy.py` and `remote_autograd.py` (the judge's side of a call), `launch.py`,
`zygote_client.py`, `handle.py` and `pool.py` (starting, holding and stopping workers),
`isolation.py` (the levels and their words). The exception tree is drawn in `errors.py`.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported lazily: `grader.sandbox.isolation` and `worker.contract` must not load torch for
# the processes that only describe or configure the sandbox (the service's API nodes, doctor).
_EXPORTS = {
    "IsolationInfo": "grader.sandbox.isolation",
    "detect_isolation": "grader.sandbox.isolation",
    "Limits": "grader.sandbox.worker.contract",
    "LoadError": "grader.sandbox.errors",
    "SandboxError": "grader.sandbox.errors",
    "StudentCrash": "grader.sandbox.errors",
    "StudentError": "grader.sandbox.errors",
    "StudentLoadError": "grader.sandbox.errors",
    "StudentTimeout": "grader.sandbox.errors",
    "StudentProxy": "grader.sandbox.proxy",
    "open_student": "grader.sandbox.proxy",
    "WorkerPool": "grader.sandbox.pool",
    "WireError": "grader.sandbox.worker.codec",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grader.sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
