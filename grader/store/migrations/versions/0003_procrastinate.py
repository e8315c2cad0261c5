"""Once procrastinate's schema (the queue of earlier releases); now nothing: the gradings are
the queue, and 0006 drops procrastinate's tables where they exist.

Revision ID: 0003
Revises: 0002
"""

revision, down_revision, branch_labels, depends_on = "0003", "0002", None, None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
