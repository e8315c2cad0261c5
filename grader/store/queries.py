"""The service's database, behind `Store`: students, submissions and their gradings, plots.

One implementation on SQLAlchemy Core serves SQLite (the embedded default) and PostgreSQL
(the distributed deployment); the schema is in schema.py and its history in migrations/.
What grading nodes do to a grading (claim, finish, requeue, heartbeats) is in jobs.py.

Admission is decided in the database, so it holds across every API node: `admit` checks the
limits of `Admission` and writes the submission with its first grading in one transaction
(PostgreSQL serialises admissions with an advisory lock, SQLite with BEGIN IMMEDIATE).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict

from sqlalchemy import Connection, and_, exists, func, insert, select, text
from sqlalchemy.exc import IntegrityError

from grader.store.courses import Courses
from grader.store.database import check_schema, open_engine, upgrade
from grader.store.jobs import LIVE, WORK_CHANNEL, Jobs, queue_regradings, queued_grading
from grader.store.records import (
    Admission,
    GradedSubmission,
    GradingRecord,
    NameTaken,
    OwnerBusy,
    PlotsWanted,
    QueueFull,
    Submission,
    SubmissionSummary,
    TooManyNames,
    ago,
    now,
)
from grader.store.schema import IN_FLIGHT, gradings, plots, students, submissions, test_verdicts

ADMISSION_LOCK = 0x6773706F  # pg_advisory_xact_lock key that serialises admissions

Also = Callable[[Connection, str], None]  # more rows for a submission's transaction (LTI's)


def artifacts_key(exercise_id: str, result: dict) -> str:
    """The plots' key: a digest of the exercise and what its plots show."""
    data = json.dumps([exercise_id, result], sort_keys=True, allow_nan=True)
    return hashlib.sha256(data.encode()).hexdigest()[:32]


PREVIEW_DATA = "artifacts.json"  # a reference preview's Artifacts, stored beside its plots


def preview_key(exercise_id: str, version: str) -> str:
    """The reference preview's key in the plots table: one per exercise version."""
    return artifacts_key(exercise_id, {"reference_preview": version})


class Store(Courses, Jobs):
    # ---- students ------------------------------------------------------------------------
    def student_key_hash(self, name: str) -> str | None:
        with self.engine.connect() as c:
            return c.scalar(select(students.c.key_hash).where(students.c.name == name))

    def create_student(self, name: str, key_hash: str, address: str | None = None) -> bool:
        """Insert the student; False when the name was taken (possibly a moment ago)."""
        try:
            with self.write() as c:
                row = {"name": name, "key_hash": key_hash, "created_at": now(), "address": address}
                c.execute(insert(students).values(**row))
        except IntegrityError:
            return False
        return True

    # ---- admission -----------------------------------------------------------------------
    def admit(
        self,
        submission: Submission,
        grading_id: str,
        admission: Admission,
        new_key_hash: str | None = None,
        address: str | None = None,
        also: Also | None = None,
    ) -> None:
        """Admit and store a submission with its queued grading, in one transaction.
        `new_key_hash`: the student is new; create it in the same transaction (NameTaken if
        another request did first), so a refused first Submit claims no name."""
        with self.write() as c:
            if self.postgres:
                c.execute(select(func.pg_advisory_xact_lock(ADMISSION_LOCK)))
            if new_key_hash is not None:
                self._claim_name(c, submission.student, new_key_hash, address, admission)
            if submission.student is not None:  # one admission per student at a time
                mine = select(students.c.name).where(students.c.name == submission.student)
                c.execute(mine.with_for_update())
            self._check_room(c, submission, admission)
            if submission.kind == "submit":
                self._check_quota(c, submission)
            c.execute(insert(submissions).values(**asdict(submission)))
            c.execute(
                insert(gradings).values(**queued_grading(grading_id, submission.submission_id))
            )
            if also is not None:
                also(c, submission.submission_id)
            self.notify(c, WORK_CHANNEL, "")

    def add_gradings(self, submission_ids: list[str], ids: list[str], current: bool) -> None:
        """Queue a new grading of each submission, below live work; `current`: it becomes
        the one the student sees at once (the earlier ones are kept)."""
        with self.write() as c:
            queue_regradings(c, zip(submission_ids, ids, strict=True), current)
            self.notify(c, WORK_CHANNEL, "")

    def _claim_name(self, c, name, key_hash, address, admission: Admission) -> None:
        if address is not None:
            recent = and_(students.c.address == address, students.c.created_at >= ago(3600))
            if (c.scalar(select(func.count()).where(recent)) or 0) >= admission.names_per_hour:
                raise TooManyNames
        try:
            with c.begin_nested():
                row = {"name": name, "key_hash": key_hash, "created_at": now(), "address": address}
                c.execute(insert(students).values(**row))
        except IntegrityError:
            raise NameTaken from None

    @staticmethod
    def _check_room(c: Connection, submission: Submission, admission: Admission) -> None:
        """QueueFull when the live queue is full (for a Run: when Runs fill their share);
        OwnerBusy when the client has its limit in flight. One statement: it runs for every
        Run and Submit."""
        g, s = gradings.c, submissions.c
        counted = g.status.in_(IN_FLIGHT) if admission.count_grading else g.status == "queued"
        mine = and_(s.client == submission.client, s.kind == submission.kind)
        query = (
            select(
                func.count().filter(counted),
                func.count().filter(and_(counted, s.kind == "run")),
                func.count().filter(mine),
            )
            .select_from(gradings.join(submissions))
            .where(g.priority == LIVE, g.status.in_(IN_FLIGHT))
        )
        total, runs, own = c.execute(query).one()
        run = submission.kind == "run"
        limit = admission.runs_per_client if run else admission.submits_per_student
        if own >= limit:
            raise OwnerBusy
        if total >= admission.capacity or (run and runs >= admission.run_capacity):
            raise QueueFull

    # ---- reading -------------------------------------------------------------------------
    def get(self, submission_id: str) -> GradedSubmission | None:
        """A submission with its current grading."""
        where = and_(submissions.c.submission_id == submission_id, gradings.c.current)
        found = self._graded(where)
        return found[0] if found else None

    def by_grading(self, grading_id: str) -> GradedSubmission | None:
        """The submission a grading (a report id) belongs to, with that grading."""
        found = self._graded(gradings.c.grading_id == grading_id)
        return found[0] if found else None

    def gradings_of(self, submission_id: str) -> list[GradingRecord]:
        """Every grading of a submission, oldest first."""
        query = select(gradings).where(gradings.c.submission_id == submission_id)
        with self.engine.connect() as c:
            rows = c.execute(query.order_by(gradings.c.queued_at)).mappings()
            return [GradingRecord(**row) for row in rows]

    def list_submissions(
        self, student: str | None = None, exercise: str | None = None
    ) -> list[SubmissionSummary]:
        """Submits with their current gradings, newest first; every student's when `student`
        is None, every exercise's likewise."""
        s, g = submissions.c, gradings.c
        query = (
            select(s.submission_id, s.student, s.exercise, s.course)
            .add_columns(s.accepted_at.label("created_at"))
            .add_columns(g.status, g.passed, g.score, g.max_score)
            .select_from(submissions.join(gradings))
            .where(s.kind == "submit", g.current)
        )
        if student is not None:
            query = query.where(s.student == student)
        if exercise is not None:
            query = query.where(s.exercise == exercise)
        query = query.order_by(s.accepted_at.desc(), s.submission_id.desc())
        with self.engine.connect() as c:
            return [SubmissionSummary(**row) for row in c.execute(query).mappings()]

    def position(self, grading: GradingRecord) -> int | None:
        """1 + the gradings queued before this one in the whole cluster; None unless queued."""
        if grading.status != "queued":
            return None
        g = gradings.c
        ahead = and_(
            g.status == "queued",
            (g.priority < grading.priority)
            | and_(g.priority == grading.priority, g.queued_at < grading.queued_at),
        )
        with self.engine.connect() as c:
            return (c.scalar(select(func.count()).where(ahead)) or 0) + 1

    def _graded(self, where) -> list[GradedSubmission]:
        columns = [*submissions.c, *(c.label(f"g_{c.name}") for c in gradings.c)]
        query = select(*columns).select_from(submissions.join(gradings)).where(where)
        with self.engine.connect() as c:
            rows = c.execute(query).mappings().all()
        out = []
        for row in rows:
            sent = Submission(**{c.name: row[c.name] for c in submissions.c})
            grading = GradingRecord(**{c.name: row[f"g_{c.name}"] for c in gradings.c})
            out.append(GradedSubmission(sent, grading))
        return out

    # ---- plots ---------------------------------------------------------------------------
    def save_plots(self, key: str, pngs: dict[str, bytes]) -> None:
        """Store a set of plot images; a set stored before (same key) is kept as it is."""
        rows = [
            {"artifacts_key": key, "name": n, "png": b, "created_at": now()}
            for n, b in pngs.items()
        ]
        try:
            with self.write() as c:
                c.execute(insert(plots), rows)
        except IntegrityError:
            pass  # another grading node drew the same toy results first

    def plot_png(self, key: str, name: str) -> bytes | None:
        where = and_(plots.c.artifacts_key == key, plots.c.name == name)
        with self.engine.connect() as c:
            return c.scalar(select(plots.c.png).where(where))

    def has_plots(self, key: str) -> bool:
        with self.engine.connect() as c:
            found = select(func.count()).where(plots.c.artifacts_key == key)
            return (c.scalar(found) or 0) > 0

    def plots_wanted(self, since: str, before: str, limit: int = 100) -> list[PlotsWanted]:
        """Gradings finished between `since` and `before` (ISO times) whose plots are not
        stored, newest first, one per plots key."""
        drawn = exists().where(plots.c.artifacts_key == gradings.c.plots_key)
        found = (
            select(submissions.c.exercise, gradings.c.plots_key, gradings.c.report_json)
            .select_from(gradings.join(submissions))
            .where(gradings.c.plots_key.is_not(None), ~drawn)
            .where(gradings.c.finished_at >= since, gradings.c.finished_at < before)
            .order_by(gradings.c.finished_at.desc())
            .limit(limit)
        )
        with self.engine.connect() as c:
            rows = c.execute(found).all()
        wanted = {key: PlotsWanted(exercise, key, report) for exercise, key, report in rows}
        return list(wanted.values())

    # ---- upkeep --------------------------------------------------------------------------
    def prune_runs(self, before: str) -> int:
        """Delete Runs accepted before `before` (ISO time) whose gradings are finished, and
        the plots that only their gradings named (`plots_key`; a set another grading names,
        or a reference preview, stays). How many Runs were deleted."""
        busy = select(gradings.c.submission_id).where(gradings.c.status.in_(IN_FLIGHT))
        old = and_(
            submissions.c.kind == "run",
            submissions.c.accepted_at < before,
            submissions.c.submission_id.not_in(busy),
        )
        with self.write() as c:
            ids = select(submissions.c.submission_id).where(old).scalar_subquery()
            doomed = gradings.c.submission_id.in_(ids)
            theirs = select(gradings.c.plots_key).where(doomed, gradings.c.plots_key.is_not(None))
            kept = exists().where(gradings.c.plots_key == plots.c.artifacts_key, ~doomed)
            only_theirs = and_(plots.c.artifacts_key.in_(theirs), ~kept)  # gradings_by_plots_key
            c.execute(plots.delete().where(only_theirs))  # while their gradings still name them
            mine = select(gradings.c.grading_id).where(doomed)
            c.execute(test_verdicts.delete().where(test_verdicts.c.grading_id.in_(mine)))
            c.execute(gradings.delete().where(doomed))
            return c.execute(submissions.delete().where(old)).rowcount

    def ping(self) -> None:
        """Raise (sqlalchemy.exc.OperationalError) unless the database answers."""
        with self.engine.connect() as c:
            c.execute(text("SELECT 1"))

    def close(self) -> None:
        self.engine.dispose()


def open_store(database_url: str, migrate: bool = False) -> Store:
    """Open the store a URL names. `migrate`: bring the schema up to date first (the
    embedded default); otherwise DatabaseError unless it is reachable and current."""
    engine = open_engine(database_url)
    try:
        if migrate:
            upgrade(engine)
        else:
            check_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine)
