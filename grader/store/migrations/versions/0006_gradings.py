"""A submission has gradings, and the grading row is the job.

Every submission row becomes a submission (what was sent, when) with one current grading
carrying its status, attempts, report, score and finish time; the grading's id is the old
report id, so plot URLs handed out before keep working. Every Run row becomes a submission
of kind "run" with its grading likewise. Grading nodes' heartbeats get a table, students
the address that created them, and procrastinate's tables and functions (the queue of
earlier releases, PostgreSQL only) are dropped where they exist.

Revision ID: 0006
Revises: 0005_names
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005_names"
branch_labels = None
depends_on = None

DROP_PROCRASTINATE = """
DROP TABLE IF EXISTS procrastinate_periodic_defers, procrastinate_events,
    procrastinate_jobs, procrastinate_workers CASCADE;
DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT p.oid::regprocedure AS f FROM pg_proc p
      WHERE p.proname LIKE 'procrastinate%' AND p.pronamespace = current_schema()::regnamespace
  LOOP EXECUTE 'DROP FUNCTION IF EXISTS ' || r.f || ' CASCADE'; END LOOP;
  FOR r IN SELECT t.typname FROM pg_type t
      WHERE t.typname LIKE 'procrastinate%' AND t.typtype = 'e'
        AND t.typnamespace = current_schema()::regnamespace
  LOOP EXECUTE 'DROP TYPE IF EXISTS ' || quote_ident(r.typname) || ' CASCADE'; END LOOP;
END $$;
"""

GRADING_COLUMNS = (
    "grading_id, submission_id, current, priority, status, attempts, report_json,"
    " score, max_score, passed, queued_at, finished_at"
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(DROP_PROCRASTINATE)
    with op.batch_alter_table("students") as batch:
        batch.add_column(sa.Column("address", sa.Text, nullable=True))
    op.create_table(
        "gradings",
        sa.Column("grading_id", sa.Text, primary_key=True),
        sa.Column(
            "submission_id",
            sa.Text,
            sa.ForeignKey("submissions.submission_id"),
            nullable=False,
        ),
        sa.Column("current", sa.Boolean, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("node", sa.Text, nullable=True),
        sa.Column("exercise_version", sa.String(64), nullable=True),
        sa.Column("report_json", sa.Text, nullable=True),
        sa.Column("score", sa.Float, nullable=True),
        sa.Column("max_score", sa.Float, nullable=True),
        sa.Column("passed", sa.Boolean, nullable=True),
        sa.Column("queued_at", sa.Text, nullable=False),
        sa.Column("started_at", sa.Text, nullable=True),
        sa.Column("finished_at", sa.Text, nullable=True),
    )
    op.create_table(
        "nodes",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("seen_at", sa.Text, nullable=False),
    )
    # a grading that was in progress is queued again: its node (a procrastinate worker, or
    # an earlier embedded process) is gone with the old release
    op.execute(
        f"INSERT INTO gradings ({GRADING_COLUMNS}) SELECT report_id, submission_id, TRUE, 0,"
        " CASE status WHEN 'grading' THEN 'queued' ELSE status END, attempts, report_json,"
        " score, max_score, passed, created_at, finished_at FROM submissions"
    )
    op.drop_index("submissions_by_status", "submissions")
    op.drop_index("submissions_by_student", "submissions")
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("kind", sa.String(8), nullable=False, server_default="submit"))
        batch.add_column(sa.Column("client", sa.Text, nullable=False, server_default=""))
        batch.alter_column("created_at", new_column_name="accepted_at", existing_type=sa.Text)
        batch.alter_column("student", existing_type=sa.Text, nullable=True)
        for name in ("report_id", "report_json", "score", "max_score", "passed"):
            batch.drop_column(name)
        for name in ("status", "attempts", "finished_at"):
            batch.drop_column(name)
    op.execute("UPDATE submissions SET client = student")
    op.execute(
        "INSERT INTO submissions (submission_id, kind, student, client, exercise, code,"
        " accepted_at) SELECT report_id, 'run', NULL, 'migrated', exercise, code, created_at"
        " FROM runs"
    )
    op.execute(
        f"INSERT INTO gradings ({GRADING_COLUMNS}) SELECT report_id, report_id, TRUE, 0,"
        " CASE status WHEN 'grading' THEN 'queued' ELSE status END, attempts, report_json,"
        " NULL, NULL, NULL, created_at, finished_at FROM runs"
    )
    op.drop_table("runs")
    op.create_index("submissions_by_student", "submissions", ["student", "accepted_at"])
    op.create_index("submissions_by_kind", "submissions", ["kind", "accepted_at"])
    op.create_index("gradings_by_status", "gradings", ["status", "priority", "queued_at"])
    op.create_index(
        "gradings_current",
        "gradings",
        ["submission_id"],
        unique=True,
        sqlite_where=sa.text("current"),
        postgresql_where=sa.text("current"),
    )


def downgrade() -> None:
    raise NotImplementedError("0006 cannot be undone: restore the backup taken before it")
