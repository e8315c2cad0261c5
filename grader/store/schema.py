"""The database schema as SQLAlchemy Core tables (the migrations in `migrations/versions/`
create them; this module describes their latest shape for queries).

Times are ISO 8601 text in UTC (ISO text sorts in time order). A *submission* is what was
sent and when it was accepted, and is never changed; a *grading* is one run of the tiers on
it, and is the job a grading node claims. A grading's status moves

    queued -> grading -> done          the report and score, written once
                      -> ungradable    the grader failed on every attempt (never a score)
             grading -> queued         its node died, or the grader failed: another attempt

One grading per submission is `current` (what the student, the gradebook and the LMS see).
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
    select,
    text,
)

STATUSES = ("queued", "grading", "done", "ungradable")
IN_FLIGHT = ("queued", "grading")
FINISHED = ("done", "ungradable")
KINDS = ("run", "submit")
CLASS_SUBMISSION_COLUMNS = ("exercise", "kind", "student", "accepted_at", "submission_id")
CLASS_GRADING_COLUMNS = ("submission_id", "current", "status", "grading_id", "score",
                         "max_score", "passed")  # fmt: skip

metadata = MetaData()

students = Table(
    "students",
    metadata,
    Column("name", Text, primary_key=True),
    Column("key_hash", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("address", Text, nullable=True),  # the client that created the name
)

submissions = Table(
    "submissions",
    metadata,
    Column("submission_id", Text, primary_key=True),
    Column("kind", String(8), nullable=False),  # run or submit
    Column("student", Text, ForeignKey("students.name"), nullable=True),  # None: a Run
    Column("client", Text, nullable=False),  # whose work it is: the student, or an address
    Column("exercise", String(32), nullable=False),
    Column("code", Text, nullable=False),
    Column("accepted_at", Text, nullable=False),
    Column("course", Text, nullable=False),  # an LTI context (lti:<id>), or "default"
)
Index("submissions_by_student", submissions.c.student, submissions.c.accepted_at)
Index("submissions_by_kind", submissions.c.kind, submissions.c.accepted_at)
# the class's statistics read an exercise's Submits, and their gradings, from indexes alone
Index("submissions_by_exercise", *(submissions.c[n] for n in CLASS_SUBMISSION_COLUMNS))

gradings = Table(
    "gradings",
    metadata,
    Column("grading_id", Text, primary_key=True),  # also the report id of plot URLs
    Column("submission_id", Text, ForeignKey("submissions.submission_id"), nullable=False),
    Column("current", Boolean, nullable=False),
    Column("priority", Integer, nullable=False),  # 0 live work; higher waits (regrades)
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("node", Text, nullable=True),  # the grading node of the latest attempt
    Column("exercise_version", String(64), nullable=True),  # set by the node that graded
    Column("report_json", Text, nullable=True),
    Column("score", Float, nullable=True),
    Column("max_score", Float, nullable=True),
    Column("passed", Boolean, nullable=True),
    Column("queued_at", Text, nullable=False),
    Column("started_at", Text, nullable=True),
    Column("finished_at", Text, nullable=True),
    # the artifacts_key of its toy's plots; None when the report has none to draw
    Column("plots_key", String(64), nullable=True),
    # what a later live grading of the same code may reuse it by (node/reuse.py); None: never
    Column("verdict_key", String(64), nullable=True),
)
Index("gradings_by_status", gradings.c.status, gradings.c.priority, gradings.c.queued_at)
Index("gradings_by_submission", *(gradings.c[n] for n in CLASS_GRADING_COLUMNS))
Index(
    "gradings_current",
    gradings.c.submission_id,
    unique=True,
    sqlite_where=text("current"),
    postgresql_where=text("current"),
)
_NAMES_PLOTS = text("plots_key IS NOT NULL")  # the gradings whose toy has plots to draw
_REUSABLE = text("verdict_key IS NOT NULL")  # the gradings a later one may reuse
# the finished gradings whose plots may be missing, newest first (Drawings.draw_missing)
Index(
    "gradings_wanting_plots",
    gradings.c.finished_at,
    sqlite_where=_NAMES_PLOTS,
    postgresql_where=_NAMES_PLOTS,
)
# the gradings that name a set of plots (Store.prune_runs keeps a set some grading names)
Index(
    "gradings_by_plots_key",
    gradings.c.plots_key,
    sqlite_where=_NAMES_PLOTS,
    postgresql_where=_NAMES_PLOTS,
)
# a live grading's earlier twin, if any (Jobs.reusable)
Index(
    "gradings_by_verdict_key",
    gradings.c.verdict_key,
    sqlite_where=_REUSABLE,
    postgresql_where=_REUSABLE,
)

# Each finished grading's tests, passed or not (skipped tests are left out), written with its
# report: what the instructor's statistics count.
test_verdicts = Table(
    "test_verdicts",
    metadata,
    Column("grading_id", Text, ForeignKey("gradings.grading_id"), nullable=False),
    Column("test_id", Text, nullable=False),
    Column("passed", Boolean, nullable=False),
    PrimaryKeyConstraint("grading_id", "test_id"),
)

# A course's term (grader/term.py): each exercise's schedule (JSON) and quota per course,
# an LMS line item's end date offered as the due date, and students' extended due dates.
course_terms = Table(
    "course_terms",
    metadata,
    Column("course", Text, primary_key=True),
    Column("exercise", String(32), primary_key=True),
    Column("schedule_json", Text, nullable=True),
    Column("quota_submits", Integer, nullable=True),
    Column("quota_per_seconds", Integer, nullable=True),
    Column("suggested_due_at", Text, nullable=True),
)
course_extensions = Table(
    "course_extensions",
    metadata,
    Column("course", Text, primary_key=True),
    Column("exercise", String(32), primary_key=True),
    Column("student", Text, ForeignKey("students.name"), primary_key=True),
    Column("due_at", Text, nullable=False),
)

# A regrade: a preview's new gradings (not current) beside the ones they would replace;
# state preview -> applied -> rolled_back. `note` is what the student is shown once applied.
regrades = Table(
    "regrades",
    metadata,
    Column("preview_id", Text, primary_key=True),
    Column("course", Text, nullable=False),
    Column("exercise", String(32), nullable=False),
    Column("state", String(16), nullable=False),
    Column("created_at", Text, nullable=False),
    Column("applied_at", Text, nullable=True),
)
regrade_items = Table(
    "regrade_items",
    metadata,
    Column("preview_id", Text, ForeignKey("regrades.preview_id"), primary_key=True),
    Column("submission_id", Text, ForeignKey("submissions.submission_id"), primary_key=True),
    Column("old_grading_id", Text, nullable=False),
    Column("new_grading_id", Text, nullable=False),
    Column("note", Text, nullable=True),
)

# Grading nodes' heartbeats: a node whose `seen_at` is older than `stalled_seconds` is dead,
# and its gradings are queued again (Jobs.recover_lost).
nodes = Table(
    "nodes",
    metadata,
    Column("name", Text, primary_key=True),
    Column("seen_at", Text, nullable=False),
)

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

# Every submission with its current grading, in the columns a reader of one row wants
# (what LTI's outbox joins on); read-only.
current_submissions = (
    select(
        submissions.c.submission_id,
        submissions.c.kind,
        submissions.c.student,
        submissions.c.exercise,
        submissions.c.accepted_at.label("created_at"),
        gradings.c.grading_id,
        gradings.c.status,
        gradings.c.attempts,
        gradings.c.score,
        gradings.c.max_score,
        gradings.c.passed,
        gradings.c.finished_at,
    )
    .select_from(submissions.join(gradings))
    .where(gradings.c.current)
    .subquery("current_submissions")
)
