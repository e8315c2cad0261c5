"""Once the schema of procrastinate, the distributed queue of earlier releases; now nothing
(the grading rows are the queue: 0006 drops procrastinate's tables where they exist).

Revision ID: 0003
Revises: 0002
"""

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
