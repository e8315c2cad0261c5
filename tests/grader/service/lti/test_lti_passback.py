"""Grade passback through the outbox, against the fake LMS's token and score endpoints."""

from __future__ import annotations

import time

import httpx
import pytest
from fake_lms import SCORE_SCOPE
from test_lti_launch import session_of

from grader.service.lti import LtiStore, Outbox
from grader.store import open_engine

pytestmark = pytest.mark.service

PASSING = "def gspo_loss(*a):\n    return 1.0\n"  # the FakeGrader passes it: 20 / 20
FAILING = "raise NotImplementedError\n"  # 0 / 20
UNGRADABLE = "# grader-fault\n"  # the FakeGrader fails on every attempt: ungradable


def submit(tool, token: str, code: str) -> dict:
    response = httpx.post(
        f"{tool.base}/api/lti/submit",
        json={"code": code},
        headers={"X-LTI-Session": token},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


def wait_for(condition, seconds: float = 15.0, message: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not met in {seconds} s")
        time.sleep(0.05)


def outbox_states(tool) -> list[str]:
    return [row.state for row in Outbox(tool.lti.store).course_rows(1)]


def test_a_submit_posts_the_right_score_once(browser, tool, lms):
    token = session_of(browser.launch())
    graded = submit(tool, token, PASSING)
    assert graded["status"] == "done" and graded["student"] == "Ada Student-1"
    wait_for(lambda: outbox_states(tool) == ["sent"], message="the row marked sent")
    time.sleep(1.5)  # a second post would come within a drain round or two
    assert len(lms.scores) == 1, lms.scores
    posted = lms.scores[0]
    assert posted["path"] == "/lineitems/1/scores"
    assert posted["query"] == "type_id=graded"  # /scores went before the query string
    assert posted["content_type"] == "application/vnd.ims.lis.v1.score+json"
    body = posted["body"]
    assert body["userId"] == "user-student-1"
    assert (body["scoreGiven"], body["scoreMaximum"]) == (20, 20)
    assert body["activityProgress"] == "Completed"
    assert body["gradingProgress"] == "FullyGraded"
    assert body["timestamp"].startswith(graded["report"]["created_at"][:4])
    assert len(lms.token_requests) == 1 and not lms.problems
    assert outbox_states(tool) == ["sent"]  # and still sent, not posted again


def test_best_is_kept_by_default_and_latest_when_the_course_says(browser, tool, lms):
    token = session_of(browser.launch())
    submit(tool, token, PASSING)
    wait_for(lambda: len(lms.scores) == 1)
    submit(tool, token, FAILING)
    wait_for(lambda: len(lms.scores) == 2)
    assert lms.scores[1]["body"]["scoreGiven"] == 20  # best: the earlier 20 stays
    assert lms.scores[1]["body"]["timestamp"] > lms.scores[0]["body"]["timestamp"]
    view = browser.launch("teacher-1")
    assert "best Submit</option>" in view.text
    form = {"session": _hidden(view.text, "session"), "action": "policy", "policy": "latest"}
    changed = httpx.post(f"{tool.base}/lti/instructor", data=form)
    assert "latest score" in changed.text
    submit(tool, token, FAILING + "# again\n")
    wait_for(lambda: len(lms.scores) == 3)
    assert lms.scores[2]["body"]["scoreGiven"] == 0  # latest
    scored = [r for r in lms.token_requests if r["scope"] == SCORE_SCOPE]
    assert len(scored) == 1  # the token was cached for the registration and scope


def test_the_outbox_retries_while_the_lms_is_down(browser, tool, lms):
    token = session_of(browser.launch())
    lms.down = True
    submit(tool, token, PASSING)
    wait_for(lambda: lms.token_attempts >= 3, message="three tries while down")
    assert not lms.scores
    assert outbox_states(tool) == ["pending"]
    lms.down = False
    wait_for(lambda: lms.scores, message="the score after the LMS came back")
    assert lms.scores[0]["body"]["scoreGiven"] == 20
    wait_for(lambda: outbox_states(tool) == ["sent"], message="the row marked sent")


def test_a_final_refusal_is_kept_and_shown_to_the_instructor(browser, tool, lms):
    token = session_of(browser.launch())
    lms.scores_status = 422
    submit(tool, token, PASSING)
    wait_for(lambda: outbox_states(tool) == ["refused"], message="a refused row")
    view = browser.launch("teacher-1")
    assert "Passback failures (1)" in view.text
    assert "refused by the LMS" in view.text
    assert "422" in view.text and "not published" in view.text
    lms.scores_status = None  # the course was published: the instructor posts again
    form = {"session": _hidden(view.text, "session"), "action": "retry"}
    again = httpx.post(f"{tool.base}/lti/instructor", data=form)
    assert "1 score(s) will be posted again" in again.text
    wait_for(lambda: lms.scores, message="the score posted after the retry")
    wait_for(lambda: outbox_states(tool) == ["sent"], message="the row marked sent")


def test_an_ungradable_submission_posts_nothing(browser, tool, lms):
    token = session_of(browser.launch())
    graded = submit(tool, token, UNGRADABLE)
    assert graded["status"] == "ungradable"
    wait_for(lambda: outbox_states(tool) == ["skipped"], message="a skipped row")
    assert lms.scores == [] and lms.token_requests == []


def test_a_student_cannot_reach_the_instructor_view_or_another_session(browser, tool):
    token = session_of(browser.launch())
    refused = httpx.post(f"{tool.base}/lti/instructor", data={"session": token})
    assert refused.status_code == 403
    assert httpx.post(f"{tool.base}/api/lti/submit", json={"code": "x"}).status_code == 401
    mine = submit(tool, token, PASSING)["submission_id"]
    other = session_of(browser.launch("student-2"))
    seen = httpx.get(f"{tool.base}/api/lti/submissions/{mine}", headers={"X-LTI-Session": other})
    assert seen.status_code == 404 and "code" not in seen.json()
    own = httpx.get(f"{tool.base}/api/lti/submissions/{mine}", headers={"X-LTI-Session": token})
    assert own.json()["code"] == PASSING  # the student's own code, to load back into the editor
    listed = httpx.get(f"{tool.base}/api/lti/submissions", headers={"X-LTI-Session": token})
    assert [s["submission_id"] for s in listed.json()["submissions"]] == [mine]


def test_name_and_key_students_work_unchanged_beside_lti(browser, tool):
    session_of(browser.launch())
    response = httpx.post(
        f"{tool.base}/api/submit", json={"code": PASSING, "student": "Grace"}, timeout=30
    )
    assert response.status_code == 200
    key = response.json()["student_key"]
    history = httpx.get(
        f"{tool.base}/api/submissions", params={"student": "Grace"}, headers={"X-Student-Key": key}
    )
    assert len(history.json()["submissions"]) == 1


def _hidden(page: str, name: str) -> str:
    import re

    return re.search(rf'name="{name}" value="([^"]+)"', page).group(1)


def test_a_late_submit_posts_its_credited_score(browser, tool, lms):
    """The LMS gets the credited score (the course's schedule, by when the Submit was accepted),
    not the raw one: 20 / 20 submitted in a 50 % late window posts 10."""
    from datetime import UTC, datetime, timedelta

    from grader.store import Store
    from grader.term import schedule_of

    token = session_of(browser.launch())
    now = datetime.now(UTC)
    late = {"due_at": (now - timedelta(hours=1)).isoformat()}
    late["late"] = [{"until": (now + timedelta(hours=1)).isoformat(), "credit": 50}]
    course = "lti:1"  # the fake LMS's only course has id 1
    Store(tool.lti.store.engine).set_term(course, "gspo", {"schedule": schedule_of(late)})
    graded = submit(tool, token, PASSING)
    assert graded["credit"] == 50 and graded["credited_score"] == 10, graded
    wait_for(lambda: len(lms.scores) == 1, message="the score posted")
    assert (lms.scores[0]["body"]["scoreGiven"], lms.scores[0]["body"]["scoreMaximum"]) == (10, 20)


def test_stopping_the_tool_lets_a_post_under_way_end(browser, tool, lms):
    lms.scores_delay_s = 1.0
    token = session_of(browser.launch())
    submit(tool, token, PASSING)
    wait_for(lambda: lms.scores_begun == 1, message="the score post sent")
    tool.server.stop()  # the service shuts down while the LMS has not answered yet
    engine = open_engine(tool.service.settings.resolved_database_url)
    try:
        rows = Outbox(LtiStore(engine)).course_rows(1)
    finally:
        engine.dispose()
    assert [row.state for row in rows] == ["sent"]  # answered, and recorded before the close
    assert len(lms.scores) == 1
