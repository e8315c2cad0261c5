"""The numbers of a class on one exercise, counted in the database (one query each).

Each student's *counted* submission is one of their graded Submits that counts (practice
Submits, accepted after the last late window of their course's schedule, and anonymous Runs
never do): the latest, or under the `best` policy the highest score (the latest of equals);
their *first* is the earliest such one. Tests' verdicts come from `test_verdicts` (written
with each report), so nothing here reads a report; a grading older than that table has no
rows and is left out of test counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, and_, case, func, literal, not_, or_, select

from grader.store.courses import Term
from grader.store.schema import gradings, submissions, test_verdicts
from grader.term import counted_span

STUCK_TRIES = 5  # a student with at least this many graded Submits...
STUCK_SINCE = 3  # ...whose best score has not risen in this many, and who has not passed


@dataclass(frozen=True)
class TestCount:
    __test__ = False  # not a pytest class

    test_id: str
    failing_now: int  # counted submissions that fail it
    counted: int  # counted submissions with a verdict on it
    failing_first: int
    first: int


@dataclass(frozen=True)
class Stuck:
    student: str
    submissions: int
    best_score: float
    max_score: float
    since_best: int  # graded Submits after the first that reached the best score


@dataclass(frozen=True)
class Counted:
    """A student's counted submission."""

    student: str
    submission_id: str
    tries: int  # graded Submits
    score: float
    max_score: float
    passed: bool


@dataclass(frozen=True)
class Span:
    """When a Submit counts, as ISO text in UTC like `accepted_at` (None: no bound)."""

    opens_at: str | None
    ends_at: str | None


Spans = dict[tuple[str, str | None], Span]  # (course, None) or (course, extended student)


def spans_of(terms: list[Term]) -> Spans:
    """Each course's counted span from its schedule, and each extended student's."""

    def text(moment: datetime | None) -> str | None:
        return moment.astimezone(UTC).isoformat(timespec="microseconds") if moment else None

    spans: Spans = {}
    for term in terms:
        for student in (None, *sorted(term.extensions)):
            schedule = term.schedule_for(student)
            if schedule is not None:
                spans[term.course, student] = Span(*map(text, counted_span(schedule)))
    return spans


@dataclass(frozen=True)
class ClassCounts:
    students: int  # with a Submit, graded or not, counted or not
    submissions: int  # Submits, practice included
    practice: int  # Submits that never count (accepted outside the schedule's span)
    counted: list[Counted]  # one per student with a graded Submit, by name
    latest_report: str | None  # the newest counted report (for the tests' names)
    timeline: list[tuple[str, int]]  # (UTC day, Submits accepted)
    tests: list[TestCount]
    failing: dict[str, tuple[str, frozenset[str]]]  # student -> (submission, failing tests)
    stuck: list[Stuck]


def _scope(exercise: str, course: str | None) -> list:
    s = submissions.c
    where = [s.exercise == exercise, s.kind == "submit"]
    if course is not None and "course" in s:
        where.append(s.course == course)
    return where


def _counts(spans: Spans) -> list:
    """The conditions that a Submit counts, by its course's (or its student's) span."""
    s = submissions.c
    opens, ends = [], []
    for (course, student), span in sorted(spans.items(), key=lambda kv: kv[0][1] is None):
        who = s.course == course
        if student is not None:  # an extended student's span comes before the course's
            who = and_(who, s.student == student)
        opens.append((who, span.opens_at))
        ends.append((who, span.ends_at))
    where = []
    if any(moment for _, moment in opens):
        moment = case(*opens, else_=None)
        where.append(or_(moment.is_(None), s.accepted_at >= moment))
    if any(moment for _, moment in ends):
        moment = case(*ends, else_=None)
        where.append(or_(moment.is_(None), s.accepted_at <= moment))
    return where


def _graded(exercise: str, course: str | None, policy: str, spans: Spans):
    s, g = submissions.c, gradings.c
    best = (g.score.desc(), s.accepted_at.desc())
    order = best if policy == "best" else (s.accepted_at.desc(),)
    by_student = {"partition_by": s.student}
    columns = (s.student, s.submission_id, g.grading_id, g.score, g.max_score, g.passed)
    return (
        select(*columns, s.accepted_at)
        .add_columns(func.row_number().over(**by_student, order_by=order).label("pick"))
        .add_columns(func.row_number().over(**by_student, order_by=s.accepted_at).label("nth"))
        .add_columns(func.max(g.score).over(**by_student).label("best"))
        .select_from(submissions.join(gradings))
        .where(*_scope(exercise, course), *_counts(spans), g.current, g.status == "done")
        .subquery("graded")
    )


def _total(cond):
    return func.sum(case((cond, 1), else_=0))


def _per_student(exercise: str, course: str | None, policy: str, spans: Spans):
    """One row per student with a counted graded Submit, in one pass over their Submits."""
    r = _graded(exercise, course, policy, spans).c
    counted = r.pick == 1

    def of_counted(column):
        return func.max(case((counted, column)))

    return (
        select(r.student, of_counted(r.submission_id), func.count(), of_counted(r.score))
        .add_columns(of_counted(r.max_score), _total(and_(counted, r.passed)))
        .add_columns(of_counted(r.grading_id), func.max(case((r.nth == 1, r.grading_id))))
        .add_columns(of_counted(r.accepted_at), func.max(r.best))
        .add_columns(func.min(case((r.score == r.best, r.nth))))
        .group_by(r.student)
        .order_by(r.student)
    )


def class_counts(
    engine: Engine, exercise: str, course: str | None, policy: str, spans: Spans
) -> ClassCounts:
    """`spans`: when Submits count, per course (spans_of the courses' terms)."""
    s, v = submissions.c, test_verdicts.c
    scope = _scope(exercise, course)
    day = func.substr(s.accepted_at, 1, 10)
    counts = _counts(spans)
    practice = _total(not_(and_(*counts))) if counts else literal(0)
    with engine.connect() as c:
        students, sent, outside = c.execute(
            select(func.count(s.student.distinct()), func.count(), practice).where(*scope)
        ).one()
        timeline = c.execute(select(day, func.count()).where(*scope).group_by(day).order_by(day))
        timeline = [(d, n) for d, n in timeline]
        rows = c.execute(_per_student(exercise, course, policy, spans)).all()
        counted = [Counted(*row[:5], bool(row[5])) for row in rows]
        now_ids = [row[6] for row in rows]
        first_ids = [row[7] for row in rows]
        stuck = [
            Stuck(row[0], row[2], row[9], row[4], row[2] - row[10])
            for row in rows
            if row[2] >= STUCK_TRIES and row[2] - row[10] >= STUCK_SINCE and not row[5]
        ]
        stuck.sort(key=lambda one: (-one.since_best, one.student))
        newest = max(rows, key=lambda row: row[8], default=None)
        latest_report = None
        if newest is not None:
            where = gradings.c.grading_id == newest[6]
            latest_report = c.scalar(select(gradings.c.report_json).where(where))
        tests: dict[str, list[int]] = {}
        for half, ids in enumerate((now_ids, first_ids)):
            query = (
                select(v.test_id, _total(~v.passed), func.count())
                .where(v.grading_id.in_(ids))
                .group_by(v.test_id)
            )
            for test_id, failing, total in c.execute(query):
                tests.setdefault(test_id, [0, 0, 0, 0])[2 * half : 2 * half + 2] = failing, total
        failing: dict[str, tuple[str, set[str]]] = {}
        who = {row[6]: (row[0], row[1]) for row in rows}
        fails = select(v.grading_id, v.test_id).where(v.grading_id.in_(now_ids), ~v.passed)
        for grading_id, test_id in c.execute(fails):
            student, submission_id = who[grading_id]
            failing.setdefault(student, (submission_id, set()))[1].add(test_id)
    return ClassCounts(
        students=students,
        submissions=sent,
        practice=outside or 0,
        counted=counted,
        latest_report=latest_report,
        timeline=timeline,
        tests=[TestCount(t, *counts) for t, counts in sorted(tests.items())],
        failing={k: (sid, frozenset(t)) for k, (sid, t) in failing.items()},
        stuck=stuck,
    )
