"""PostgreSQL only: the tables and functions of procrastinate, the distributed grading
queue, so that a submission row and its job are written in one transaction.

The schema is the one of the procrastinate release pinned in pyproject.toml; a later
release that changes it needs a revision here that applies its migration files.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return  # the embedded deployment queues in-process
    from procrastinate.schema import SchemaManager

    # psycopg runs a script of many statements when given no parameters
    bind.connection.driver_connection.execute(SchemaManager.get_schema())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "DROP TABLE IF EXISTS procrastinate_periodic_defers, procrastinate_events,"
            " procrastinate_jobs, procrastinate_workers CASCADE"
        )
