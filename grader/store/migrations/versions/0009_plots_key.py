"""A finished grading names the plots its toy result needs (their artifacts_key), so plots
that no node drew (it stopped or died first) can be found and drawn later. Gradings stored
before keep no key: their plots were drawn then, or are not looked for.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

WANTING = "plots_key IS NOT NULL"


def upgrade() -> None:
    op.add_column("gradings", sa.Column("plots_key", sa.String(64), nullable=True))
    op.create_index(
        "gradings_wanting_plots",
        "gradings",
        ["finished_at"],
        sqlite_where=sa.text(WANTING),
        postgresql_where=sa.text(WANTING),
    )


def downgrade() -> None:
    op.drop_index("gradings_wanting_plots", "gradings")
    with op.batch_alter_table("gradings") as batch:  # SQLite: copy and move
        batch.drop_column("plots_key")
