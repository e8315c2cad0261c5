"""Reports for gradings that could not run normally, kept free of torch and pytest imports
so the Grader (and the CLI around it) can build them without loading either."""

from __future__ import annotations

from grader.judge.registry import TierRegistryError, load_tiers
from grader.report import GraderError, Report, SubmissionError, TierResult


def declared_tiers(mode: str = "submit", wanted: list[str] | None = None) -> list[TierResult]:
    """The tiers a grading would have reported, all at zero: keeps max_score meaningful in
    gradebooks when nothing could be graded."""
    try:
        tiers = load_tiers()
    except TierRegistryError:
        return []
    return [
        TierResult(id=t.id, title=t.title, description=t.description, passed=False,
                   visibility=t.visibility, score=0.0, max_score=t.points)
        for t in tiers
        if (wanted is None or t.id in wanted) and not (mode == "run" and t.hidden)
    ]  # fmt: skip


def with_declared_tiers(report: Report, mode: str, wanted: list[str] | None) -> Report:
    """A failure report, filled with the tiers it would have had."""
    if report.tiers:
        return report
    tiers = declared_tiers(mode, wanted)
    max_score = sum(tier.max_score for tier in tiers)
    return report.model_copy(update={"tiers": tiers, "max_score": max_score, "mode": mode})


def grader_error_report(message: str, details: list[str], report: Report | None = None) -> Report:
    """A report that blames the grader: nothing was graded, through no fault of the student."""
    base = report or Report(passed=False, score=0.0, max_score=0.0)
    error = GraderError(
        message=f"Grader error (not your code's fault): {message}.",
        detail="\n".join(details)[-4000:],
    )
    return base.model_copy(update={"passed": False, "grader_error": error})


def timeout_report(mode: str, seconds: float) -> Report:
    """The whole grading ran past its wall-clock limit and was stopped from outside."""
    error = SubmissionError(
        kind="timeout",
        message=f"The grading took longer than {seconds:g} s and was stopped. "
        "Look for a loop that never ends.",
    )
    return Report(mode=mode, passed=False, score=0.0, max_score=0.0, submission_error=error)
