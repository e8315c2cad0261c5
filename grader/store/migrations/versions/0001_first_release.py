"""The schema of the first release: students and their graded submissions.

A data dir written by that release has exactly these tables and no alembic_version;
database.upgrade stamps it with this revision and migrates on from here.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "students",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("key_hash", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
    )
    op.create_table(
        "submissions",
        sa.Column("submission_id", sa.Text, primary_key=True),
        sa.Column("report_id", sa.Text, nullable=False, unique=True),
        sa.Column("student", sa.Text, sa.ForeignKey("students.name"), nullable=False),
        sa.Column("code", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("report_json", sa.Text, nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("max_score", sa.Float, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
    )
    op.create_index("submissions_by_student", "submissions", ["student", "created_at"])


def downgrade() -> None:
    op.drop_table("submissions")
    op.drop_table("students")
