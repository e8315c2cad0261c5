"""The grading row is the job: what grading nodes do to it, in single statements.

    job = jobs.claim("node-a")             # the oldest queued grading, now grading on node-a
    job = jobs.claim("node-a", live_only=True)   # the oldest live one (never a regrading)
    jobs.finish(job.grading_id, verdict)   # written once: False if it was finished before
    jobs.requeue(job.grading_id)           # back to queued, for another attempt
    jobs.beat("node-a")                    # the node's heartbeat
    jobs.lost(cutoff)                      # gradings on nodes silent since `cutoff`

A claim is one UPDATE of the oldest queued row, live work (priority 0) before regradings
(priority 1), or of live work only (PostgreSQL picks it with FOR UPDATE SKIP
LOCKED, so two nodes never wait for each other; SQLite's writers are serialised by BEGIN
IMMEDIATE) that counts the attempt and names the node. On PostgreSQL a queued grading
NOTIFYs WORK_CHANNEL and a finished one VERDICT_CHANNEL (payload: its id), so nodes and
waiting requests wake at once; both also poll, so a lost notification costs a poll period.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields

from sqlalchemy import Connection, Engine, and_, func, insert, or_, select, update

from grader.store.records import GradingRecord, GradingResult, now
from grader.store.schema import IN_FLIGHT, gradings, nodes, submissions, test_verdicts

LIVE, REGRADE = 0, 1  # a grading's priority: a Submit or Run someone waits for; a regrading
WORK_CHANNEL = "gspo_grader_work"  # NOTIFY: a grading was queued
VERDICT_CHANNEL = "gspo_grader_verdicts"  # NOTIFY payload: the grading id, once finished


def verdict_rows(grading_id: str, report_json: str) -> list[dict]:
    """A report's test verdicts as test_verdicts rows (none for a report without tiers)."""
    tiers = json.loads(report_json).get("tiers") or []
    tests = [test for tier in tiers for test in tier.get("tests") or []]
    return [
        {"grading_id": grading_id, "test_id": t["id"], "passed": t["outcome"] == "passed"}
        for t in tests
        if t.get("outcome") in ("passed", "failed", "error")
    ]


def queued_grading(grading_id: str, submission_id: str, priority: int = LIVE, current=True) -> dict:
    return {
        "grading_id": grading_id,
        "submission_id": submission_id,
        "current": current,
        "priority": priority,
        "status": "queued",
        "attempts": 0,
        "queued_at": now(),
    }


def queue_regradings(c: Connection, pairs, current: bool = False) -> None:
    """Queue a new grading of each (submission id, grading id), below live work (priority
    1); `current`: it becomes the one the student sees at once (the earlier ones are kept)."""
    for submission_id, grading_id in pairs:
        if current:
            mine = gradings.c.submission_id == submission_id
            c.execute(update(gradings).where(mine).values(current=False))
        row = queued_grading(grading_id, submission_id, priority=REGRADE, current=current)
        c.execute(insert(gradings).values(**row))


@dataclass(frozen=True)
class Job:
    """A claimed grading, with what grading it needs."""

    grading_id: str
    submission_id: str
    kind: str  # run or submit: the grading's mode
    exercise: str
    code: str
    attempts: int  # this one included
    priority: int = LIVE  # LIVE, or REGRADE (a regrading: no one waits for it)
    course: str = "default"  # the submission's course (an LTI context, or "default")

    @property
    def live(self) -> bool:
        """Someone waits for it: a Submit or a Run, not a regrading."""
        return self.priority == LIVE


class Jobs:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"

    def claim(self, node: str, live_only: bool = False) -> Job | None:
        """Take the oldest queued grading (live work before regrades), or None; `live_only`:
        the oldest live one, never a regrading (a node's reserved judges, node/lanes.py)."""
        wanted = [gradings.c.status == "queued"]
        if live_only:
            wanted.append(gradings.c.priority == LIVE)
        oldest = (
            select(gradings.c.grading_id)
            .where(*wanted)
            .order_by(gradings.c.priority, gradings.c.queued_at)
            .limit(1)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        taken = (
            update(gradings)
            .where(gradings.c.grading_id == oldest, gradings.c.status == "queued")
            .values(status="grading", node=node, attempts=gradings.c.attempts + 1, started_at=now())
            .returning(
                gradings.c.grading_id,
                gradings.c.submission_id,
                gradings.c.attempts,
                gradings.c.priority,
            )
        )
        s = submissions.c
        with self.write() as c:
            row = c.execute(taken).first()
            if row is None:
                return None
            sent = select(s.kind, s.exercise, s.code, s.course)
            kind, exercise, code, course = c.execute(
                sent.where(s.submission_id == row.submission_id)
            ).one()
        return Job(row.grading_id, row.submission_id, kind, exercise, code, row.attempts,
                   row.priority, course)  # fmt: skip

    def reusable(self, verdict_key: str) -> GradingResult | None:
        """A finished grading's verdict under this key (node/reuse.py), or None."""
        g = gradings.c
        columns = [g[f.name] for f in fields(GradingResult)]
        found = select(*columns).where(g.verdict_key == verdict_key, g.status == "done")
        with self.engine.connect() as c:
            row = c.execute(found.limit(1)).first()
        return None if row is None else GradingResult(*row)

    def finish(self, grading_id: str, verdict: GradingResult) -> bool:
        """Write the verdict once: True if this call wrote it, False if it was written before."""
        values = {f.name: getattr(verdict, f.name) for f in fields(verdict)}
        values |= {"status": "done" if verdict.score is not None else "ungradable"}
        values |= {"finished_at": now()}
        in_flight = and_(gradings.c.grading_id == grading_id, gradings.c.status.in_(IN_FLIGHT))
        with self.write() as c:
            changed = c.execute(update(gradings).where(in_flight).values(**values)).rowcount
            if changed:
                rows = verdict_rows(grading_id, verdict.report_json)
                if rows:
                    c.execute(test_verdicts.insert(), rows)
                self.notify(c, VERDICT_CHANNEL, grading_id)
        return bool(changed)

    def requeue(self, grading_id: str, node: str | None = None) -> bool:
        """Back to queued for another attempt (attempts stay counted); False unless it was
        grading (on `node`, when given: a node that came back late requeues nothing)."""
        where = [gradings.c.grading_id == grading_id, gradings.c.status == "grading"]
        if node is not None:
            where.append(gradings.c.node == node)
        with self.write() as c:
            changed = c.execute(update(gradings).where(*where).values(status="queued", node=None))
            if changed.rowcount:
                self.notify(c, WORK_CHANNEL, "")
        return bool(changed.rowcount)

    def beat(self, node: str) -> None:
        """The node's heartbeat: it is alive now."""
        with self.write() as c:
            seen = update(nodes).where(nodes.c.name == node).values(seen_at=now())
            if not c.execute(seen).rowcount:
                c.execute(nodes.insert().values(name=node, seen_at=now()))

    def lost(self, cutoff: str, node: str | None = None, running=()) -> list[GradingRecord]:
        """Gradings in progress on a node not seen since `cutoff` (or on none), and on
        `node` (the caller) those it is not `running` (lost with the database mid-way)."""
        alive = select(nodes.c.name).where(nodes.c.seen_at >= cutoff)
        orphan = or_(gradings.c.node.is_(None), gradings.c.node.not_in(alive))
        if node is not None:
            mine = and_(gradings.c.node == node, gradings.c.grading_id.not_in(list(running)))
            orphan = or_(orphan, mine)
        query = select(gradings).where(gradings.c.status == "grading", orphan)
        with self.engine.connect() as c:
            return [GradingRecord(**row) for row in c.execute(query).mappings()]

    def live_nodes(self, cutoff: str) -> int:
        """Grading nodes seen since `cutoff`."""
        with self.engine.connect() as c:
            return c.scalar(select(func.count()).where(nodes.c.seen_at >= cutoff)) or 0

    def waiting(self) -> int:
        """Gradings queued and not yet claimed, in the whole cluster."""
        query = select(func.count()).where(gradings.c.status == "queued")
        with self.engine.connect() as c:
            return c.scalar(query) or 0

    def grading(self, grading_id: str) -> GradingRecord | None:
        with self.engine.connect() as c:
            row = c.execute(select(gradings).where(gradings.c.grading_id == grading_id))
            found = row.mappings().first()
        return GradingRecord(**found) if found else None

    def notify(self, c: Connection, channel: str, payload: str) -> None:
        if self.postgres:  # SQLite: one process; its node and waiters are woken in memory
            c.execute(select(func.pg_notify(channel, payload)))

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: BEGIN IMMEDIATE on SQLite, committed on leaving."""
        with self.engine.connect().execution_options(write=True) as c, c.begin():
            yield c
