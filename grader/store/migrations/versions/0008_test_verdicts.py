"""Each finished grading's per-test verdicts get a table (what the instructor's statistics
count in SQL); reports stored before it are read once to fill it. An exercise's Submits and
their gradings get covering indexes, so the statistics read no table row.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

from grader.store.jobs import verdict_rows
from grader.store.schema import CLASS_GRADING_COLUMNS, CLASS_SUBMISSION_COLUMNS

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "test_verdicts",
        sa.Column("grading_id", sa.Text, sa.ForeignKey("gradings.grading_id"), nullable=False),
        sa.Column("test_id", sa.Text, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.PrimaryKeyConstraint("grading_id", "test_id"),
    )
    op.create_index("submissions_by_exercise", "submissions", list(CLASS_SUBMISSION_COLUMNS))
    op.create_index("gradings_by_submission", "gradings", list(CLASS_GRADING_COLUMNS))
    bind = op.get_bind()
    found = bind.execute(sa.text("SELECT grading_id, report_json FROM gradings"
                                 " WHERE report_json IS NOT NULL")).all()  # fmt: skip
    for grading_id, report_json in found:
        rows = verdict_rows(grading_id, report_json)
        if rows:
            bind.execute(table.insert(), rows)


def downgrade() -> None:
    op.drop_table("test_verdicts")
    op.drop_index("gradings_by_submission", "gradings")
    op.drop_index("submissions_by_exercise", "submissions")
