"""Gradings found by the plots they name: pruning old Runs drops the plots that only they
named, and asks, for each of their sets, whether a grading that stays names it too.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

NAMED = "plots_key IS NOT NULL"


def upgrade() -> None:
    op.create_index(
        "gradings_by_plots_key",
        "gradings",
        ["plots_key"],
        sqlite_where=sa.text(NAMED),
        postgresql_where=sa.text(NAMED),
    )


def downgrade() -> None:
    op.drop_index("gradings_by_plots_key", "gradings")
