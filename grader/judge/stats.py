"""What one grading cost the grader: counters for operators, never part of the student's report.

A `Grader(on_stats=callback)` calls `callback(report, stats)` after each grading it ran in a
judge. The service exposes the sums as Prometheus counters, named in `COUNTERS`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class GradingStats:
    """Counters of one grading (all zero for one that could not run in a judge)."""

    judge_cpu_seconds: float = 0.0  # the judge process, collecting its session included
    sessions_collected: int = 0  # 1: the grading collected its pytest session; 0: it reused one
    worker_cpu_seconds: float = 0.0  # the sandboxed workers, as their replies said
    student_calls: int = 0  # calls of the student's functions that the tier tests made
    calls_sent_ahead: int = 0  # of them, sent before the test asked (forecast.py)
    calls_answered_ahead: int = 0  # of them, answered by a reply already on the way
    requests: int = 0  # requests sent to a worker: loading and calls sent ahead included
    round_trips: int = 0  # of them, those the judge then waited for (not answered ahead)
    sandbox_restarts: int = 0  # workers started again after a crash or timeout
    tier_tests: int = 0  # tier tests the grading selected

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> GradingStats:
        """The stats a judge sent; unknown names are ignored, missing ones are zero."""
        known = {field.name for field in fields(cls)}
        return cls(**{name: value for name, value in values.items() if name in known})


# GradingStats field -> the Prometheus counter that sums it over gradings
COUNTERS = {
    "judge_cpu_seconds": "gspo_grader_judge_cpu_seconds_total",
    "sessions_collected": "gspo_grader_sessions_collected_total",
    "worker_cpu_seconds": "gspo_grader_worker_cpu_seconds_total",
    "student_calls": "gspo_grader_student_calls_total",
    "calls_answered_ahead": "gspo_grader_calls_answered_ahead_total",
    "round_trips": "gspo_grader_round_trips_total",
    "tier_tests": "gspo_grader_tier_tests_total",
}
