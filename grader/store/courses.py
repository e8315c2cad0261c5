"""A course's term in the database: schedules, quotas and extensions per course and
exercise, the quota check admission makes, and regrades' previews (their gradings are
queued below live work, not current, until applied)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, and_, insert, select, update

from grader.store.jobs import WORK_CHANNEL, queue_regradings
from grader.store.records import GradedSubmission, Submission, now
from grader.store.schema import (
    course_extensions,
    course_terms,
    gradings,
    regrade_items,
    regrades,
    submissions,
)
from grader.term import (
    Quota,
    Schedule,
    TermError,
    extended,
    quota_frees_at,
    schedule_dict,
    schedule_of,
)


class QuotaUsed(Exception):
    """The student has made as many Submits in the rolling window as the quota allows."""

    def __init__(self, frees_at: datetime):
        super().__init__(frees_at.isoformat())
        self.frees_at = frees_at


@dataclass(frozen=True)
class Term:
    """An exercise's term in a course, as stored (None: not set)."""

    course: str
    exercise: str
    schedule: Schedule | None
    quota: Quota | None
    suggested_due_at: str | None  # an LMS line item's end date, offered as the due date
    extensions: dict[str, datetime]  # student -> due date

    def schedule_for(self, student: str | None) -> Schedule | None:
        due = self.extensions.get(student or "")
        return extended(self.schedule, due) if self.schedule and due else self.schedule


@dataclass(frozen=True)
class RegradeItem:
    submission_id: str
    old_grading_id: str
    new_grading_id: str
    note: str | None


@dataclass(frozen=True)
class Regrade:
    preview_id: str
    course: str
    exercise: str
    state: str  # preview, applied, rolled_back
    created_at: str
    applied_at: str | None
    items: tuple[RegradeItem, ...]


def _key(course: str, exercise: str):
    return and_(course_terms.c.course == course, course_terms.c.exercise == exercise)


class Courses:
    """Mixed into Store (it gives `engine`, `write` and `notify`)."""

    def term(self, course: str, exercise: str) -> Term:
        e = course_extensions.c
        with self.engine.connect() as c:
            row = c.execute(select(course_terms).where(_key(course, exercise))).mappings().first()
            ext = c.execute(
                select(e.student, e.due_at).where(e.course == course, e.exercise == exercise)
            ).all()
        extensions = {student: datetime.fromisoformat(due) for student, due in ext}
        if row is None:
            return Term(course, exercise, None, None, None, extensions)
        schedule = schedule_of(json.loads(row.schedule_json)) if row.schedule_json else None
        quota = Quota(row.quota_submits, row.quota_per_seconds) if row.quota_submits else None
        return Term(course, exercise, schedule, quota, row.suggested_due_at, extensions)

    def terms_of(self, exercise: str) -> list[Term]:
        """The exercise's term in every course that set one (or extended a student)."""
        t, e = course_terms.c, course_extensions.c
        with self.engine.connect() as c:
            courses = set(c.scalars(select(t.course).where(t.exercise == exercise)))
            courses |= set(c.scalars(select(e.course).where(e.exercise == exercise)))
        return [self.term(course, exercise) for course in sorted(courses)]

    def set_term(self, course: str, exercise: str, values: dict) -> None:
        """Write a term's columns (schedule: a Schedule; quota: a Quota or None)."""
        values = dict(values)
        if "schedule" in values:
            values["schedule_json"] = json.dumps(schedule_dict(values.pop("schedule")))
        if "quota" in values:
            quota = values.pop("quota")
            values["quota_submits"] = quota.submits if quota else None
            values["quota_per_seconds"] = quota.per_seconds if quota else None
        with self.write() as c:
            if not c.execute(
                update(course_terms).where(_key(course, exercise)).values(**values)
            ).rowcount:
                c.execute(insert(course_terms).values(course=course, exercise=exercise, **values))

    def set_extension(self, course: str, exercise: str, student: str, due_at: datetime) -> None:
        if self.student_key_hash(student) is None:
            raise TermError(
                f"there is no student named {student!r}; expected one who has submitted"
            )
        e = course_extensions.c
        mine = and_(e.course == course, e.exercise == exercise, e.student == student)
        with self.write() as c:
            c.execute(course_extensions.delete().where(mine))
            row = {"course": course, "exercise": exercise, "student": student}
            c.execute(insert(course_extensions).values(**row, due_at=due_at.isoformat()))

    def _check_quota(self, c: Connection, submission: Submission) -> None:
        """QuotaUsed when the student's counted Submits fill the course's quota."""
        found = c.execute(
            select(course_terms.c.quota_submits, course_terms.c.quota_per_seconds).where(
                _key(submission.course, submission.exercise)
            )
        ).first()
        if found is None or not found.quota_submits:
            return
        quota = Quota(*found)
        sent = (submission.course, submission.exercise, submission.student)
        frees = quota_frees_at(self.quota_times(*sent, quota, c), quota, datetime.now(UTC))
        if frees is not None:
            raise QuotaUsed(frees)

    def quota_times(self, course, exercise, student, quota: Quota, c=None) -> list[datetime]:
        """When the student's Submits inside the quota's window were accepted (an
        ungradable grading, the grader's fault, never counts)."""
        s, g = submissions.c, gradings.c
        since = (datetime.now(UTC) - timedelta(seconds=quota.per_seconds)).isoformat()
        query = (
            select(s.accepted_at)
            .select_from(submissions.join(gradings))
            .where(s.student == student, s.kind == "submit", s.course == course)
            .where(s.exercise == exercise, s.accepted_at > since)
            .where(g.current, g.status != "ungradable")
        )
        if c is not None:
            return [datetime.fromisoformat(t) for t in c.scalars(query)]
        with self.engine.connect() as c:
            return [datetime.fromisoformat(t) for t in c.scalars(query)]

    # ---- regrades ------------------------------------------------------------------------
    def submits_of(self, course: str, exercise: str) -> list[GradedSubmission]:
        """Every Submit of an exercise in a course with its current grading, oldest first."""
        s = submissions.c
        found = self._graded(
            and_(s.kind == "submit", s.course == course, s.exercise == exercise, gradings.c.current)
        )
        return sorted(found, key=lambda g: g.submission.accepted_at)

    def add_preview(self, regrade: Regrade) -> None:
        """Store a preview and queue its gradings (not current, below live work)."""
        with self.write() as c:
            row = {k: getattr(regrade, k) for k in ("preview_id", "course", "exercise", "state")}
            c.execute(insert(regrades).values(**row, created_at=regrade.created_at))
            for item in regrade.items:
                c.execute(
                    insert(regrade_items).values(preview_id=regrade.preview_id, **item.__dict__)
                )
            queue_regradings(c, [(i.submission_id, i.new_grading_id) for i in regrade.items])
            self.notify(c, WORK_CHANNEL, "")

    def regrade(self, preview_id: str) -> Regrade | None:
        with self.engine.connect() as c:
            row = c.execute(select(regrades).where(regrades.c.preview_id == preview_id)).first()
            if row is None:
                return None
            items = c.execute(
                select(regrade_items).where(regrade_items.c.preview_id == preview_id)
            ).mappings()
            found = tuple(
                RegradeItem(**{k: v for k, v in i.items() if k != "preview_id"}) for i in items
            )
        return Regrade(*row, items=found)

    def last_applied(self, course: str, exercise: str) -> str | None:
        r = regrades.c
        query = (
            select(r.preview_id)
            .where(r.course == course, r.exercise == exercise, r.state == "applied")
            .order_by(r.applied_at.desc())
            .limit(1)
        )
        with self.engine.connect() as c:
            return c.scalar(query)

    def swap(
        self, preview_id: str, state: str, current: dict[str, str], notes: dict[str, str]
    ) -> None:
        """Make `current` (submission -> grading) the current gradings, the regrade's state
        `state` and its items' notes `notes`, in one transaction; TermError if the regrade
        changed state meanwhile (a second apply)."""
        expected = "preview" if state == "applied" else "applied"
        with self.write() as c:
            r = regrades.c
            moved = c.execute(
                update(regrades)
                .where(r.preview_id == preview_id, r.state == expected)
                .values(state=state, applied_at=now())
            ).rowcount
            if not moved:
                raise TermError(f"regrade {preview_id} is no longer a {expected} regrade")
            for submission_id, grading_id in current.items():
                g = gradings.c
                c.execute(
                    update(gradings).where(g.submission_id == submission_id).values(current=False)
                )
                c.execute(update(gradings).where(g.grading_id == grading_id).values(current=True))
            i = regrade_items.c
            for submission_id, note in notes.items():
                mine = and_(i.preview_id == preview_id, i.submission_id == submission_id)
                c.execute(update(regrade_items).where(mine).values(note=note))

    def notes_of(self, submission_ids: list[str]) -> dict[str, str]:
        """Each submission's latest regrade note (applied or rolled back regrades)."""
        i, r = regrade_items.c, regrades.c
        query = (
            select(i.submission_id, i.note)
            .select_from(regrade_items.join(regrades))
            .where(i.submission_id.in_(submission_ids), i.note.is_not(None))
            .order_by(r.applied_at)
        )
        with self.engine.connect() as c:
            return dict(c.execute(query).all()) if submission_ids else {}
