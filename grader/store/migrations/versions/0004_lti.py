"""LTI 1.3: platform registrations, this tool's keys, login states, LMS users, courses,
resource links, and the grade passback outbox (see grader/service/lti/rows.py).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _id(name: str) -> sa.Column:
    return sa.Column(name, sa.Integer, primary_key=True, autoincrement=True)


def _platform() -> sa.Column:
    return sa.Column(
        "platform_id", sa.Integer, sa.ForeignKey("lti_platforms.platform_id"), nullable=False
    )


def upgrade() -> None:
    text = sa.Text
    op.create_table(
        "lti_platforms",
        _id("platform_id"),
        *(sa.Column(c, text, nullable=False) for c in ("issuer", "client_id", "auth_url")),
        *(sa.Column(c, text, nullable=False) for c in ("token_url", "jwks_url")),
        sa.Column("token_audience", text, nullable=True),
        sa.Column("name", text, nullable=False),
        sa.Column("created_at", text, nullable=False),
        sa.UniqueConstraint("issuer", "client_id", name="lti_platforms_registration"),
    )
    op.create_table(
        "lti_deployments",
        _platform(),
        sa.Column("deployment_id", text, nullable=False),
        sa.PrimaryKeyConstraint("platform_id", "deployment_id"),
    )
    op.create_table(
        "lti_keys",
        sa.Column("kid", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("jwk", text, nullable=False),
        sa.Column("created_at", text, nullable=False),
    )
    op.create_index("lti_keys_by_kind", "lti_keys", ["kind", "created_at"])
    op.create_table(
        "lti_states",
        sa.Column("state", sa.String(64), primary_key=True),
        sa.Column("nonce", sa.String(64), nullable=False),
        _platform(),
        sa.Column("target_link_uri", text, nullable=False),
        sa.Column("login_hint", text, nullable=False),
        sa.Column("message_hint", text, nullable=True),
        sa.Column("expires_at", text, nullable=False),
    )
    op.create_table(
        "lti_users",
        _id("user_id"),
        _platform(),
        *(sa.Column(c, text, nullable=False) for c in ("deployment_id", "sub", "name")),
        sa.Column("student", text, sa.ForeignKey("students.name"), nullable=False, unique=True),
        sa.Column("created_at", text, nullable=False),
        sa.UniqueConstraint("platform_id", "deployment_id", "sub", name="lti_users_identity"),
    )
    op.create_table(
        "lti_courses",
        _id("course_id"),
        _platform(),
        *(sa.Column(c, text, nullable=False) for c in ("deployment_id", "context_id", "title")),
        sa.Column("policy", sa.String(8), nullable=False),
        sa.UniqueConstraint(
            "platform_id", "deployment_id", "context_id", name="lti_courses_context"
        ),
    )
    op.create_table(
        "lti_links",
        _id("link_id"),
        sa.Column("course_id", sa.Integer, sa.ForeignKey("lti_courses.course_id"), nullable=False),
        sa.Column("resource_link_id", text, nullable=False),
        sa.Column("title", text, nullable=False),
        sa.Column("exercise", sa.String(32), nullable=False),
        sa.Column("lineitem", text, nullable=True),
        sa.UniqueConstraint("course_id", "resource_link_id", name="lti_links_resource"),
    )
    op.create_table(
        "lti_scores",
        sa.Column(
            "submission_id", text, sa.ForeignKey("submissions.submission_id"), primary_key=True
        ),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("lti_users.user_id"), nullable=False),
        sa.Column("link_id", sa.Integer, sa.ForeignKey("lti_links.link_id"), nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", text, nullable=False),
        sa.Column("claimed_until", text, nullable=True),
        sa.Column("score_given", sa.Float, nullable=True),
        sa.Column("score_maximum", sa.Float, nullable=True),
        sa.Column("last_status", sa.Integer, nullable=True),
        sa.Column("last_error", text, nullable=True),
        sa.Column("created_at", text, nullable=False),
        sa.Column("done_at", text, nullable=True),
    )
    op.create_index("lti_scores_due", "lti_scores", ["state", "next_attempt_at"])
    op.create_index("lti_scores_by_link", "lti_scores", ["link_id", "user_id"])


def downgrade() -> None:
    for table in ("lti_scores", "lti_links", "lti_courses", "lti_users", "lti_states"):
        op.drop_table(table)
    op.drop_index("lti_keys_by_kind", "lti_keys")
    for table in ("lti_keys", "lti_deployments", "lti_platforms"):
        op.drop_table(table)
