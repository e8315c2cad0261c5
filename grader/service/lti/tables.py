"""The LTI tables, on the service's own metadata (migration 0004 creates them).

    lti_platforms    one registration: an LMS's issuer and the client id it gave this tool,
                     and the LMS's URLs (OIDC authorisation, token, key set)
    lti_deployments  the deployment ids of a registration that may launch this tool
    lti_keys         this tool's keys: RSA keys ("tool", published at /lti/jwks, newest
                     signs) and the HMAC key that signs the page's session tokens ("session")
    lti_states       login attempts: state and nonce, single use, expire after 10 minutes
    lti_users        an LMS user: (platform, deployment, sub), shown by the name the LMS
                     sends; `student` is the students row their submissions are filed under
    lti_courses      an LMS course (context), with its passback policy: best or latest
    lti_links        a resource link of a course: its exercise and AGS line item
    lti_scores       the passback outbox: one row per Submit made from a launch

An outbox row moves through

    pending -> sent       the LMS took the score
            -> skipped    the submission was ungradable: nothing is posted (never a 0)
            -> refused    the LMS refused it for good (400/403/404/409/422): kept, shown
            -> gave_up    the LMS stayed unreachable through every retry: kept, shown

Times are ISO 8601 text in UTC, as in the service's other tables.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from grader.store.schema import metadata

SCORE_STATES = ("pending", "sent", "skipped", "refused", "gave_up")
POLICIES = ("best", "latest")

lti_platforms = Table(
    "lti_platforms",
    metadata,
    Column("platform_id", Integer, primary_key=True, autoincrement=True),
    Column("issuer", Text, nullable=False),
    Column("client_id", Text, nullable=False),
    Column("auth_url", Text, nullable=False),
    Column("token_url", Text, nullable=False),
    Column("jwks_url", Text, nullable=False),
    Column("token_audience", Text, nullable=True),  # None: the token URL
    Column("name", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    UniqueConstraint("issuer", "client_id", name="lti_platforms_registration"),
)

lti_deployments = Table(
    "lti_deployments",
    metadata,
    Column("platform_id", Integer, ForeignKey("lti_platforms.platform_id"), nullable=False),
    Column("deployment_id", Text, nullable=False),
    PrimaryKeyConstraint("platform_id", "deployment_id"),
)

lti_keys = Table(
    "lti_keys",
    metadata,
    Column("kid", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),  # "tool" or "session"
    Column("jwk", Text, nullable=False),  # the private key as a JWK (JSON)
    Column("created_at", Text, nullable=False),
)
Index("lti_keys_by_kind", lti_keys.c.kind, lti_keys.c.created_at)

lti_states = Table(
    "lti_states",
    metadata,
    Column("state", String(64), primary_key=True),
    Column("nonce", String(64), nullable=False),
    Column("platform_id", Integer, ForeignKey("lti_platforms.platform_id"), nullable=False),
    Column("target_link_uri", Text, nullable=False),
    Column("login_hint", Text, nullable=False),  # kept to start the login again in a new tab
    Column("message_hint", Text, nullable=True),
    Column("expires_at", Text, nullable=False),
)

lti_users = Table(
    "lti_users",
    metadata,
    Column("user_id", Integer, primary_key=True, autoincrement=True),
    Column("platform_id", Integer, ForeignKey("lti_platforms.platform_id"), nullable=False),
    Column("deployment_id", Text, nullable=False),
    Column("sub", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("student", Text, ForeignKey("students.name"), nullable=False, unique=True),
    Column("created_at", Text, nullable=False),
    UniqueConstraint("platform_id", "deployment_id", "sub", name="lti_users_identity"),
)

lti_courses = Table(
    "lti_courses",
    metadata,
    Column("course_id", Integer, primary_key=True, autoincrement=True),
    Column("platform_id", Integer, ForeignKey("lti_platforms.platform_id"), nullable=False),
    Column("deployment_id", Text, nullable=False),
    Column("context_id", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("policy", String(8), nullable=False),  # best or latest
    UniqueConstraint("platform_id", "deployment_id", "context_id", name="lti_courses_context"),
)

lti_links = Table(
    "lti_links",
    metadata,
    Column("link_id", Integer, primary_key=True, autoincrement=True),
    Column("course_id", Integer, ForeignKey("lti_courses.course_id"), nullable=False),
    Column("resource_link_id", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("exercise", String(32), nullable=False),
    Column("lineitem", Text, nullable=True),  # None: the link takes no scores
    UniqueConstraint("course_id", "resource_link_id", name="lti_links_resource"),
)

lti_scores = Table(
    "lti_scores",
    metadata,
    Column("submission_id", Text, ForeignKey("submissions.submission_id"), primary_key=True),
    Column("user_id", Integer, ForeignKey("lti_users.user_id"), nullable=False),
    Column("link_id", Integer, ForeignKey("lti_links.link_id"), nullable=False),
    Column("state", String(8), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", Text, nullable=False),
    Column("claimed_until", Text, nullable=True),  # an API node is posting it until then
    Column("score_given", Float, nullable=True),  # what was posted
    Column("score_maximum", Float, nullable=True),
    Column("last_status", Integer, nullable=True),  # the LMS's last HTTP status
    Column("last_error", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    Column("done_at", Text, nullable=True),
)
Index("lti_scores_due", lti_scores.c.state, lti_scores.c.next_attempt_at)
Index("lti_scores_by_link", lti_scores.c.link_id, lti_scores.c.user_id)
