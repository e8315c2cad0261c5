"""The LTI tables (migration 0004 creates them) and `LtiStore`, their queries, on the
service's engine (SQLite or PostgreSQL). What must hold across API nodes lives here: a
login's state is taken once (`take_state` deletes the row it returns).

    lti_platforms    a registration: an LMS's issuer, the client id it gave this tool, and
                     its URLs (OIDC authorisation, token, key set)
    lti_deployments  the deployment ids of a registration that may launch this tool
    lti_keys         this tool's keys: RSA ("tool", published at /lti/jwks, the newest
                     signs) and HMAC ("session", signs the page's tokens, never published)
    lti_states       login attempts: state and nonce, single use, LOGIN_TTL_S of life
    lti_users        an LMS user (platform, deployment, sub) and the students row their
                     submissions are filed under
    lti_courses      an LMS course (context) and its passback policy: best or latest
    lti_links        a resource link of a course: its exercise and AGS line item
    lti_scores       the passback outbox, one row per Submit from a launch (scores.py):
                     pending -> sent | skipped (ungradable: never a 0) | refused (final
                     4xx, kept and shown) | gave_up (unreachable through every retry)

Times are ISO 8601 text in UTC, as in the service's other tables.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from grader.store import Also
from grader.store.schema import metadata, students

LOGIN_TTL_S = 600  # a login must come back as a launch within 10 minutes
PLATFORM = "lti_platforms.platform_id"

lti_platforms = sa.Table(
    "lti_platforms",
    metadata,
    sa.Column("platform_id", sa.Integer, primary_key=True, autoincrement=True),
    *(
        sa.Column(n, sa.Text, nullable=False)
        for n in ("issuer", "client_id", "auth_url", "token_url")
    ),
    sa.Column("jwks_url", sa.Text, nullable=False),
    sa.Column("token_audience", sa.Text, nullable=True),  # None: the token URL
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("created_at", sa.Text, nullable=False),
    sa.UniqueConstraint("issuer", "client_id", name="lti_platforms_registration"),
)
lti_deployments = sa.Table(
    "lti_deployments",
    metadata,
    sa.Column("platform_id", sa.Integer, sa.ForeignKey(PLATFORM), nullable=False),
    sa.Column("deployment_id", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("platform_id", "deployment_id"),
)
lti_keys = sa.Table(
    "lti_keys",
    metadata,
    sa.Column("kid", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),  # "tool" or "session"
    sa.Column("jwk", sa.Text, nullable=False),  # the private key as a JWK (JSON)
    sa.Column("created_at", sa.Text, nullable=False),
)
sa.Index("lti_keys_by_kind", lti_keys.c.kind, lti_keys.c.created_at)
lti_states = sa.Table(
    "lti_states",
    metadata,
    sa.Column("state", sa.String(64), primary_key=True),  # "<address tag>.<random>"
    sa.Column("nonce", sa.String(64), nullable=False),
    sa.Column("platform_id", sa.Integer, sa.ForeignKey(PLATFORM), nullable=False),
    sa.Column("target_link_uri", sa.Text, nullable=False),
    sa.Column("login_hint", sa.Text, nullable=False),  # kept to start the login again in a new tab
    sa.Column("message_hint", sa.Text, nullable=True),
    sa.Column("expires_at", sa.Text, nullable=False),
)
lti_users = sa.Table(
    "lti_users",
    metadata,
    sa.Column("user_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("platform_id", sa.Integer, sa.ForeignKey(PLATFORM), nullable=False),
    sa.Column("deployment_id", sa.Text, nullable=False),
    sa.Column("sub", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("student", sa.Text, sa.ForeignKey("students.name"), nullable=False, unique=True),
    sa.Column("created_at", sa.Text, nullable=False),
    sa.UniqueConstraint("platform_id", "deployment_id", "sub", name="lti_users_identity"),
)
lti_courses = sa.Table(
    "lti_courses",
    metadata,
    sa.Column("course_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("platform_id", sa.Integer, sa.ForeignKey(PLATFORM), nullable=False),
    sa.Column("deployment_id", sa.Text, nullable=False),
    sa.Column("context_id", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("policy", sa.String(8), nullable=False),  # best or latest
    sa.UniqueConstraint("platform_id", "deployment_id", "context_id", name="lti_courses_context"),
)
lti_links = sa.Table(
    "lti_links",
    metadata,
    sa.Column("link_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("course_id", sa.Integer, sa.ForeignKey("lti_courses.course_id"), nullable=False),
    sa.Column("resource_link_id", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("exercise", sa.String(32), nullable=False),
    sa.Column("lineitem", sa.Text, nullable=True),  # None: the link takes no scores
    sa.UniqueConstraint("course_id", "resource_link_id", name="lti_links_resource"),
)
lti_scores = sa.Table(
    "lti_scores",
    metadata,
    sa.Column(
        "submission_id", sa.Text, sa.ForeignKey("submissions.submission_id"), primary_key=True
    ),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("lti_users.user_id"), nullable=False),
    sa.Column("link_id", sa.Integer, sa.ForeignKey("lti_links.link_id"), nullable=False),
    sa.Column("state", sa.String(8), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", sa.Text, nullable=False),
    sa.Column("claimed_until", sa.Text, nullable=True),  # an API node is posting it until then
    sa.Column("score_given", sa.Float, nullable=True),  # what was posted
    sa.Column("score_maximum", sa.Float, nullable=True),
    sa.Column("last_status", sa.Integer, nullable=True),  # the LMS's last HTTP status
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("created_at", sa.Text, nullable=False),
    sa.Column("done_at", sa.Text, nullable=True),
)
sa.Index("lti_scores_due", lti_scores.c.state, lti_scores.c.next_attempt_at)
sa.Index("lti_scores_by_link", lti_scores.c.link_id, lti_scores.c.user_id)


def stamp(moment: datetime | None = None) -> str:
    """ISO 8601 in UTC with microseconds always written, so that text order is time order."""
    return (moment or datetime.now(UTC)).isoformat(timespec="microseconds")


def later(seconds: float) -> str:
    return stamp(datetime.now(UTC) + timedelta(seconds=seconds))


def address_tag(address: str | None) -> str:
    """A short tag of a client's address (an IPv6 client by its /64), which starts the
    state of each login it begins, so that its live logins can be counted."""
    try:
        ip = ipaddress.ip_address(address or "")
        if ip.version == 6:
            address = str(ipaddress.ip_network(f"{ip}/64", strict=False))
    except ValueError:
        pass
    return hashlib.sha256((address or "").encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Platform:
    """A registration: one LMS (issuer) and the client id it gave this tool."""

    platform_id: int
    issuer: str
    client_id: str
    auth_url: str
    token_url: str
    jwks_url: str
    token_audience: str | None
    name: str
    created_at: str
    deployment_ids: tuple[str, ...] = ()

    @property
    def audience(self) -> str:
        """The `aud` of this tool's token assertions: the token URL unless the LMS says."""
        return self.token_audience or self.token_url


@dataclass(frozen=True)
class LoginState:
    state: str
    nonce: str
    platform_id: int
    target_link_uri: str
    login_hint: str
    message_hint: str | None
    expires_at: str


@dataclass(frozen=True)
class Launch:
    """A launch that passed every check (launches.py): who, where, and what to open."""

    platform_id: int
    deployment_id: str
    sub: str
    name: str
    role: str  # student or instructor
    context_id: str
    course_title: str
    resource_link_id: str
    link_title: str
    exercise: str | None  # the exercise the link asks for; None: not said
    lineitem: str | None  # the AGS line item scores go to; None: no grades for this link
    due_at: str | None = None  # the link's due date as the launch's custom `due_at` says
    readable_lineitem: tuple[str, str] | None = None  # (line item URL, a scope to read it)


@dataclass(frozen=True)
class Seat:
    """Where a launch puts its user: the rows it found or created."""

    user_id: int
    student: str  # the students row their submissions are filed under
    course_id: int
    link_id: int


class LtiStore:
    def __init__(self, engine: Engine):
        self.engine = engine

    def save_platform(self, values: dict, deployment_ids: list[str]) -> tuple[Platform, bool]:
        """Add a registration, or update the one with the same (issuer, client id), adding
        the deployment ids: (platform, True when it is new)."""
        p = lti_platforms.c
        key = and_(p.issuer == values["issuer"], p.client_id == values["client_id"])
        with self.transaction() as c:
            found = c.scalar(select(p.platform_id).where(key))
            created = found is None
            if created:
                row = {**values, "created_at": stamp()}
                found = c.execute(insert(lti_platforms).values(**row)).inserted_primary_key[0]
            else:
                c.execute(update(lti_platforms).where(key).values(**values))
            mine = lti_deployments.c.platform_id == found
            known = set(c.scalars(select(lti_deployments.c.deployment_id).where(mine)))
            for deployment_id in dict.fromkeys(deployment_ids):
                if deployment_id not in known:
                    row = {"platform_id": found, "deployment_id": deployment_id}
                    c.execute(insert(lti_deployments).values(**row))
        return self.platform(found), created

    def platforms(self, *where) -> list[Platform]:
        """The registrations (those that match `where`), with their deployment ids."""
        d = lti_deployments.c
        with self.engine.connect() as c:
            rows = c.execute(select(lti_platforms).where(*where).order_by("platform_id")).all()
            deployments = c.execute(
                select(d.platform_id, d.deployment_id).order_by(d.deployment_id)
            )
            deployments = deployments.all()
        return [
            Platform(
                **r._mapping, deployment_ids=tuple(i for p, i in deployments if p == r.platform_id)
            )
            for r in rows
        ]

    def find_platform(self, issuer: str, client_id: str) -> Platform | None:
        p = lti_platforms.c
        return next(iter(self.platforms(p.issuer == issuer, p.client_id == client_id)), None)

    def platform(self, platform_id: int) -> Platform | None:
        return next(iter(self.platforms(lti_platforms.c.platform_id == platform_id)), None)

    def keys(self, kind: str) -> list[tuple[str, str]]:
        """(kid, private JWK as JSON) of this tool's keys of one kind, newest first."""
        k = lti_keys.c
        query = select(k.kid, k.jwk).where(k.kind == kind).order_by(k.created_at.desc(), k.kid)
        with self.engine.connect() as c:
            return [(kid, jwk) for kid, jwk in c.execute(query)]

    def add_key(self, kind: str, kid: str, jwk: str, keep: int) -> None:
        """Store a new key; only the newest `keep` of its kind are kept."""
        k = lti_keys.c
        with self.transaction() as c:
            c.execute(insert(lti_keys).values(kid=kid, kind=kind, jwk=jwk, created_at=stamp()))
            newest = select(k.kid).where(k.kind == kind).order_by(k.created_at.desc(), k.kid)
            kept = set(c.scalars(newest.limit(keep)))
            c.execute(delete(lti_keys).where(k.kind == kind, k.kid.not_in(kept)))

    def add_state(self, state: LoginState, most_per_address: int) -> bool:
        """Store a login's state unless its address (the tag before the state's ".") has
        `most_per_address` live logins already: False then, and nothing is stored."""
        s = lti_states.c
        tag = state.state.split(".", 1)[0] + ".%"
        with self.transaction() as c:
            live = select(func.count()).where(s.state.like(tag), s.expires_at > stamp())
            if c.scalar(live) >= most_per_address:
                return False
            c.execute(insert(lti_states).values(**asdict(state)))
        return True

    def take_state(self, state: str) -> LoginState | None:
        """The login's state, once: the row is deleted; None if unknown, used or expired."""
        where = lti_states.c.state == state
        with self.transaction() as c:
            row = c.execute(select(lti_states).where(where)).mappings().first()
            if row is None or not c.execute(delete(lti_states).where(where)).rowcount:
                return None
        return LoginState(**row) if row["expires_at"] > stamp() else None

    def peek_state(self, state: str) -> LoginState | None:
        """The login's state without taking it (to start the login again elsewhere)."""
        with self.engine.connect() as c:
            row = c.execute(select(lti_states).where(lti_states.c.state == state)).mappings()
            found = row.first()
        return LoginState(**found) if found and found["expires_at"] > stamp() else None

    def prune_states(self) -> int:
        with self.transaction() as c:
            return c.execute(delete(lti_states).where(lti_states.c.expires_at < stamp())).rowcount

    def seat(self, launch: Launch) -> Seat:
        """Find or create the launch's user, course and link, with the LMS's latest names
        (`launch.exercise` is the exercise the link opens)."""
        with self.transaction() as c:
            user_id, student = self._user(c, launch)
            key = {"platform_id": launch.platform_id, "deployment_id": launch.deployment_id}
            key["context_id"] = launch.context_id
            changes = {"title": launch.course_title}
            course_id = _upsert(c, lti_courses, key, changes, {"policy": "best"})
            key = {"course_id": course_id, "resource_link_id": launch.resource_link_id}
            changes = {"title": launch.link_title, "exercise": launch.exercise}
            if launch.lineitem is not None:
                changes["lineitem"] = launch.lineitem
            link_id = _upsert(c, lti_links, key, changes, {"lineitem": None})
        return Seat(user_id, student, course_id, link_id)

    def _user(self, c: Connection, launch: Launch) -> tuple[int, str]:
        key = {"platform_id": launch.platform_id, "deployment_id": launch.deployment_id}
        key["sub"] = launch.sub
        where = and_(*(lti_users.c[k] == v for k, v in key.items()))
        found = c.execute(select(lti_users.c.user_id, lti_users.c.student).where(where)).first()
        if found is not None:
            c.execute(update(lti_users).where(where).values(name=launch.name))
            return found[0], found[1]
        student = "lti:" + secrets.token_hex(16)  # ":" is never in a self-chosen name
        unusable = "lti:" + secrets.token_hex(32)  # no key hashes to it: no name-plus-key use
        c.execute(insert(students).values(name=student, key_hash=unusable, created_at=stamp()))
        row = {**key, "name": launch.name, "student": student, "created_at": stamp()}
        return c.execute(insert(lti_users).values(**row)).inserted_primary_key[0], student

    def course_policy(self, course_id: int) -> str | None:
        where = lti_courses.c.course_id == course_id
        with self.engine.connect() as c:
            return c.scalar(select(lti_courses.c.policy).where(where))

    def set_policy(self, course_id: int, policy: str) -> None:
        where = lti_courses.c.course_id == course_id
        with self.transaction() as c:
            c.execute(update(lti_courses).where(where).values(policy=policy))

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite), committed on leaving."""
        with self.engine.connect().execution_options(write=True) as c, c.begin():
            yield c


def _upsert(c: Connection, table, key: dict, changes: dict, defaults: dict) -> int:
    """The id of the row with `key` after applying `changes`; inserted when missing (a
    concurrent insert of the same key is caught and the row updated instead)."""
    where = and_(*(table.c[k] == v for k, v in key.items()))
    primary = next(iter(table.primary_key.columns))
    found = c.scalar(select(primary).where(where))
    if found is None:
        try:
            with c.begin_nested():
                row = {**defaults, **key, **changes}
                return c.execute(insert(table).values(**row)).inserted_primary_key[0]
        except IntegrityError:
            found = c.scalar(select(primary).where(where))
    c.execute(update(table).where(where).values(**changes))
    return found


def row_writer(user_id: int, link_id: int) -> Also:
    """Write the outbox row in the transaction that stores the submission it belongs to."""

    def write(c: Connection, submission_id: str) -> None:
        row = {"submission_id": submission_id, "user_id": user_id, "link_id": link_id}
        row |= {"state": "pending", "attempts": 0, "next_attempt_at": stamp()}
        c.execute(insert(lti_scores).values(**row, created_at=stamp()))

    return write
