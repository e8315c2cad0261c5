"""A course's term: the course a submission was made in, each exercise's schedule and quota
per course, students' extensions, and regrades (a preview's gradings, kept to apply or roll
back).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("course", sa.Text, nullable=False, server_default="default"))
    op.create_table(
        "course_terms",
        sa.Column("course", sa.Text, primary_key=True),
        sa.Column("exercise", sa.String(32), primary_key=True),
        sa.Column("schedule_json", sa.Text, nullable=True),
        sa.Column("quota_submits", sa.Integer, nullable=True),
        sa.Column("quota_per_seconds", sa.Integer, nullable=True),
        sa.Column("suggested_due_at", sa.Text, nullable=True),
    )
    op.create_table(
        "course_extensions",
        sa.Column("course", sa.Text, primary_key=True),
        sa.Column("exercise", sa.String(32), primary_key=True),
        sa.Column("student", sa.Text, sa.ForeignKey("students.name"), primary_key=True),
        sa.Column("due_at", sa.Text, nullable=False),
    )
    op.create_table(
        "regrades",
        sa.Column("preview_id", sa.Text, primary_key=True),
        sa.Column("course", sa.Text, nullable=False),
        sa.Column("exercise", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("applied_at", sa.Text, nullable=True),
    )
    op.create_table(
        "regrade_items",
        sa.Column("preview_id", sa.Text, sa.ForeignKey("regrades.preview_id"), primary_key=True),
        sa.Column(
            "submission_id", sa.Text, sa.ForeignKey("submissions.submission_id"), primary_key=True
        ),
        sa.Column("old_grading_id", sa.Text, nullable=False),
        sa.Column("new_grading_id", sa.Text, nullable=False),
        sa.Column("note", sa.Text, nullable=True),
    )
    op.create_index("submissions_by_course", "submissions", ["course", "exercise", "student"])


def downgrade() -> None:
    op.drop_index("submissions_by_course", "submissions")
    for table in ("regrade_items", "regrades", "course_extensions", "course_terms"):
        op.drop_table(table)
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("course")
