"""The LTI rows, behind `LtiStore`, on the service's own engine (SQLite or PostgreSQL).

Everything that must hold across API nodes lives here, in the shared database: a login's
state and nonce are taken once (`take_state` deletes the row it returns), and an outbox row
is posted by one node at a time (`claim` is a conditional update that one caller wins).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, and_, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from grader.service.lti.tables import (
    lti_courses,
    lti_deployments,
    lti_keys,
    lti_links,
    lti_platforms,
    lti_scores,
    lti_states,
    lti_users,
)
from grader.store.schema import current_submissions as submissions
from grader.store.schema import students


def stamp(moment: datetime | None = None) -> str:
    """ISO 8601 in UTC with microseconds always written, so that text order is time order."""
    return (moment or datetime.now(UTC)).isoformat(timespec="microseconds")


def later(seconds: float) -> str:
    return stamp(datetime.now(UTC) + timedelta(seconds=seconds))


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
class Seat:
    """Where a launch puts its user: the rows it found or created."""

    user_id: int
    student: str  # the students row their submissions are filed under
    course_id: int
    link_id: int


@dataclass(frozen=True)
class Entry:
    """What a validated launch tells the store (see launch.Launch for the claims)."""

    platform_id: int
    deployment_id: str
    sub: str
    name: str
    context_id: str
    course_title: str
    resource_link_id: str
    link_title: str
    exercise: str
    lineitem: str | None


class LtiStore:
    def __init__(self, engine: Engine):
        self.engine = engine

    # ---- registrations -------------------------------------------------------------------
    def save_platform(self, values: dict, deployment_ids: list[str]) -> tuple[Platform, bool]:
        """Add a registration, or update the one with the same (issuer, client id); the
        deployment ids are added to those it had. (platform, True when it is new)."""
        key = and_(
            lti_platforms.c.issuer == values["issuer"],
            lti_platforms.c.client_id == values["client_id"],
        )
        with self.transaction() as c:
            found = c.scalar(select(lti_platforms.c.platform_id).where(key))
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

    def platforms(self) -> list[Platform]:
        with self.engine.connect() as c:
            ids = c.scalars(select(lti_platforms.c.platform_id).order_by("platform_id")).all()
        return [self.platform(i) for i in ids]

    def find_platform(self, issuer: str, client_id: str) -> Platform | None:
        where = and_(lti_platforms.c.issuer == issuer, lti_platforms.c.client_id == client_id)
        with self.engine.connect() as c:
            found = c.scalar(select(lti_platforms.c.platform_id).where(where))
        return self.platform(found) if found is not None else None

    def platform(self, platform_id: int) -> Platform | None:
        with self.engine.connect() as c:
            row = (
                c.execute(select(lti_platforms).where(lti_platforms.c.platform_id == platform_id))
                .mappings()
                .first()
            )
            deployments = c.scalars(
                select(lti_deployments.c.deployment_id)
                .where(lti_deployments.c.platform_id == platform_id)
                .order_by(lti_deployments.c.deployment_id)
            ).all()
        return Platform(**row, deployment_ids=tuple(deployments)) if row else None

    # ---- this tool's keys ----------------------------------------------------------------
    def keys(self, kind: str) -> list[tuple[str, str]]:
        """(kid, private JWK as JSON) of one kind, newest first."""
        query = select(lti_keys.c.kid, lti_keys.c.jwk).where(lti_keys.c.kind == kind)
        query = query.order_by(lti_keys.c.created_at.desc(), lti_keys.c.kid)
        with self.engine.connect() as c:
            return [(kid, jwk) for kid, jwk in c.execute(query)]

    def add_key(self, kind: str, kid: str, jwk: str, keep: int) -> None:
        """Store a new key; only the newest `keep` of its kind are kept."""
        with self.transaction() as c:
            c.execute(insert(lti_keys).values(kid=kid, kind=kind, jwk=jwk, created_at=stamp()))
            newest = select(lti_keys.c.kid).where(lti_keys.c.kind == kind)
            newest = newest.order_by(lti_keys.c.created_at.desc(), lti_keys.c.kid).limit(keep)
            kept = set(c.scalars(newest))
            c.execute(delete(lti_keys).where(lti_keys.c.kind == kind, lti_keys.c.kid.not_in(kept)))

    # ---- logins --------------------------------------------------------------------------
    def add_state(self, state: LoginState) -> None:
        with self.transaction() as c:
            c.execute(insert(lti_states).values(**state.__dict__))

    def take_state(self, state: str) -> LoginState | None:
        """The login's state, once: the row is deleted; None if unknown, used or expired."""
        where = lti_states.c.state == state
        with self.transaction() as c:
            row = c.execute(select(lti_states).where(where)).mappings().first()
            if row is None or not c.execute(delete(lti_states).where(where)).rowcount:
                return None
        found = LoginState(**row)
        return found if found.expires_at > stamp() else None

    def peek_state(self, state: str) -> LoginState | None:
        """The login's state without taking it (to start the login again elsewhere)."""
        with self.engine.connect() as c:
            row = c.execute(select(lti_states).where(lti_states.c.state == state)).mappings()
            found = row.first()
        return LoginState(**found) if found and found["expires_at"] > stamp() else None

    def prune_states(self) -> int:
        with self.transaction() as c:
            return c.execute(delete(lti_states).where(lti_states.c.expires_at < stamp())).rowcount

    # ---- users, courses and links --------------------------------------------------------
    def seat(self, entry: Entry, policy: str = "best") -> Seat:
        """Find or create the launch's user, course and link, with the LMS's latest names."""
        with self.transaction() as c:
            user_id, student = self._user(c, entry)
            course = {"platform_id": entry.platform_id, "deployment_id": entry.deployment_id}
            course_id = _upsert(
                c,
                lti_courses,
                {**course, "context_id": entry.context_id},
                {"title": entry.course_title},
                {"policy": policy},
            )
            link = {"course_id": course_id, "resource_link_id": entry.resource_link_id}
            changes = {"title": entry.link_title, "exercise": entry.exercise}
            if entry.lineitem is not None:
                changes["lineitem"] = entry.lineitem
            link_id = _upsert(c, lti_links, link, changes, {"lineitem": None})
        return Seat(user_id, student, course_id, link_id)

    def _user(self, c: Connection, entry: Entry) -> tuple[int, str]:
        key = {"platform_id": entry.platform_id, "deployment_id": entry.deployment_id}
        key["sub"] = entry.sub
        where = and_(*(lti_users.c[k] == v for k, v in key.items()))
        found = c.execute(select(lti_users.c.user_id, lti_users.c.student).where(where)).first()
        if found is not None:
            c.execute(update(lti_users).where(where).values(name=entry.name))
            return found[0], found[1]
        student = "lti:" + secrets.token_hex(16)  # ":" is never in a self-chosen name
        unusable = "lti:" + secrets.token_hex(32)  # no key hashes to it: no name-plus-key use
        c.execute(insert(students).values(name=student, key_hash=unusable, created_at=stamp()))
        row = {**key, "name": entry.name, "student": student, "created_at": stamp()}
        return c.execute(insert(lti_users).values(**row)).inserted_primary_key[0], student

    def course(self, course_id: int) -> dict | None:
        with self.engine.connect() as c:
            query = select(lti_courses).where(lti_courses.c.course_id == course_id)
            row = c.execute(query).mappings().first()
        return dict(row) if row else None

    def set_policy(self, course_id: int, policy: str) -> None:
        with self.transaction() as c:
            c.execute(
                update(lti_courses)
                .where(lti_courses.c.course_id == course_id)
                .values(policy=policy)
            )

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


def due_clause(now: str):
    """Outbox rows a drainer may take now: pending, due, not claimed by a live drainer,
    and their submission finished (done or ungradable)."""
    return and_(
        lti_scores.c.state == "pending",
        lti_scores.c.next_attempt_at <= now,
        or_(lti_scores.c.claimed_until.is_(None), lti_scores.c.claimed_until < now),
        submissions.c.status.in_(("done", "ungradable")),
    )
