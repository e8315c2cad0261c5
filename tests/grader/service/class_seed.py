"""Seeds a class into a store through its public face: students' Submits, each graded
with a given report (claimed and finished as a grading node would)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from grader.report import Report, TestResult, TierResult
from grader.store import Admission, GradingResult, Store, Submission

ROOM = Admission(capacity=10**6, run_capacity=10**6, submits_per_student=10**6)
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def report_of(exercise: str, outcomes: dict[str, str], max_score: float = 10.0) -> Report:
    """A report with one tier whose tests have these outcomes; the score counts passes."""
    tests = [TestResult(id=i, name=f"name of {i}", outcome=o) for i, o in outcomes.items()]
    passes = sum(o == "passed" for o in outcomes.values())
    score = max_score * passes / max(len(tests), 1)
    ok = passes == len(tests)
    tier = TierResult(id="T1", title="T1", passed=ok, score=score, max_score=max_score,
                      tests=tests)  # fmt: skip
    return Report(exercise=exercise, passed=ok, score=score, max_score=max_score, tiers=[tier])


def seed(store: Store, student: str, report: Report, minutes: int, code: str = "") -> str:
    """A Submit of `student`, accepted `minutes` after START and graded with `report`."""
    submission_id = secrets.token_hex(16)
    at = (START + timedelta(minutes=minutes)).isoformat()
    new = None if store.student_key_hash(student) else "key-hash"
    sent = Submission(submission_id, "submit", student, student, report.exercise,
                      code or f"# {student}'s code", at)  # fmt: skip
    store.admit(sent, secrets.token_hex(16), ROOM, new_key_hash=new)
    job = store.claim("seeder")
    verdict = GradingResult(report.model_dump_json(), report.score, report.max_score, report.passed)
    store.finish(job.grading_id, verdict)
    return submission_id
