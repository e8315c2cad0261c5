"""Grade passback: the drainer that posts the outbox's scores to the LMS.

Every API node runs one (`Passback.start()`, from the app's lifespan); the embedded
service is a single such node. It wakes every POLL_S seconds, or at once when a Submit of
this node was graded, claims the due rows, and for each:

    ungradable submission   -> skipped: nothing is posted (a grader failure is never a 0)
    graded                  -> the course's score for that user and link (best or latest
                               over their graded Submits) is posted; then
        the LMS took it           -> sent
        it refused (4xx, final)   -> refused, with the LMS's answer, for the instructor
        unreachable, 5xx, 429     -> tried again after retry_s, doubling up to an hour;
                                     after MAX_ATTEMPTS tries -> gave_up, for the instructor

Why API nodes and not the grading nodes: posting is network waiting, not computing; a slow
LMS must not hold a warm judge; API nodes hold no torch and already speak HTTP. The claim in
the shared database keeps two nodes from posting one row at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from grader.service.lti.ags import AgsClient, Outcome, Score
from grader.service.lti.outbox import Graded, Outbox, Pending
from grader.service.lti.store import LtiStore

log = logging.getLogger(__name__)

POLL_S = 1.0
BATCH = 8
MAX_ATTEMPTS = 12  # with a 30 s start: about 5 hours of trying
MAX_DELAY_S = 3600.0
UNGRADABLE = "ungradable (the grader failed, not the student): no score was posted"


def delay_for(attempts: int, first_s: float) -> float:
    return min(first_s * 2 ** max(0, attempts - 1), MAX_DELAY_S)


def score_for(graded: list[Graded], policy: str, user: str) -> Score | None:
    """The score a course posts for a user: their best or their latest graded Submit,
    stamped with the time the newest of them was graded (the LMS keeps the newest)."""
    if not graded:
        return None
    if policy == "latest":
        chosen = graded[-1]
    else:
        chosen = max(graded, key=lambda g: g.score / g.max_score if g.max_score else 0.0)
    timestamp = max(g.finished_at for g in graded)
    return Score(user, chosen.score, chosen.max_score, timestamp)


class Passback:
    def __init__(
        self, store: LtiStore, ags: AgsClient, first_retry_s: float, poll_s: float = POLL_S
    ):
        self.store = store
        self.outbox = Outbox(store)
        self.ags = ags
        self.first_retry_s = first_retry_s
        self.poll_s = poll_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="lti-passback")

    def wake(self) -> None:
        self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def drain(self) -> int:
        """Post the rows due now; how many this node handled."""
        due = await asyncio.to_thread(self.outbox.due, BATCH)
        handled = await asyncio.gather(*(self._handle(submission_id) for submission_id in due))
        return sum(handled)

    async def _run(self) -> None:
        rounds = 0
        while True:
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
                await asyncio.wait_for(self._wake.wait(), self.poll_s)
            self._wake.clear()

    async def _handle(self, submission_id: str) -> bool:
        pending = await asyncio.to_thread(self.outbox.claim, submission_id)
        if pending is None:
            return False  # another API node has it
        if pending.status != "done":
            await asyncio.to_thread(
                self.outbox.settle, submission_id, "skipped", last_error=UNGRADABLE
            )
            return True
        try:
            await self._post(pending)
        except Exception as error:  # our own fault: keep the row, try again later
            log.exception("grade passback of %s failed", submission_id)
            outcome = Outcome("retry", None, f"grader fault: {type(error).__name__}: {error}")
            await asyncio.to_thread(self._after, pending, outcome, None)
        return True

    async def _post(self, pending: Pending) -> None:
        graded = await asyncio.to_thread(self.outbox.graded, pending.user_id, pending.link_id)
        score = score_for(graded, pending.policy, pending.sub)
        platform = await asyncio.to_thread(self.store.platform, pending.platform_id)
        if score is None or platform is None or pending.lineitem is None:
            reason = "the link has no line item" if pending.lineitem is None else "nothing graded"
            await asyncio.to_thread(
                self.outbox.settle, pending.submission_id, "skipped", last_error=reason
            )
            return
        outcome = await self.ags.post_score(platform, pending.lineitem, score)
        await asyncio.to_thread(self._after, pending, outcome, score)

    def _after(self, pending: Pending, outcome: Outcome, score: Score | None) -> None:
        attempts = pending.attempts + 1
        answer = {"attempts": attempts, "last_status": outcome.status}
        answer["last_error"] = outcome.message or None
        if outcome.kind == "sent":
            posted = {"score_given": score.given, "score_maximum": score.maximum}
            self.outbox.settle(pending.submission_id, "sent", **answer, **posted)
        elif outcome.kind == "refused":
            log.warning(
                "the LMS refused the score of %s: %s", pending.submission_id, outcome.message
            )
            self.outbox.settle(pending.submission_id, "refused", **answer)
        elif attempts >= MAX_ATTEMPTS:
            log.warning(
                "gave up posting the score of %s: %s", pending.submission_id, outcome.message
            )
            self.outbox.settle(pending.submission_id, "gave_up", **answer)
        else:  # the LMS's Retry-After is honoured, up to an hour
            delay = max(delay_for(attempts, self.first_retry_s), outcome.retry_after_s or 0.0)
            self.outbox.retry_at(pending.submission_id, min(delay, MAX_DELAY_S), **answer)
