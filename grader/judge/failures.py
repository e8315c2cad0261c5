"""Reports for gradings that could not run normally, kept free of torch and pytest imports
so the Grader (and the CLI and service around it) can build them without loading either.

Each is built whole, once: the tiers it would have had (at zero, so gradebooks keep their
maximum), and the error that says whose fault it was.
"""

from __future__ import annotations

from grader.exercise import Exercise
from grader.judge.registry import TierRegistryError, load_tiers, runs
from grader.report import GraderError, Report, SubmissionError, TierResult


def declared_tiers(exercise: Exercise, mode: str, wanted: list[str] | None) -> list[TierResult]:
    """The tiers a grading would have reported, all at zero."""
    try:
        tiers = load_tiers(exercise.tiers_file)
    except TierRegistryError:
        return []
    return [
        TierResult(id=t.id, title=t.title, description=t.description, passed=False,
                   visibility=t.visibility, score=0.0, max_score=t.points)
        for t in tiers
        if runs(t, False, mode, wanted)
    ]  # fmt: skip


def failed_report(
    exercise: Exercise,
    mode: str,
    wanted: list[str] | None,
    name: str | None,
    *,
    grader_error: GraderError | None = None,
    submission_error: SubmissionError | None = None,
) -> Report:
    """Nothing was graded: the declared tiers at zero, and why."""
    tiers = declared_tiers(exercise, mode, wanted)
    return Report(
        exercise=exercise.id,
        mode=mode,
        submission=name,
        passed=False,
        score=0.0,
        max_score=sum(tier.max_score for tier in tiers),
        tiers=tiers,
        grader_error=grader_error,
        submission_error=submission_error,
    )


def grader_error(message: str, details: list[str]) -> GraderError:
    """Our fault, said plainly: nothing was graded, through no fault of the student."""
    return GraderError(
        message=f"Grader error (not your code's fault): {message}.",
        detail="\n".join(details)[-4000:],
    )


def grading_timeout(seconds: float) -> SubmissionError:
    """The whole grading ran past its wall-clock limit and was stopped from outside."""
    return SubmissionError(
        kind="timeout",
        message=f"The grading took longer than {seconds:g} s and was stopped. "
        "Look for a loop that never ends.",
    )
