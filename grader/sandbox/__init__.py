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

from grader.sandbox.errors import (
    LoadError,
    SandboxError,
    StudentCrash,
    StudentError,
    StudentLoadError,
    StudentTimeout,
)
from grader.sandbox.isolation import IsolationInfo, detect_isolation
from grader.sandbox.pool import WorkerPool
from grader.sandbox.proxy import StudentProxy, open_student
from grader.sandbox.worker.contract import Limits
from grader.sandbox.worker.wire import WireError

__all__ = [
    "IsolationInfo",
    "Limits",
    "LoadError",
    "SandboxError",
    "StudentCrash",
    "StudentError",
    "StudentLoadError",
    "StudentProxy",
    "StudentTimeout",
    "WireError",
    "WorkerPool",
    "detect_isolation",
    "open_student",
]
