"""The numbers of a class on one exercise, counted in the database (one query each).

Each student's *counted* submission is one of their graded Submits: the latest, or under the
`best` policy the highest score (the latest of equals); their *first* is the earliest graded
one. Tests' verdicts come from `test_verdicts` (written with each report), so nothing here
reads a report; a grading older than that table has no rows and is left out of test counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, and_, case, func, select

from grader.store.schema import gradings, submissions, test_verdicts

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
class ClassCounts:
    students: int  # with a Submit, graded or not
    submissions: int
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


def _graded(exercise: str, course: str | None, policy: str):
    s, g = submissions.c, gradings.c
    best = (g.score.desc(), s.accepted_at.desc())
    order = best if policy == "best" else (s.accepted_at.desc(),)
    by_student = {"partition_by": s.student}
    columns = (s.student, s.submission_id, g.grading_id, g.score, g.max_score, g.passed)
    return (
        select(*columns, s.accepted_at)
        .add_columns(func.row_number().over(**by_student, order_by=order).label("pick"))
        .add_columns(func.row_number().over(**by_student, order_by=s.accepted_at).label("nth"))
        .add_columns(func.count().over(**by_student).label("tries"))
        .select_from(submissions.join(gradings))
        .where(*_scope(exercise, course), g.current, g.status == "done")
        .subquery("graded")
    )


def class_counts(engine: Engine, exercise: str, course: str | None, policy: str) -> ClassCounts:
    s, v = submissions.c, test_verdicts.c
    graded = _graded(exercise, course, policy)
    r = graded.c
    counted = r.pick == 1
    scope = _scope(exercise, course)
    fails = ~v.passed

    def total(cond):
        return func.sum(case((cond, 1), else_=0))

    with engine.connect() as c:
        students, sent = c.execute(
            select(func.count(s.student.distinct()), func.count()).where(*scope)
        ).one()
        picked = (r.student, r.submission_id, r.tries, r.score, r.max_score, r.passed)
        rows = c.execute(select(*picked).where(counted).order_by(r.student))
        counted_rows = [Counted(*row) for row in rows]
        newest = select(gradings.c.report_json).join(graded, r.grading_id == gradings.c.grading_id)
        newest = newest.where(counted).order_by(r.accepted_at.desc()).limit(1)
        latest_report = c.scalar(newest)
        day = func.substr(s.accepted_at, 1, 10)
        timeline = c.execute(select(day, func.count()).where(*scope).group_by(day).order_by(day))
        tests = c.execute(
            select(v.test_id, total(and_(counted, fails)), total(counted))
            .add_columns(total(and_(r.nth == 1, fails)), total(r.nth == 1))
            .select_from(graded.join(test_verdicts, v.grading_id == r.grading_id))
            .where((r.pick == 1) | (r.nth == 1))
            .group_by(v.test_id)
            .order_by(v.test_id)
        )
        tests = [TestCount(*row) for row in tests]
        failing: dict[str, tuple[str, set[str]]] = {}
        rows = c.execute(
            select(r.student, r.submission_id, v.test_id)
            .select_from(graded.join(test_verdicts, v.grading_id == r.grading_id))
            .where(counted, fails)
        )
        for student, submission_id, test_id in rows:
            failing.setdefault(student, (submission_id, set()))[1].add(test_id)
        stuck = _stuck(c, graded)
    return ClassCounts(
        students=students,
        submissions=sent,
        counted=counted_rows,
        latest_report=latest_report,
        timeline=[(d, n) for d, n in timeline],
        tests=tests,
        failing={k: (sid, frozenset(t)) for k, (sid, t) in failing.items()},
        stuck=stuck,
    )


def _stuck(c, graded) -> list[Stuck]:
    r = graded.c
    per = (
        select(r.student, func.count().label("tries"), func.max(r.score).label("best"))
        .add_columns(func.max(r.max_score).label("top"))
        .add_columns(func.max(case((r.passed, 1), else_=0)).label("ok"))
        .group_by(r.student)
        .subquery("per")
    )
    p = per.c
    reached = func.min(r.nth)
    query = (
        select(p.student, p.tries, p.best, p.top, (p.tries - reached).label("since"))
        .select_from(per.join(graded, and_(r.student == p.student, r.score == p.best)))
        .where(p.tries >= STUCK_TRIES, p.ok == 0)
        .group_by(p.student, p.tries, p.best, p.top)
        .having(p.tries - reached >= STUCK_SINCE)
        .order_by((p.tries - reached).desc(), p.student)
    )
    return [Stuck(*row) for row in c.execute(query)]
