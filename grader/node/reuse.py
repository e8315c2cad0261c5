"""A verdict reused: a live grading of code already graded takes the earlier report.

    reuse = VerdictReuse(limits)                 # a node's, built once
    key = reuse.key(job, version)                # None: this grading reuses nothing
    if reuse.reusable(report): ...               # may a later grading take this report?

Two gradings share a key when they would run the same tiers on the same bytes, under the same
judge: the same course, exercise version, mode, code (byte for byte), sandbox limits and
grader build (every file of the `grader` package, torch's and Python's versions). The tiers'
inputs are seeded, so such a grading gives the same report; a node that finds a finished
grading with its key writes that report under its own submission's name, and runs nothing.

Who gains: the starter submitted untouched, a Submit pressed twice on unchanged code, a class's
copies of one file. A reused verdict is counted, scored, kept and passed back like any other.

Never reused, and never reused from:
- a regrading: it exists to run the tiers again (an instructor's regrade, after an edit or not);
- a report that a loaded machine could have made: a timeout, a crash, a memory limit
  (SubmissionError kinds), or any grader error. Code graded so is graded again next time;
- another course's gradings: the key holds the course, so how fast a verdict comes tells a
  student nothing about other courses' code.
"""

from __future__ import annotations

import hashlib
import json
import sys
from functools import cache
from importlib import metadata
from pathlib import Path

from grader.exercise import files_digest
from grader.report import Report
from grader.sandbox import Limits
from grader.store import Job

LOAD_DEPENDENT = ("timeout", "crash", "memory_limit")  # SubmissionError kinds never reused


@cache
def grader_build() -> str:
    """A digest of the grader's own code and the versions it runs on: a deploy of another
    grader (a fixed verdict, say) reuses nothing graded before it."""
    package = Path(__file__).resolve().parent.parent
    versions = f"{sys.version}\0{metadata.version('torch')}\0"
    return files_digest(package, sorted(package.rglob("*.py")), salt=versions)


class VerdictReuse:
    """The keys of one node's gradings (its sandbox limits fixed)."""

    def __init__(self, limits: Limits) -> None:
        self._judge = json.dumps([grader_build(), limits.as_dict()], sort_keys=True)

    def key(self, job: Job, version: str | None) -> str | None:
        """The grading's key; None for a regrading, or an exercise not in the catalog."""
        if not job.live or version is None:
            return None
        fields = [self._judge, job.course, job.exercise, version, job.kind, job.code]
        return hashlib.sha256(json.dumps(fields).encode()).hexdigest()

    @staticmethod
    def reusable(report: Report) -> bool:
        """True when the report depends on the code alone, not on the machine's load."""
        error = report.submission_error
        return report.grader_error is None and (error is None or error.kind not in LOAD_DEPENDENT)
