"""An LMS's due date for a link, offered to its instructor as the exercise's due date.

    reader = DueDates(store, ags)
    reader.offer(course, exercise, launch.due_at)   # stored as the term's suggested_due_at
    reader.read_later(platform, launch.readable_lineitem, course, exercise)   # GET, later

Two sources, both read when an instructor launches:
- the custom parameter `due_at` of the link, which the LMS fills by substitution when the
  link is configured with `due_at=$ResourceLink.submission.endDateTime` (LTI 1.3 core's
  variable; Canvas: `due_at=$Canvas.assignment.dueAt.iso8601`). A variable the LMS does not
  substitute arrives as written (`$...`) and is ignored, as is any value that is not an ISO
  8601 time with a zone;
- the AGS line item of the launch (its URL in the launch's AGS endpoint claim), read with a
  token for the `lineitem.readonly` or `lineitem` scope when the launch grants one: its
  `endDateTime`. Read after the launch has answered (the instructor never waits for the LMS),
  with a short timeout; a failure is logged and changes nothing. Found, it replaces the
  custom parameter's date: the line item is the gradebook's own.

The date is only offered (`suggested_due_at` in GET /api/instructor/course): the schedule
is never set from it, so no student's credit changes until an instructor saves a schedule.
A launch that carries no date leaves the last one offered.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from grader.service.lti.launches import iso_or_none
from grader.service.lti.rows import Platform
from grader.service.lti.scores import AgsClient, TokenRefused
from grader.store import Store

log = logging.getLogger(__name__)

LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
READ_TIMEOUT_S = 5.0  # one GET of a line item


class DueDates:
    """Offers an LMS's due dates as a course term's suggested due date."""

    def __init__(self, store: Store, ags: AgsClient):
        self.store = store
        self.ags = ags
        self._tasks: set[asyncio.Task] = set()

    def offer(self, course: str, exercise: str, due_at: str | None) -> None:
        if due_at is not None:
            self.store.set_term(course, exercise, {"suggested_due_at": due_at})

    def read_later(self, platform: Platform, lineitem: tuple[str, str], course: str,
                   exercise: str) -> None:  # fmt: skip
        """Read the line item's end date in the background, and offer it when it has one."""
        task = asyncio.create_task(self._read(platform, lineitem, course, exercise))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _read(self, platform: Platform, lineitem: tuple[str, str], course: str,
                    exercise: str) -> None:  # fmt: skip
        url, scope = lineitem
        try:
            due_at = await self.end_date(platform, url, scope)
            await asyncio.to_thread(self.offer, course, exercise, due_at)
        except Exception:  # an LMS or a database fault: the date is a courtesy, log it
            log.warning("the line item %s could not be read for its end date", url, exc_info=True)

    async def end_date(self, platform: Platform, url: str, scope: str) -> str | None:
        """The line item's `endDateTime` as ISO 8601, or None (none set, or unreadable)."""
        try:
            token = await self.ags.token(platform, scope)
            headers = {"Authorization": f"Bearer {token}", "Accept": LINEITEM_TYPE}
            response = await self.ags.http.get(url, headers=headers, timeout=READ_TIMEOUT_S)
            response.raise_for_status()
            body = response.json()
        except (TokenRefused, httpx.HTTPError, ValueError) as error:
            log.warning("the line item %s could not be read: %s", url, error)
            return None
        return iso_or_none(body.get("endDateTime")) if isinstance(body, dict) else None
