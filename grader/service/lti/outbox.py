"""The grade passback outbox (table lti_scores): its rows, written and read.

A row is written in the same transaction as the submission it belongs to (`row_writer`), so
a Submit that was acknowledged always has its row, and none exists for one that was not.
A drainer takes due rows with `claim`, a conditional update that only one API node wins for
a while (CLAIM_S); a node that dies while posting leaves a claim that lapses, and another
node posts the score again (the LMS keeps one score per user and line item, so twice is
harmless).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, and_, insert, select, update

from grader.service.lti.store import LtiStore, due_clause, later, stamp
from grader.service.lti.tables import (
    lti_courses,
    lti_links,
    lti_platforms,
    lti_scores,
    lti_users,
)
from grader.store import Also as Enqueue
from grader.store.schema import current_submissions as submissions

CLAIM_S = 120.0  # longer than a post can take (two requests of at most 20 s each)


@dataclass(frozen=True)
class Pending:
    """A claimed outbox row, with what posting it needs."""

    submission_id: str
    status: str  # the submission's: done or ungradable
    attempts: int
    platform_id: int
    sub: str
    lineitem: str | None
    policy: str
    user_id: int
    link_id: int


@dataclass(frozen=True)
class Graded:
    score: float
    max_score: float
    created_at: str
    finished_at: str


@dataclass(frozen=True)
class CourseRow:
    """One Submit made from a launch in a course, for the instructor's view."""

    submission_id: str
    name: str
    link_title: str
    exercise: str
    created_at: str
    status: str
    score: float | None
    max_score: float | None
    state: str
    attempts: int
    last_status: int | None
    last_error: str | None
    score_given: float | None


def row_writer(user_id: int, link_id: int) -> Enqueue:
    """Write the outbox row in the transaction of the submission it belongs to."""

    def write(c: Connection, submission_id: str) -> None:
        c.execute(
            insert(lti_scores).values(
                submission_id=submission_id,
                user_id=user_id,
                link_id=link_id,
                state="pending",
                attempts=0,
                next_attempt_at=stamp(),
                created_at=stamp(),
            )
        )

    return write


class Outbox:
    def __init__(self, store: LtiStore):
        self.store = store
        self.engine = store.engine

    def due(self, limit: int) -> list[str]:
        query = (
            select(lti_scores.c.submission_id)
            .join(submissions, submissions.c.submission_id == lti_scores.c.submission_id)
            .where(due_clause(stamp()))
            .order_by(lti_scores.c.next_attempt_at)
            .limit(limit)
        )
        with self.engine.connect() as c:
            return list(c.scalars(query))

    def claim(self, submission_id: str) -> Pending | None:
        """Take a due row for CLAIM_S; None when another drainer has it or it is not due."""
        now = stamp()
        due = (
            select(lti_scores.c.submission_id)
            .join(submissions, submissions.c.submission_id == lti_scores.c.submission_id)
            .where(due_clause(now), lti_scores.c.submission_id == submission_id)
        )
        with self.store.transaction() as c:
            taken = c.execute(
                update(lti_scores)
                .where(lti_scores.c.submission_id.in_(due.scalar_subquery()))
                .values(claimed_until=later(CLAIM_S))
            ).rowcount
            if not taken:
                return None
            row = c.execute(_pending_query(submission_id)).mappings().first()
        return Pending(**row)

    def graded(self, user_id: int, link_id: int) -> list[Graded]:
        """The user's graded (done) Submits through this link, oldest first."""
        query = (
            select(
                submissions.c.score,
                submissions.c.max_score,
                submissions.c.created_at,
                submissions.c.finished_at,
            )
            .join(lti_scores, lti_scores.c.submission_id == submissions.c.submission_id)
            .where(
                lti_scores.c.user_id == user_id,
                lti_scores.c.link_id == link_id,
                submissions.c.status == "done",
            )
            .order_by(submissions.c.created_at)
        )
        with self.engine.connect() as c:
            return [Graded(**row) for row in c.execute(query).mappings()]

    def settle(self, submission_id: str, state: str, **fields) -> None:
        """End a row: sent, skipped, refused or gave_up (with what was posted or why not)."""
        values = {"state": state, "done_at": stamp(), "claimed_until": None, **fields}
        self._update(submission_id, values)

    def retry_at(self, submission_id: str, delay_s: float, **fields) -> None:
        values = {"next_attempt_at": later(delay_s), "claimed_until": None}
        self._update(submission_id, {**values, **fields})

    def retry_failed(self, course_id: int) -> int:
        """Queue the course's refused and given-up rows again (after the LMS was fixed)."""
        mine = select(lti_links.c.link_id).where(lti_links.c.course_id == course_id)
        with self.store.transaction() as c:
            return c.execute(
                update(lti_scores)
                .where(
                    lti_scores.c.link_id.in_(mine.scalar_subquery()),
                    lti_scores.c.state.in_(("refused", "gave_up")),
                )
                .values(state="pending", attempts=0, next_attempt_at=stamp(), done_at=None)
            ).rowcount

    def course_rows(self, course_id: int) -> list[CourseRow]:
        s, o = submissions.c, lti_scores.c
        query = (
            select(
                s.submission_id,
                lti_users.c.name,
                lti_links.c.title.label("link_title"),
                s.exercise,
                s.created_at,
                s.status,
                s.score,
                s.max_score,
                o.state,
                o.attempts,
                o.last_status,
                o.last_error,
                o.score_given,
            )
            .select_from(lti_scores)
            .join(submissions, s.submission_id == o.submission_id)
            .join(lti_users, lti_users.c.user_id == o.user_id)
            .join(lti_links, lti_links.c.link_id == o.link_id)
            .where(lti_links.c.course_id == course_id)
            .order_by(s.created_at.desc())
        )
        with self.engine.connect() as c:
            return [CourseRow(**row) for row in c.execute(query).mappings()]

    def _update(self, submission_id: str, values: dict) -> None:
        with self.store.transaction() as c:
            c.execute(
                update(lti_scores)
                .where(lti_scores.c.submission_id == submission_id)
                .values(**values)
            )


def _pending_query(submission_id: str):
    o = lti_scores.c
    return (
        select(
            o.submission_id,
            submissions.c.status,
            o.attempts,
            lti_platforms.c.platform_id,
            lti_users.c.sub,
            lti_links.c.lineitem,
            lti_courses.c.policy,
            o.user_id,
            o.link_id,
        )
        .select_from(lti_scores)
        .join(submissions, submissions.c.submission_id == o.submission_id)
        .join(lti_users, lti_users.c.user_id == o.user_id)
        .join(lti_links, lti_links.c.link_id == o.link_id)
        .join(lti_courses, lti_courses.c.course_id == lti_links.c.course_id)
        .join(lti_platforms, lti_platforms.c.platform_id == lti_users.c.platform_id)
        .where(and_(o.submission_id == submission_id))
    )
