"""The sandbox: student code runs in an isolated worker; the judge holds a proxy to it.

    from grader.sandbox import open_student, Limits

    with open_student(source_text) as student:
        if student.load_error:                  # LoadError | None
            ...
        loss = student.gspo_loss(logp, old_logp, adv, mask)
        loss.backward()                         # gradients come back from the worker

The parts: `worker/` (runs inside the sandbox: wire, request loop), `proxy.py` and
`remote_autograd.py` (the judge's side), `launch.py`, `pool.py`, `isolation.py` and
`limits.py` (starting, confining and stopping workers). The exception tree is drawn in
`errors.py`.
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
from grader.sandbox.limits import Limits
from grader.sandbox.pool import WorkerPool
from grader.sandbox.proxy import StudentProxy, open_student
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
