"""Student names in their normal form (grader/store/names.py: NFKC, case-folded, trimmed).

A name whose normal form no other row shares is renamed, its submissions and LMS user with
it. Names that would become one, and names that mix scripts, are left as they are and
reported (a warning that `gspo-grader db upgrade` shows): an instructor decides.

Revision ID: 0005_names
Revises: 0004
"""

import logging
from collections import defaultdict

import sqlalchemy as sa
from alembic import op

from grader.store.names import mixed_scripts_message, normal_name

revision = "0005_names"
down_revision = "0004"
branch_labels = None
depends_on = None

log = logging.getLogger("grader.service.migrations")
students = sa.table("students", sa.column("name"), sa.column("key_hash"), sa.column("created_at"))
REFERENCES = (
    sa.table("submissions", sa.column("student")),
    sa.table("lti_users", sa.column("student")),
)


def upgrade() -> None:
    c = op.get_bind()
    by_normal = defaultdict(list)
    for row in c.execute(sa.select(students)).mappings():
        by_normal[normal_name(row["name"])].append(row)
    for normal, (old, *others) in by_normal.items():
        if others:
            names = sorted(r["name"] for r in (old, *others))
            log.warning("names %s are one once normalised (%r); left as they are", names, normal)
        elif mixed_scripts_message(normal):
            log.warning("name %r mixes scripts; left as it is", old["name"])
        elif old["name"] != normal:
            c.execute(sa.insert(students).values(**{**old, "name": normal}))
            for t in REFERENCES:
                c.execute(sa.update(t).where(t.c.student == old["name"]).values(student=normal))
            c.execute(sa.delete(students).where(students.c.name == old["name"]))


def downgrade() -> None:
    """Normal forms stay: the names they replaced are not kept."""
