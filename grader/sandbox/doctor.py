"""What the sandbox tells operators: the level a deployment requires, and `doctor`'s text.

GSPO_GRADER_SANDBOX_REQUIRE=bwrap (or rlimits) makes starting a worker fail with
IsolationError on a host that offers less; a weaker level is said loudly, with the hint for
an installed bwrap that a container's defaults block.
"""

from __future__ import annotations

import os
import shutil

from grader.sandbox.isolation import (
    IsolationError,
    IsolationInfo,
    Level,
    detect_isolation,
    running_as_root,
)
from grader.sandbox.worker.contract import Limits

REQUIRE_ENV = "GSPO_GRADER_SANDBOX_REQUIRE"


def required_level() -> Level:
    """The level GSPO_GRADER_SANDBOX_REQUIRE asks for (NONE when unset)."""
    text = os.environ.get(REQUIRE_ENV, "").strip()
    return Level.parse(text) if text else Level.NONE


def check_required(info: IsolationInfo, required: Level | None = None) -> None:
    """Raise IsolationError when the host offers less than the strict setting requires."""
    required = required_level() if required is None else required
    if info.level < required:
        why = "; ".join(info.problems) or "no stronger level was found"
        blocked = blocked_bwrap_hint(info) is not None
        raise IsolationError(
            f"sandbox isolation {required.name.lower()} is required ({REQUIRE_ENV}), "
            f"but this host offers only {info.level.name.lower()} ({why})"
            + ("; in a container, run it with the flags in docs/deploy.md" if blocked else "")
        )


def check_host() -> None:
    """IsolationError when this host offers less isolation than GSPO_GRADER_SANDBOX_REQUIRE
    asks for. With nothing required nothing can be refused, so nothing is probed here: the
    probe (a sandboxed interpreter, 70-80 ms) is left to the process that starts workers,
    which probes anyway; a cold CLI grading no longer pays it twice."""
    required = required_level()
    if required > Level.NONE:
        check_required(detect_isolation(), required)


WEAK_WARNING = (
    "WARNING: the sandbox runs on resource limits only: student code can see the network and "
    "the file system. Install bubblewrap and allow user namespaces for full isolation "
    "(docs/sandbox.md; in a container, run it with the flags in docs/deploy.md), or set "
    "GSPO_GRADER_SANDBOX_REQUIRE=bwrap to refuse to start."
)
CONTAINER_FLAGS_HINT = (
    "HINT: bwrap is installed but its probe failed ({why}). In a container the engine's "
    "defaults block it: run with --security-opt seccomp=unconfined --security-opt "
    "systempaths=unconfined (Docker) or --security-opt 'unmask=/proc/*' (podman); "
    'docs/deploy.md, "Privileges the sandbox needs inside a container", says what each allows. '
    "On a host, allow unprivileged user namespaces (docs/sandbox.md)."
)


def blocked_bwrap_hint(info: IsolationInfo) -> str | None:
    """The hint for an installed bwrap that failed its probe (what a container with the
    engine's defaults does), or None: bwrap worked, was not tried, or is not installed."""
    prefix = "bwrap: bwrap probe "
    failed = [problem for problem in info.problems if problem.startswith(prefix)]
    if info.level >= Level.BWRAP or not failed or shutil.which("bwrap") is None:
        return None
    return CONTAINER_FLAGS_HINT.format(why=failed[0].removeprefix("bwrap: "))


def doctor_report(limits: Limits | None = None) -> str:
    """Human text for `gspo-grader doctor`: level, tool, each layer on or off, limits."""
    info = detect_isolation()
    required = required_level()
    who = "root (workers drop to uid 60000+slot)" if running_as_root() else f"uid {os.geteuid()}"
    lines = [
        f"Sandbox level: {info.level.name.lower()} ({info.tool})",
        f"  {info.details}",
        f"  running as: {who}",
        f"  required level ({REQUIRE_ENV}): {required.name.lower()}"
        + ("" if info.level >= required else "  <-- NOT MET: workers will not start"),
        "Layers:",
    ]
    lines += [f"  [{'on ' if on else 'off'}] {name}" for name, on in info.layers.items()]
    lines += [WEAK_WARNING] if info.weak else []
    hint = blocked_bwrap_hint(info)
    lines += [hint] if hint else []
    lines += [f"  not available: {problem}" for problem in info.problems]
    lines.append("Limits:")
    lines += [f"  {line}" for line in (limits or Limits.from_env()).describe()]
    return "\n".join(lines)
