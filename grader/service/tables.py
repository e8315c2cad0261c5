"""The database schema as SQLAlchemy Core tables: what the store reads and writes.

The migrations in `migrations/versions/` create these tables; this module describes their
latest shape for queries. Times are ISO 8601 text in UTC (the first release wrote them so,
and ISO text sorts in time order). A submission or Run moves through the statuses

    queued -> grading -> done          a verdict, written once
                      -> ungradable    the grader failed on every attempt (never a score)

and `score`, `max_score`, `passed` and `report_json` stay NULL until it is done.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

STATUSES = ("queued", "grading", "done", "ungradable")
IN_FLIGHT = ("queued", "grading")

metadata = MetaData()

students = Table(
    "students",
    metadata,
    Column("name", Text, primary_key=True),
    Column("key_hash", Text, nullable=False),
    Column("created_at", Text, nullable=False),
)

submissions = Table(
    "submissions",
    metadata,
    Column("submission_id", Text, primary_key=True),
    Column("report_id", Text, nullable=False, unique=True),
    Column("student", Text, ForeignKey("students.name"), nullable=False),
    Column("code", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("report_json", Text, nullable=True),
    Column("score", Float, nullable=True),
    Column("max_score", Float, nullable=True),
    Column("passed", Boolean, nullable=True),
    Column("exercise", String(32), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("finished_at", Text, nullable=True),
)
Index("submissions_by_student", submissions.c.student, submissions.c.created_at)
Index("submissions_by_status", submissions.c.status, submissions.c.created_at)

# Run reports of the distributed deployment: the API node that answers may not be the one a
# later plot request reaches, so they live in the database (the embedded service keeps its
# Run reports in memory). Old rows are pruned by age.
runs = Table(
    "runs",
    metadata,
    Column("report_id", Text, primary_key=True),
    Column("exercise", String(32), nullable=False),
    Column("code", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("report_json", Text, nullable=True),
    Column("finished_at", Text, nullable=True),
)
Index("runs_by_status", runs.c.status, runs.c.created_at)

# The toy's plots as PNG bytes, drawn by a grading node after the verdict, keyed by a digest
# of what they show (identical toy results share one set).
plots = Table(
    "plots",
    metadata,
    Column("artifacts_key", String(64), nullable=False),
    Column("name", String(64), nullable=False),
    Column("png", LargeBinary, nullable=False),
    Column("created_at", Text, nullable=False),
    PrimaryKeyConstraint("artifacts_key", "name"),
)
