"""The sandbox: student code runs in an isolated worker; the judge holds a proxy to it.

This face is light (no torch): what the service and the CLI describe or configure, and the
workers' life cycle. The judge's side of a call, which needs torch, is `grader.sandbox.remote`:

    from grader.sandbox import Limits, WorkerPool
    from grader.sandbox.remote import open_student

    with open_student(source_text, functions=("f",)) as student:
        if student.load_error:                  # LoadError | None
            ...
        y = student.f(x)                        # runs in the worker
        y.sum().backward()                      # gradients come back from the worker

The parts: `worker/` (the program that runs inside the sandbox; `worker/contract.py` is what
both sides agree on), `remote/` (the proxy, remote autograd and calls sent ahead),
`spawn.py`, `zygote_client.py`, `handle.py` and `pool.py` (starting, holding and stopping
workers), `isolation.py` (the levels and their words), `doctor.py` (what operators are
told). The exception tree is drawn in `errors.py`.
"""

from grader.sandbox.doctor import (
    REQUIRE_ENV,
    WEAK_WARNING,
    blocked_bwrap_hint,
    check_host,
    check_required,
    doctor_report,
)
from grader.sandbox.errors import (
    LoadError,
    SandboxError,
    StudentCrash,
    StudentError,
    StudentLoadError,
    StudentTimeout,
)
from grader.sandbox.handle import WorkerHandle, describe_signal
from grader.sandbox.isolation import (
    LEVEL_ENV,
    IsolationError,
    IsolationInfo,
    Level,
    detect_isolation,
    probe,
    python_binds,
    read_only_view,
    running_as_root,
)
from grader.sandbox.output import OutputCapture
from grader.sandbox.pool import WorkerPool
from grader.sandbox.spawn import WORKER_DIR, WORKER_SCRIPT, spawn_worker
from grader.sandbox.uids import UID_LOCK_DIR, lock_uid, pids_of
from grader.sandbox.uids import slots as uid_slots
from grader.sandbox.worker.contract import (
    GIB,
    INSIDE_UID,
    KIB,
    MIB,
    WAITS,
    WORKDIR,
    Limits,
    LimitsError,
    WireClosed,
    WireError,
    WireTimeout,
)
from grader.sandbox.zygote_client import ZygoteClient, ZygoteError, zygote_possible
