"""Grade passback: the outbox (table lti_scores), Assignment and Grade Services (LTI AGS
2.0, 3.4) and the drainer that posts the outbox's scores.

A row is written in the submission's own transaction (`rows.row_writer`): an acknowledged
Submit always has its row, one that was not has none. Every API node runs a drainer
(`Passback.start()`, from the app's lifespan); it wakes every POLL_S seconds, or at once
when a Submit of this node was graded, and claims due rows with a conditional update that
one node wins for CLAIM_S (a node that dies while posting leaves a claim that lapses, and
another posts again: the LMS keeps one score per user and line item). For each row:

    ungradable submission   -> skipped: nothing is posted (a grader failure is never a 0)
    graded                  -> the course's score for that user and link (best or latest)
        the LMS took it           -> sent
        it refused (final 4xx)    -> refused, with the LMS's answer, for the instructor
        unreachable, 5xx, 429     -> again after retry_s, doubling up to an hour (the LMS's
                                     Retry-After honoured); after MAX_ATTEMPTS -> gave_up

The token comes from the client-credentials grant (IMS Security Framework 4.1) with a JWT
assertion signed by the tool's newest key (`iss` and `sub` the client id, `aud` the token
URL or the audience the LMS names, a unique `jti`, five minutes of life); tokens are cached
per registration and scope until a minute before they expire, and a 401 drops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

import httpx
from joserfc import jwt
from sqlalchemy import select, update

from grader.service.background import end_tasks
from grader.service.credits import Terms
from grader.service.lti.credentials import ToolKeys
from grader.service.lti.launches import SCORE_SCOPE
from grader.service.lti.rows import (
    LtiStore,
    Platform,
    later,
    lti_courses,
    lti_links,
    lti_platforms,
    lti_scores,
    lti_users,
    stamp,
)
from grader.store import Store
from grader.store.schema import current_submissions, submissions
from grader.term import credited

log = logging.getLogger(__name__)

CLAIM_S = 120.0  # longer than a post can take (two requests of at most 20 s each)
POLL_S = 1.0
BATCH = 8
CLOSE_WAIT_S = 5.0  # at close, a round's ms of database calls end; a post stuck longer is cut
MAX_ATTEMPTS = 12  # with a 30 s start: about 5 hours of trying
MAX_DELAY_S = 3600.0
ASSERTION_LIFE_S = 300
TOKEN_MARGIN_S = 60  # a cached token is renewed this long before it expires
FINAL = {400, 403, 404, 405, 409, 410, 413, 415, 422}  # the LMS will not take this score
UNGRADABLE = "ungradable (the grader failed, not the student): no score was posted"


def submission_state():
    """The one read of submissions the outbox makes: each submission's current grading's
    status, score and times, as a subquery that every outbox query joins on `submission_id`."""
    s = current_submissions.c
    columns = (s.submission_id, s.exercise, s.status, s.score, s.max_score, s.created_at)
    return select(*columns, s.finished_at).subquery("submission_state")


class Outbox:
    """The outbox's queries. Rows come back as SQLAlchemy rows (named attributes)."""

    def __init__(self, store: LtiStore):
        self.store = store

    def due(self, limit: int) -> list[str]:
        """Rows a drainer may take now: pending, due, unclaimed, their submission finished."""
        query = _due().order_by(lti_scores.c.next_attempt_at).limit(limit)
        with self.store.engine.connect() as c:
            return list(c.scalars(query))

    def claim(self, submission_id: str):
        """Take a due row for CLAIM_S, with what posting it needs; None when another
        drainer has it or it is not due."""
        o, state = lti_scores.c, submission_state()
        due = _due().where(o.submission_id == submission_id).scalar_subquery()
        query = (
            select(o.submission_id, state.c.status, o.attempts, o.user_id, o.link_id)
            .add_columns(lti_platforms.c.platform_id, lti_users.c.sub, lti_links.c.lineitem)
            .add_columns(lti_courses.c.policy)
            .select_from(lti_scores)
            .join(state, state.c.submission_id == o.submission_id)
            .join(lti_users, lti_users.c.user_id == o.user_id)
            .join(lti_links, lti_links.c.link_id == o.link_id)
            .join(lti_courses, lti_courses.c.course_id == lti_links.c.course_id)
            .join(lti_platforms, lti_platforms.c.platform_id == lti_users.c.platform_id)
            .where(o.submission_id == submission_id)
        )
        # the row's own conditions stand in the UPDATE's WHERE: PostgreSQL checks them again
        # on the row after a concurrent claim commits (a subquery alone is not checked again)
        now = stamp()
        free = o.claimed_until.is_(None) | (o.claimed_until < now)
        with self.store.transaction() as c:
            claimed = update(lti_scores).where(o.submission_id.in_(due), free)
            if not c.execute(claimed.values(claimed_until=later(CLAIM_S))).rowcount:
                return None
            return c.execute(query).first()

    def graded(self, user_id: int, link_id: int) -> list[CountedScore]:
        """The user's graded (done) Submits through this link that count, oldest first, each
        with its credited score (the course's schedule, by when the Submit was accepted)."""
        o, state, sub = lti_scores.c, submission_state(), submissions.c
        query = (
            select(state.c.score, state.c.max_score, state.c.finished_at, state.c.exercise)
            .add_columns(state.c.created_at, sub.course, sub.student)
            .join(lti_scores, o.submission_id == state.c.submission_id)
            .join(submissions, sub.submission_id == state.c.submission_id)
            .where(o.user_id == user_id, o.link_id == link_id, state.c.status == "done")
            .order_by(state.c.created_at)
        )
        with self.store.engine.connect() as c:
            rows = c.execute(query).all()
        terms, found = Terms(Store(self.store.engine)), []
        for row in rows:
            earned = terms.credit(row.course, row.exercise, row.student, row.created_at)
            if earned["counted"]:
                given = credited(row.score, row.max_score, earned["credit"])
                found.append(CountedScore(given, row.max_score, row.finished_at))
        return found

    def course_rows(self, course_id: int):
        """Every Submit made from a launch in the course, newest first, for its instructor."""
        o, state = lti_scores.c, submission_state()
        s = state.c
        query = (
            select(s.submission_id, lti_users.c.name, lti_links.c.title.label("link_title"))
            .add_columns(s.exercise, s.created_at, s.status, s.score, s.max_score)
            .add_columns(o.state, o.attempts, o.last_status, o.last_error, o.score_given)
            .select_from(lti_scores)
            .join(state, s.submission_id == o.submission_id)
            .join(lti_users, lti_users.c.user_id == o.user_id)
            .join(lti_links, lti_links.c.link_id == o.link_id)
            .where(lti_links.c.course_id == course_id)
            .order_by(s.created_at.desc())
        )
        with self.store.engine.connect() as c:
            return c.execute(query).all()

    def update(self, submission_id: str, **values) -> None:
        where = lti_scores.c.submission_id == submission_id
        with self.store.transaction() as c:
            c.execute(update(lti_scores).where(where).values(**values))

    def settle(self, submission_id: str, state: str, **fields) -> None:
        """End a row: sent, skipped, refused or gave_up (with what was posted or why not)."""
        self.update(submission_id, state=state, done_at=stamp(), claimed_until=None, **fields)

    def retry_failed(self, course_id: int) -> int:
        """Queue the course's refused and given-up rows again (after the LMS was fixed)."""
        mine = select(lti_links.c.link_id).where(lti_links.c.course_id == course_id)
        again = {"state": "pending", "attempts": 0, "next_attempt_at": stamp(), "done_at": None}
        failed = lti_scores.c.state.in_(("refused", "gave_up"))
        with self.store.transaction() as c:
            where = lti_scores.c.link_id.in_(mine.scalar_subquery())
            return c.execute(update(lti_scores).where(where, failed).values(**again)).rowcount


def _due():
    now, o, state = stamp(), lti_scores.c, submission_state()
    return (
        select(o.submission_id)
        .join(state, state.c.submission_id == o.submission_id)
        .where(
            o.state == "pending",
            o.next_attempt_at <= now,
            o.claimed_until.is_(None) | (o.claimed_until < now),
            state.c.status.in_(("done", "ungradable")),
        )
    )


@dataclass(frozen=True)
class CountedScore:
    """A counted Submit's credited score, as the outbox posts it."""

    score: float
    max_score: float
    finished_at: str


@dataclass(frozen=True)
class Score:
    user_id: str  # the LMS's `sub` for the student
    given: float
    maximum: float
    timestamp: str  # ISO 8601: when the score was reached (the LMS keeps the newest)


@dataclass(frozen=True)
class Outcome:
    kind: Literal["sent", "refused", "retry"]
    status: int | None = None  # the LMS's HTTP status; None when it could not be reached
    message: str = ""
    retry_after_s: float | None = None


def score_for(graded: list, policy: str, user: str) -> Score | None:
    """The score a course posts for a user: their best or their latest graded Submit,
    stamped with the time the newest of them was graded (the LMS keeps the newest)."""
    if not graded:
        return None
    best = max(graded, key=lambda g: g.score / g.max_score if g.max_score else 0.0)
    chosen = graded[-1] if policy == "latest" else best
    return Score(user, chosen.score, chosen.max_score, max(g.finished_at for g in graded))


class TokenRefused(Exception):
    """The platform's token endpoint did not hand out a token."""


class AgsClient:
    def __init__(self, http: httpx.AsyncClient, keys: ToolKeys):
        self.http = http
        self.keys = keys
        self._tokens: dict[tuple[int, str], tuple[str, float]] = {}

    async def post_score(self, platform: Platform, lineitem: str, score: Score) -> Outcome:
        try:
            response = await self._post(platform, lineitem, score)
            if response.status_code == 401:  # a token the platform dropped early: once more
                self._tokens.pop((platform.platform_id, SCORE_SCOPE), None)
                response = await self._post(platform, lineitem, score)
        except TokenRefused as error:
            return Outcome("retry", None, str(error))
        except httpx.HTTPError as error:
            return Outcome("retry", None, f"{type(error).__name__}: {error}".strip())
        status = response.status_code
        if 200 <= status < 300:
            return Outcome("sent", status)
        message = f"the LMS answered {status}: {_excerpt(response)}"
        if status in FINAL:
            return Outcome("refused", status, message)
        try:
            retry_after = max(0.0, float(response.headers.get("Retry-After", "")))
        except ValueError:
            retry_after = None
        return Outcome("retry", status, message, retry_after)

    async def _post(self, platform: Platform, lineitem: str, score: Score) -> httpx.Response:
        token = await self.token(platform, SCORE_SCOPE)
        headers = {"Authorization": f"Bearer {token}"}
        headers["Content-Type"] = "application/vnd.ims.lis.v1.score+json"
        body = {"userId": score.user_id, "scoreGiven": score.given}
        body |= {"scoreMaximum": score.maximum, "activityProgress": "Completed"}
        body |= {"gradingProgress": "FullyGraded", "timestamp": score.timestamp}
        parts = urlsplit(lineitem)  # /scores after the path, before any query string
        url = urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))
        return await self.http.post(url, json=body, headers=headers)

    async def token(self, platform: Platform, scope: str) -> str:
        cached = self._tokens.get((platform.platform_id, scope))
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        key, now = self.keys.signing_key(), int(time.time())
        claims = {"iss": platform.client_id, "sub": platform.client_id}
        claims |= {"aud": platform.audience, "iat": now, "exp": now + ASSERTION_LIFE_S}
        claims["jti"] = secrets.token_urlsafe(24)
        assertion = jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "JWT"}, claims, key)
        form = {"grant_type": "client_credentials", "client_assertion": assertion}
        form["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        response = await self.http.post(platform.token_url, data={**form, "scope": scope})
        try:
            response.raise_for_status()
            body = response.json()
            token, life = str(body["access_token"]), float(body.get("expires_in", 3600))
        except (httpx.HTTPStatusError, ValueError, KeyError, TypeError):
            refusal = f"the LMS's token endpoint answered {response.status_code}"
            raise TokenRefused(f"{refusal}: {_excerpt(response)}") from None
        expires = time.monotonic() + life - TOKEN_MARGIN_S
        self._tokens[(platform.platform_id, scope)] = (token, expires)
        return token


def _excerpt(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return (text[:300] + "…") if len(text) > 300 else (text or response.reason_phrase)


class Passback:
    def __init__(self, store: LtiStore, ags: AgsClient, first_retry_s: float):
        self.store = store
        self.outbox = Outbox(store)
        self.ags = ags
        self.first_retry_s = first_retry_s
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="lti-passback")

    def wake(self) -> None:
        self._wake.set()

    async def close(self) -> None:
        """Let a round under way end (its posts recorded, its database calls returned: the
        store closes next), then stop; cancelled only if it outlasts CLOSE_WAIT_S."""
        if self._task is None:
            return
        self._closing = True
        self._wake.set()
        await end_tasks([self._task], CLOSE_WAIT_S)

    async def drain(self) -> int:
        """Post the rows due now; how many this node handled."""
        due = await asyncio.to_thread(self.outbox.due, BATCH)
        return sum(await asyncio.gather(*(self._handle(submission_id) for submission_id in due)))

    async def _run(self) -> None:
        rounds = 0
        while not self._closing:
            handled = 0
            try:
                handled = await self.drain()
                rounds += 1
                if rounds % 600 == 0:
                    await asyncio.to_thread(self.store.prune_states)
            except Exception:
                log.warning("grade passback could not read its outbox", exc_info=True)
            if handled >= BATCH:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_S)
            self._wake.clear()

    async def _handle(self, submission_id: str) -> bool:
        pending = await asyncio.to_thread(self.outbox.claim, submission_id)
        if pending is None:
            return False  # another API node has it
        try:
            outcome, score = await self._post(pending)
        except Exception as error:  # our own fault: keep the row, try again later
            log.exception("grade passback of %s failed", submission_id)
            outcome = Outcome("retry", None, f"grader fault: {type(error).__name__}: {error}")
            score = None
        if outcome is not None:
            await asyncio.to_thread(self._after, pending, outcome, score)
        return True

    async def _post(self, pending) -> tuple[Outcome | None, Score | None]:
        skip = None
        if pending.status != "done":
            skip = UNGRADABLE
        else:
            graded = await asyncio.to_thread(self.outbox.graded, pending.user_id, pending.link_id)
            score = score_for(graded, pending.policy, pending.sub)
            platform = await asyncio.to_thread(self.store.platform, pending.platform_id)
            if pending.lineitem is None:
                skip = "the link has no line item"
            elif score is None or platform is None:
                skip = "nothing graded"
        if skip is not None:
            await asyncio.to_thread(
                self.outbox.settle, pending.submission_id, "skipped", last_error=skip
            )
            return None, None
        return await self.ags.post_score(platform, pending.lineitem, score), score

    def _after(self, pending, outcome: Outcome, score: Score | None) -> None:
        attempts = pending.attempts + 1
        answer = {"attempts": attempts, "last_status": outcome.status}
        answer["last_error"] = outcome.message or None
        if outcome.kind == "sent":
            posted = {"score_given": score.given, "score_maximum": score.maximum}
            self.outbox.settle(pending.submission_id, "sent", **answer, **posted)
        elif outcome.kind == "refused" or attempts >= MAX_ATTEMPTS:
            verb = "refused" if outcome.kind == "refused" else "gave_up"
            log.warning("grade passback %s %s: %s", verb, pending.submission_id, outcome.message)
            self.outbox.settle(pending.submission_id, verb, **answer)
        else:
            delay = min(self.first_retry_s * 2 ** max(0, attempts - 1), MAX_DELAY_S)
            delay = min(max(delay, outcome.retry_after_s or 0.0), MAX_DELAY_S)
            self.outbox.update(
                pending.submission_id, next_attempt_at=later(delay), claimed_until=None, **answer
            )
