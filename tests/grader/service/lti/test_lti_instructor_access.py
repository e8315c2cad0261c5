"""An LTI instructor's launch reaches the instructor's routes (statistics, submissions, the
course's term, regrades) for its own course only; a student's launch reaches none of them.
The instructor token, where one is configured, still reaches every course."""

from __future__ import annotations

import re

import httpx
import pytest
from fake_lms import CLAIM
from test_lti_launch import session_of
from test_lti_passback import FAILING, PASSING, submit

pytestmark = pytest.mark.service

TOKEN = "lti-access-instructor-token-0123456789"
SCHEDULE = {"exercise": "gspo", "due_at": "2026-12-20T23:59:00+00:00"}


def instructor_session(browser, lms, course: str, teacher: str = "teacher-1") -> str:
    """The session an instructor launch in `course` hands the page (its link's fragment)."""
    lms.claims[CLAIM + "context"] = {"id": course, "title": f"Course {course}"}
    page = browser.launch(teacher)
    assert page.status_code == 200, page.text
    return re.search(r'href="/instructor#lti=([^"]+)"', page.text).group(1)


def as_session(token: str) -> dict:
    return {"X-LTI-Session": token}


def test_an_lti_instructor_reaches_its_own_course_only(browser, start_tool, lms):
    tool = start_tool(instructor_token=TOKEN)
    api = httpx.Client(base_url=tool.base, timeout=30)
    mine = instructor_session(browser, lms, "course-1")
    lms.claims[CLAIM + "context"] = {"id": "course-1", "title": "Course course-1"}
    student = session_of(browser.launch("student-1"))
    graded = [submit(tool, student, code) for code in (FAILING, PASSING)]
    assert [g["status"] for g in graded] == ["done", "done"]
    other = instructor_session(browser, lms, "course-2", "teacher-2")
    sent = graded[0]["submission_id"]

    term = api.get("/api/instructor/course?exercise=gspo", headers=as_session(mine))
    assert term.status_code == 200, term.text
    course = term.json()["course"]
    assert course.startswith("lti:")
    saved = api.put("/api/instructor/course/schedule", json=SCHEDULE, headers=as_session(mine))
    assert saved.status_code == 200 and saved.json()["schedule"]["due_at"].startswith("2026-12-20")
    quota = {"exercise": "gspo", "submits": 3, "per_seconds": 3600}
    assert api.put("/api/instructor/course/quota", json=quota, headers=as_session(mine)).json()[
        "quota"
    ] == {"submits": 3, "per_seconds": 3600}
    extension = {"exercise": "gspo", "student": graded[0]["student"], "due_at": SCHEDULE["due_at"]}
    assert api.put("/api/instructor/course/extension", json=extension, headers=as_session(mine))
    stats = api.get("/api/instructor/stats?exercise=gspo", headers=as_session(mine)).json()
    assert (stats["course"], stats["students"], stats["submissions"]) == (course, 1, 2)
    listed = api.get("/api/instructor/submissions", headers=as_session(mine)).json()
    assert len(listed["submissions"]) == 2
    one = api.get(f"/api/instructor/submissions/{sent}", headers=as_session(mine))
    assert one.status_code == 200 and one.json()["code"] == FAILING
    preview = api.post(
        "/api/instructor/regrades", json={"exercise": "gspo"}, headers=as_session(mine)
    )
    assert preview.status_code == 200 and preview.json()["course"] == course
    preview_id = preview.json()["preview_id"]

    # the other course's instructor sees an empty course of their own, and nothing of mine
    theirs = api.get("/api/instructor/course?exercise=gspo", headers=as_session(other)).json()
    assert theirs["course"] != course and theirs["schedule"] is None
    assert api.get("/api/instructor/submissions", headers=as_session(other)).json() == {
        "submissions": []
    }
    refused = [
        api.get(f"/api/instructor/course?exercise=gspo&course={course}", headers=as_session(other)),
        api.put(
            "/api/instructor/course/schedule",
            json=SCHEDULE | {"course": course},
            headers=as_session(other),
        ),
        api.get(f"/api/instructor/stats?exercise=gspo&course={course}", headers=as_session(other)),
        api.get(f"/api/instructor/submissions?course={course}", headers=as_session(other)),
        api.get(f"/api/instructor/submissions/{sent}", headers=as_session(other)),
        api.get(f"/api/instructor/regrades/{preview_id}", headers=as_session(other)),
        api.post(f"/api/instructor/regrades/{preview_id}/apply", headers=as_session(other)),
        api.post(
            "/api/instructor/regrades/rollback",
            json={"exercise": "gspo", "course": course},
            headers=as_session(other),
        ),
        api.get("/api/instructor/course?exercise=gspo&course=default", headers=as_session(mine)),
    ]
    for answer in refused:
        assert answer.status_code == 403, (answer.request.url, answer.text)
        assert "expected that course" in answer.json()["detail"]
    assert (
        api.get(f"/api/instructor/regrades/{preview_id}", headers=as_session(mine)).json()["course"]
        == course
    )

    # the token reaches every course, the session's too
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert api.get(f"/api/instructor/course?exercise=gspo&course={course}", headers=bearer).json()[
        "quota"
    ] == {"submits": 3, "per_seconds": 3600}
    assert len(api.get("/api/instructor/submissions", headers=bearer).json()["submissions"]) == 2
    api.close()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/instructor/stats?exercise=gspo", None),
        ("GET", "/api/instructor/course?exercise=gspo", None),
        ("PUT", "/api/instructor/course/schedule", SCHEDULE),
        ("POST", "/api/instructor/regrades", {"exercise": "gspo"}),
        ("GET", "/api/instructor/submissions", None),
        ("GET", "/api/instructor/gradebook.csv", None),
    ],
)
def test_a_students_launch_or_a_forged_session_reaches_none(browser, tool, lms, method, path, body):
    student = session_of(browser.launch("student-1"))
    answer = httpx.request(method, tool.base + path, json=body, headers=as_session(student))
    assert answer.status_code == 403, answer.text
    assert "launched this tool from the LMS as a student" in answer.json()["detail"]
    forged = httpx.request(method, tool.base + path, json=body, headers=as_session("forged"))
    assert forged.status_code == 401, forged.text
    nothing = httpx.request(method, tool.base + path, json=body)  # no token is configured
    assert nothing.status_code == 404, nothing.text
