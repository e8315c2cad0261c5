"""The service's database, behind `Store`: students, submissions, Run reports and plots.

One implementation on SQLAlchemy Core serves SQLite (the embedded default) and PostgreSQL
(the distributed deployment); the schema is in tables.py and its history in migrations/.

What the database enforces, so that it holds across every API node:
  - admission: a Submit or Run is refused (QueueFull) while `max_waiting` gradings wait in
    the whole cluster, and a Submit (OwnerBusy) while the student already has
    `max_per_student` in flight; both are checked and the row written in one transaction,
    together with the queue's job when the queue lives in the same database;
  - the verdict is written once: `finish` changes a row only while it is still in flight,
    so a second attempt that finishes late changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields

from sqlalchemy import Connection, Engine, and_, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from grader.service.database import check_schema, is_postgres, open_engine, upgrade
from grader.service.records import (
    Admission,
    NameTaken,
    OwnerBusy,
    QueueFull,
    RunRecord,
    Submission,
    SubmissionSummary,
    Verdict,
    now,
)
from grader.service.tables import IN_FLIGHT, plots, runs, students, submissions

VERDICT_CHANNEL = "gspo_grader_verdicts"  # NOTIFY payload: "<kind>:<id>" once finished
ADMISSION_LOCK = 0x6773706F  # pg_advisory_xact_lock key that serialises admissions
ORPHAN_LOCK = 0x67737070  # ... and the adoption of orphaned jobs by grading nodes

Enqueue = Callable[[Connection], None]  # writes the queue's job inside the row's transaction


JOBS = {  # kind -> (table, id column, record type)
    "submission": (submissions, submissions.c.submission_id, Submission),
    "run": (runs, runs.c.report_id, RunRecord),
}


class Store:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"

    # ---- students ------------------------------------------------------------------------
    def student_key_hash(self, name: str) -> str | None:
        with self.engine.connect() as c:
            return c.scalar(select(students.c.key_hash).where(students.c.name == name))

    def create_student(self, name: str, key_hash: str, created_at: str) -> bool:
        """Insert the student; False when the name was taken (possibly a moment ago)."""
        try:
            with self._write() as c:
                c.execute(
                    insert(students).values(name=name, key_hash=key_hash, created_at=created_at)
                )
        except IntegrityError:
            return False
        return True

    # ---- queueing and finishing ----------------------------------------------------------
    def add_submission(self, submission: Submission) -> None:
        """Insert a row as it is (no admission check)."""
        with self._write() as c:
            c.execute(insert(submissions).values(**_values(submission)))

    def queue_submission(
        self,
        submission: Submission,
        admission: Admission,
        enqueue: Enqueue | None = None,
        new_key_hash: str | None = None,
    ) -> None:
        """Admit and insert a queued submission, and its job, in one transaction.
        `new_key_hash`: the student is new; create it in the same transaction (NameTaken
        if another request did first), so a refused first Submit claims no name."""
        with self._write() as c:
            self._lock_admissions(c)
            if new_key_hash is not None:
                self._claim(c, submission.student, new_key_hash)
            lock = select(students.c.name).where(students.c.name == submission.student)
            c.execute(lock.with_for_update())  # one admission per student at a time
            mine = _count(c, submissions, submissions.c.student == submission.student)
            if mine >= admission.max_per_student:
                raise OwnerBusy
            self._check_room(c, admission)
            c.execute(insert(submissions).values(**_values(submission)))
            if enqueue is not None:
                enqueue(c)

    def queue_run(
        self, run: RunRecord, admission: Admission, enqueue: Enqueue | None = None
    ) -> None:
        with self._write() as c:
            self._lock_admissions(c)
            self._check_room(c, admission)
            c.execute(insert(runs).values(**_values(run)))
            if enqueue is not None:
                enqueue(c)

    def enqueue(self, enqueue: Enqueue) -> None:
        """Write a queue job in a transaction of its own."""
        with self._write() as c:
            enqueue(c)

    def start_attempt(self, kind: str, job_id: str) -> Submission | RunRecord | None:
        """Mark a job grading and count the attempt; None when it is finished already."""
        table, key, record = JOBS[kind]
        with self._write() as c:
            row = (
                c.execute(
                    update(table)
                    .where(key == job_id, table.c.status.in_(IN_FLIGHT))
                    .values(status="grading", attempts=table.c.attempts + 1)
                    .returning(*table.c)
                )
                .mappings()
                .first()
            )
        return record(**row) if row else None

    def requeue(self, kind: str, job_id: str, enqueue: Enqueue | None = None) -> bool:
        """Back to queued, for another attempt (the attempts count stays), with the new
        queue job in the same transaction; False if it was not grading."""
        table, key, _ = JOBS[kind]
        with self._write() as c:
            query = update(table).where(key == job_id, table.c.status == "grading")
            changed = bool(c.execute(query.values(status="queued")).rowcount)
            if changed and enqueue is not None:
                enqueue(c)
        return changed

    def orphans(self, task_name: str) -> list[tuple[str, str]]:
        """(kind, id) of jobs in flight that no procrastinate job waits for or runs: their
        task failed on the database (it went away mid-grading). PostgreSQL only."""
        found = []
        with self.engine.connect() as c:
            for kind, (table, key, _) in JOBS.items():
                none = _no_live_job(task_name, key)
                query = select(key).where(table.c.status.in_(IN_FLIGHT), none)
                found += [(kind, row[0]) for row in c.execute(query)]
        return found

    def adopt(self, kind: str, job_id: str, task_name: str, enqueue: Enqueue) -> bool:
        """Queue an orphan again (one grading node does, under a lock); False if it is no
        longer an orphan."""
        table, key, _ = JOBS[kind]
        with self._write() as c:
            c.execute(select(func.pg_advisory_xact_lock(ORPHAN_LOCK)))
            none = _no_live_job(task_name, key)
            still = and_(key == job_id, table.c.status.in_(IN_FLIGHT), none)
            if not c.execute(update(table).where(still).values(status="queued")).rowcount:
                return False
            enqueue(c)
        return True

    def finish(
        self, kind: str, job_id: str, verdict: Verdict, enqueue: Enqueue | None = None
    ) -> bool:
        """Write the verdict once: True if this call wrote it, False if it was written before.
        `enqueue` writes a follow-up job in the same transaction (only if this call wrote)."""
        table, key, _ = JOBS[kind]
        values = {"report_json": verdict.report_json, "finished_at": now()}
        values["status"] = "done" if verdict.score is not None else "ungradable"
        if kind == "submission":
            values |= {
                "score": verdict.score,
                "max_score": verdict.max_score,
                "passed": verdict.passed,
            }
        with self._write() as c:
            changed = c.execute(
                update(table).where(key == job_id, table.c.status.in_(IN_FLIGHT)).values(**values)
            ).rowcount
            if changed and enqueue is not None:
                enqueue(c)
            if changed and self.postgres:
                c.execute(select(func.pg_notify(VERDICT_CHANNEL, f"{kind}:{job_id}")))
        return bool(changed)

    # ---- reading -------------------------------------------------------------------------
    def get(self, kind: str, job_id: str) -> Submission | RunRecord | None:
        table, key, record = JOBS[kind]
        with self.engine.connect() as c:
            row = c.execute(select(table).where(key == job_id)).mappings().first()
        return record(**row) if row else None

    def get_submission(self, submission_id: str) -> Submission | None:
        return self.get("submission", submission_id)

    def get_run(self, report_id: str) -> RunRecord | None:
        return self.get("run", report_id)

    def find_by_report(self, report_id: str) -> Submission | None:
        with self.engine.connect() as c:
            row = c.execute(select(submissions).where(submissions.c.report_id == report_id))
            found = row.mappings().first()
        return Submission(**found) if found else None

    def list_submissions(
        self, student: str | None = None, exercise: str | None = None
    ) -> list[SubmissionSummary]:
        """Newest first; every student's when `student` is None, every exercise's likewise."""
        s = submissions.c
        query = select(*(s[f.name] for f in fields(SubmissionSummary)))
        if student is not None:
            query = query.where(s.student == student)
        if exercise is not None:
            query = query.where(s.exercise == exercise)
        query = query.order_by(s.created_at.desc(), s.submission_id.desc())
        with self.engine.connect() as c:
            return [SubmissionSummary(**row) for row in c.execute(query).mappings()]

    def position(self, kind: str, job_id: str) -> int | None:
        """1 + the gradings queued before this one in the whole cluster; None unless queued."""
        record = self.get(kind, job_id)
        if record is None or record.status != "queued":
            return None
        with self.engine.connect() as c:
            ahead = sum(
                _count(c, t, and_(t.c.status == "queued", t.c.created_at < record.created_at))
                for t in (submissions, runs)
            )
        return ahead + 1

    def unfinished(self) -> list[tuple[str, str]]:
        """(kind, id) of every job still in flight, oldest first."""
        found = []
        with self.engine.connect() as c:
            for kind, (table, key, _) in JOBS.items():
                query = select(key, table.c.created_at).where(table.c.status.in_(IN_FLIGHT))
                found += [(row[1], kind, row[0]) for row in c.execute(query)]
        return [(kind, job_id) for _, kind, job_id in sorted(found)]

    def waiting(self) -> int:
        """Gradings queued and not yet taken by a grading node, in the whole cluster."""
        with self.engine.connect() as c:
            return _waiting(c)

    # ---- plots ---------------------------------------------------------------------------
    def save_plots(self, artifacts_key: str, pngs: dict[str, bytes]) -> None:
        """Store a set of plot images; a set stored before (same key) is kept as it is."""
        rows = [
            {"artifacts_key": artifacts_key, "name": n, "png": b, "created_at": now()}
            for n, b in pngs.items()
        ]
        try:
            with self._write() as c:
                c.execute(insert(plots), rows)
        except IntegrityError:
            pass  # another grading node drew the same toy results first

    def plot_png(self, artifacts_key: str, name: str) -> bytes | None:
        where = and_(plots.c.artifacts_key == artifacts_key, plots.c.name == name)
        with self.engine.connect() as c:
            return c.scalar(select(plots.c.png).where(where))

    def has_plots(self, artifacts_key: str) -> bool:
        with self.engine.connect() as c:
            return _count(c, plots, plots.c.artifacts_key == artifacts_key, in_flight=False) > 0

    # ---- upkeep --------------------------------------------------------------------------
    def prune_runs(self, before: str) -> int:
        """Delete finished Run reports created before `before` (ISO time); how many."""
        done = and_(runs.c.created_at < before, runs.c.status.not_in(IN_FLIGHT))
        with self._write() as c:
            return c.execute(runs.delete().where(done)).rowcount

    def fresh_workers(self, seconds: float) -> int:
        """Procrastinate workers whose heartbeat is younger than `seconds` (PostgreSQL
        only); a grading node runs one per queue it reads."""
        query = text(
            "SELECT count(*) FROM procrastinate_workers"
            " WHERE last_heartbeat > now() - make_interval(secs => :s)"
        )
        with self.engine.connect() as c:
            return c.execute(query, {"s": seconds}).scalar() or 0

    def ping(self) -> None:
        """Raise (sqlalchemy.exc.OperationalError) unless the database answers."""
        with self.engine.connect() as c:
            c.execute(text("SELECT 1"))

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction: BEGIN IMMEDIATE on SQLite, committed on leaving."""
        with self.engine.connect().execution_options(write=True) as c, c.begin():
            yield c

    def _lock_admissions(self, c: Connection) -> None:
        if self.postgres:  # SQLite's BEGIN IMMEDIATE serialises writers already
            c.execute(select(func.pg_advisory_xact_lock(ADMISSION_LOCK)))

    @staticmethod
    def _claim(c: Connection, name: str, key_hash: str) -> None:
        try:
            with c.begin_nested():
                c.execute(insert(students).values(name=name, key_hash=key_hash, created_at=now()))
        except IntegrityError:
            raise NameTaken from None

    @staticmethod
    def _check_room(c: Connection, admission: Admission) -> None:
        """QueueFull when `max_waiting` gradings wait, or `max_in_flight` are in flight
        (counted in one statement: it runs for every Submit)."""
        tables = (submissions, runs)
        counts = [_counting(t, t.c.status == "queued") for t in tables]
        counts += [_counting(t, t.c.status.in_(IN_FLIGHT)) for t in tables]
        waiting_submissions, waiting_runs, *in_flight = c.execute(select(*counts)).one()
        if waiting_submissions + waiting_runs >= admission.max_waiting:
            raise QueueFull
        limit = admission.max_in_flight
        if limit is not None and sum(in_flight) >= limit:
            raise QueueFull


def _count(c: Connection, table, where, in_flight: bool = True) -> int:
    query = select(func.count()).select_from(table).where(where)
    if in_flight:
        query = query.where(table.c.status.in_(IN_FLIGHT))
    return c.scalar(query) or 0


def _counting(table, where):
    """The count of `table`'s rows where `where` holds, as a column of a larger select."""
    return select(func.count()).select_from(table).where(where).scalar_subquery()


def _no_live_job(task_name: str, key):
    """No procrastinate job waits for or runs the row whose id is `key`."""
    return text(
        "NOT EXISTS (SELECT 1 FROM procrastinate_jobs j WHERE j.task_name = :task"
        " AND j.status IN ('todo', 'doing') AND j.args->>'job_id' = "
        f"{key.table.name}.{key.name})"
    ).bindparams(task=task_name)


def _waiting(c: Connection) -> int:
    return sum(_count(c, t, t.c.status == "queued") for t in (submissions, runs))


def _values(record) -> dict:
    return {f.name: getattr(record, f.name) for f in fields(record)}


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


__all__ = [
    "Admission",
    "NameTaken",
    "OwnerBusy",
    "QueueFull",
    "RunRecord",
    "Store",
    "Submission",
    "SubmissionSummary",
    "Verdict",
    "is_postgres",
    "now",
    "open_store",
]
