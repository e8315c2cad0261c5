"""Gradings remember what a later live grading of the same code may reuse them by
(grader/node/reuse.py): a key column, indexed where it is set. Gradings finished before it
have none, and are never reused.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

REUSABLE = "verdict_key IS NOT NULL"


def upgrade() -> None:
    op.add_column("gradings", sa.Column("verdict_key", sa.String(64), nullable=True))
    op.create_index(
        "gradings_by_verdict_key",
        "gradings",
        ["verdict_key"],
        sqlite_where=sa.text(REUSABLE),
        postgresql_where=sa.text(REUSABLE),
    )


def downgrade() -> None:
    op.drop_index("gradings_by_verdict_key", "gradings")
    with op.batch_alter_table("gradings") as batch:  # SQLite: copy and move
        batch.drop_column("verdict_key")
