"""Submissions are queued before they are graded, name their exercise, and may end
ungradable; Run reports and plot images of the distributed deployment get tables.

Rows of the first release were graded GSPO submissions: they become exercise "gspo",
status "done", one attempt.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:  # SQLite: copy and move
        batch.add_column(
            sa.Column("exercise", sa.String(32), nullable=False, server_default="gspo")
        )
        batch.add_column(sa.Column("status", sa.String(16), nullable=False, server_default="done"))
        batch.add_column(sa.Column("attempts", sa.Integer, nullable=False, server_default="1"))
        batch.add_column(sa.Column("finished_at", sa.Text, nullable=True))
        for name, kind in (("report_json", sa.Text), ("score", sa.Float), ("max_score", sa.Float)):
            batch.alter_column(name, existing_type=kind, nullable=True)
        batch.alter_column("passed", existing_type=sa.Boolean, nullable=True)
    op.execute("UPDATE submissions SET finished_at = created_at")
    op.create_index("submissions_by_status", "submissions", ["status", "created_at"])
    op.create_table(
        "runs",
        sa.Column("report_id", sa.Text, primary_key=True),
        sa.Column("exercise", sa.String(32), nullable=False),
        sa.Column("code", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("report_json", sa.Text, nullable=True),
        sa.Column("finished_at", sa.Text, nullable=True),
    )
    op.create_index("runs_by_status", "runs", ["status", "created_at"])
    op.create_table(
        "plots",
        sa.Column("artifacts_key", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("png", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("artifacts_key", "name"),
    )


def downgrade() -> None:
    op.drop_table("plots")
    op.drop_table("runs")
    op.drop_index("submissions_by_status", "submissions")
    op.execute("DELETE FROM submissions WHERE status <> 'done'")
    with op.batch_alter_table("submissions") as batch:
        for name in ("finished_at", "attempts", "status", "exercise"):
            batch.drop_column(name)
