"""A course's term, as pure rules: when an exercise opens and is due, the credit a Submit
earns by the moment it was accepted, extensions, the course score by policy, quotas.

    schedule = Schedule(due_at=at("2026-12-04T23:59:00+00:00"),
                        late=(LateWindow(at("2026-12-06T23:59:00+00:00"), 50.0),))
    credit_for(schedule, accepted_at)   # Credit(percent=100.0, counted=True, refused=None)

The time that counts is when the service accepted the Submit, never when grading finished.
A course is an LTI context (`lti:<course id>`) or a name given in the CLI (`default`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

DEFAULT_COURSE = "default"
AFTER = ("practice", "closed")
POLICIES = ("best", "latest")


class TermError(ValueError):
    """A schedule, extension, quota or regrade request that cannot be: the message says why."""


@dataclass(frozen=True)
class LateWindow:
    until: datetime
    credit_percent: float


@dataclass(frozen=True)
class Schedule:
    """Full credit until `due_at`, then each late window's credit until its end; after the
    last, Submits are graded as `practice` (never counted) or refused (`closed`)."""

    due_at: datetime
    opens_at: datetime | None = None
    late: tuple[LateWindow, ...] = ()
    after: str = "practice"
    policy: str = "best"  # best: the course score never decreases; latest: the last counts


@dataclass(frozen=True)
class Quota:
    submits: int
    per_seconds: int


@dataclass(frozen=True)
class Credit:
    """What a Submit accepted at a moment earns: `percent` of the exercise's maximum score,
    `counted` False for practice; `refused` says why it is not accepted at all."""

    percent: float
    counted: bool
    refused: str | None = None


FULL = Credit(100.0, True)


def at(text: str) -> datetime:
    """An ISO 8601 time with a zone; TermError otherwise."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        raise TermError(f"expected a time in ISO 8601 with a zone, got {text!r}") from None
    if moment.tzinfo is None:
        raise TermError(f"expected a time with a zone (like {text}+00:00), got {text!r}")
    return moment


def seconds_of(text: str) -> int:
    """A duration like `90s`, `30m`, `1h`, `1d` in seconds; TermError otherwise."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isdigit() or int(number) <= 0:
        raise TermError(f"expected a duration like 30m, 1h or 1d, got {text!r}")
    return int(number) * units[unit]


def check_schedule(schedule: Schedule) -> Schedule:
    """The schedule, if its times go forwards and its credits are percentages."""
    if schedule.after not in AFTER:
        raise TermError(
            f"after the last window: expected practice or closed, got {schedule.after!r}"
        )
    if schedule.policy not in POLICIES:
        raise TermError(f"policy: expected best or latest, got {schedule.policy!r}")
    if schedule.opens_at is not None and schedule.opens_at >= schedule.due_at:
        raise TermError(
            f"the exercise opens at {schedule.opens_at.isoformat()}, expected before it is due"
            f" ({schedule.due_at.isoformat()})"
        )
    previous = schedule.due_at
    for window in schedule.late:
        if not 0 <= window.credit_percent <= 100:
            raise TermError(
                f"a credit is a percentage from 0 to 100, got {window.credit_percent:g}"
            )
        if window.until <= previous:
            raise TermError(
                f"late windows must go forwards: one ends at {window.until.isoformat()},"
                f" expected after {previous.isoformat()}"
            )
        previous = window.until
    return schedule


def extended(schedule: Schedule, due_at: datetime) -> Schedule:
    """A student's schedule with a new due date: the late windows move with it."""
    shift = due_at - schedule.due_at
    late = tuple(replace(w, until=w.until + shift) for w in schedule.late)
    return replace(schedule, due_at=due_at, late=late)


def credit_for(schedule: Schedule | None, accepted_at: datetime) -> Credit:
    if schedule is None:
        return FULL
    if schedule.opens_at is not None and accepted_at < schedule.opens_at:
        return Credit(0.0, False, f"This exercise opens at {schedule.opens_at.isoformat()}.")
    if accepted_at <= schedule.due_at:
        return FULL
    for window in schedule.late:
        if accepted_at <= window.until:
            return Credit(window.credit_percent, True)
    if schedule.after == "closed":
        last = schedule.late[-1].until if schedule.late else schedule.due_at
        return Credit(0.0, False, f"This exercise closed at {last.isoformat()}.")
    return Credit(0.0, False)


def counted_span(schedule: Schedule | None) -> tuple[datetime | None, datetime | None]:
    """When a Submit counts, as credit_for decides: accepted from `opens_at` to the end of
    the last late window (or the due date), both included; None: no bound."""
    if schedule is None:
        return None, None
    return schedule.opens_at, schedule.late[-1].until if schedule.late else schedule.due_at


def credited(score: float | None, max_score: float | None, percent: float) -> float | None:
    """min(credit, raw score), the credit being a percentage of the maximum score."""
    if score is None or max_score is None:
        return None
    return min(score, max_score * percent / 100.0)


def course_score(credited_scores: list[float], policy: str) -> float | None:
    """The course score from the counted credited scores, oldest first."""
    if not credited_scores:
        return None
    return max(credited_scores) if policy == "best" else credited_scores[-1]


def quota_frees_at(accepted: list[datetime], quota: Quota, now: datetime) -> datetime | None:
    """When the next Submit frees up, or None while one is left (`accepted`: the counted
    Submits' times)."""
    window = [t for t in accepted if t > now - timedelta(seconds=quota.per_seconds)]
    if len(window) < quota.submits:
        return None
    return sorted(window)[len(window) - quota.submits] + timedelta(seconds=quota.per_seconds)


def schedule_dict(schedule: Schedule) -> dict:
    """The schedule as the API and the database write it."""
    return {
        "opens_at": schedule.opens_at.isoformat() if schedule.opens_at else None,
        "due_at": schedule.due_at.isoformat(),
        "late": [{"until": w.until.isoformat(), "credit": w.credit_percent} for w in schedule.late],
        "after": schedule.after,
        "policy": schedule.policy,
    }


def schedule_of(data: dict) -> Schedule:
    """A checked schedule from what schedule_dict writes; TermError says what is wrong."""
    try:
        late = tuple(LateWindow(at(w["until"]), float(w["credit"])) for w in data.get("late") or ())
        opens = data.get("opens_at")
        schedule = Schedule(
            due_at=at(data["due_at"]),
            opens_at=at(opens) if opens else None,
            late=late,
            after=data.get("after") or "practice",
            policy=data.get("policy") or "best",
        )
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, TermError):
            raise
        raise TermError(
            f"expected due_at and late windows with until and credit, got {data!r}"
        ) from None
    return check_schedule(schedule)
