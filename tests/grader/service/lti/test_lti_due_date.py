"""An LMS's due date for a link is offered to the instructor as the exercise's due date
(grader/service/lti/routes.py, DueDates): the AGS line item's endDateTime, read at an instructor's
launch, or the link's custom parameter `due_at`; offered only, never set as the schedule."""

from __future__ import annotations

import httpx
import pytest
from fake_lms import AGS, CLAIM, SCORE_SCOPE
from sqlalchemy import select
from test_lti_passback import wait_for

from grader.service.lti import lti_courses

TOKEN = "due-date-test-instructor-token-0123456789"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"


@pytest.fixture
def tool(start_tool):
    return start_tool(instructor_token=TOKEN)


def term(tool) -> dict:
    with tool.lti.store.engine.connect() as c:
        course_id = c.scalar(select(lti_courses.c.course_id))
    answer = httpx.get(
        f"{tool.base}/api/instructor/course",
        params={"exercise": "gspo", "course": f"lti:{course_id}"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_instructor_launch_offers_the_line_items_end_date(browser, tool, lms):
    lms.lineitem_end = "2026-12-18T23:59:00Z"
    assert browser.launch("teacher-1").status_code == 200
    wait_for(lambda: term(tool)["suggested_due_at"] is not None, message="the date offered")
    shown = term(tool)
    assert shown["suggested_due_at"] == "2026-12-18T23:59:00+00:00"
    assert shown["schedule"] is None  # offered, not set: no student's credit changed
    assert lms.lineitem_reads == [{"path": "/lineitems/1", "accept": LINEITEM_TYPE}]
    assert not lms.problems


def test_the_links_custom_due_at_is_offered_and_the_line_item_wins(browser, tool, lms):
    lms.claims = {CLAIM + "custom": {"due_at": "2026-12-11T12:00:00+01:00"}}
    assert browser.launch("teacher-1").status_code == 200
    assert term(tool)["suggested_due_at"] == "2026-12-11T12:00:00+01:00"  # before the view
    wait_for(lambda: lms.lineitem_reads, message="the line item read")
    assert term(tool)["suggested_due_at"] == "2026-12-11T12:00:00+01:00"  # it has no end
    lms.lineitem_end = "2026-12-12T23:59:00+00:00"
    assert browser.launch("teacher-1").status_code == 200
    wait_for(lambda: term(tool)["suggested_due_at"] == "2026-12-12T23:59:00+00:00",
             message="the line item's date")  # fmt: skip


def test_an_unsubstituted_variable_or_no_lineitem_scope_offers_nothing(browser, tool, lms):
    lms.claims = {
        CLAIM + "custom": {"due_at": "$ResourceLink.submission.endDateTime"},
        AGS: {"scope": [SCORE_SCOPE], "lineitem": lms.lineitem()},  # may post, not read
    }
    lms.lineitem_end = "2026-12-18T23:59:00Z"
    assert browser.launch("teacher-1").status_code == 200
    assert term(tool)["suggested_due_at"] is None
    assert lms.lineitem_reads == []  # no scope to read it with: not even tried
