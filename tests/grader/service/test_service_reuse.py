"""Verdicts reused (grader/node/reuse.py): a live grading of code graded before takes the
earlier report and runs no tier; other code, another mode, another course, another exercise
version or sandbox, a regrading, a report a loaded machine could have made and a grader
fault never share one."""

from __future__ import annotations

import pytest
from service_kit import TOKEN
from sqlalchemy import text

from grader.exercise import default_exercise
from grader.node.reuse import VerdictReuse, grader_build
from grader.report import Report, SubmissionError
from grader.sandbox import Limits
from grader.store import Job

pytestmark = pytest.mark.service

REFERENCE = default_exercise().reference.read_text()
STARTER = default_exercise().starter.read_text()


def submit(client, code: str, student: str):
    response = client.post("/api/submit", json={"code": code, "student": student})
    assert response.status_code == 200, response.text
    return response.json()


def reused(client) -> int:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("gspo_grader_verdicts_reused_total "):
            return int(float(line.split()[1]))
    raise AssertionError("no gspo_grader_verdicts_reused_total in /metrics")


def test_the_same_code_again_takes_the_earlier_report_under_its_own_name(make_client):
    client, grader = make_client(reuse_verdicts=True, instructor_token=TOKEN)
    first = submit(client, STARTER, "ada")
    second = submit(client, STARTER, "bob")
    assert grader.calls == [(STARTER, "submit")]  # bob's Submit ran nothing
    assert reused(client) == 1
    a, b = Report.model_validate(first["report"]), Report.model_validate(second["report"])
    assert (b.submission, a.submission) == (second["submission_id"], first["submission_id"])
    assert b.model_dump(exclude={"submission", "created_at"}) == a.model_dump(
        exclude={"submission", "created_at"}
    )
    mine = client.get(f"/api/submissions/{second['submission_id']}",
                      headers={"X-Student-Key": second["student_key"]})  # fmt: skip
    assert mine.status_code == 200 and mine.json()["score"] == a.score
    auth = {"Authorization": f"Bearer {TOKEN}"}
    rows = client.get("/api/instructor/submissions", headers=auth).json()["submissions"]
    assert sorted((r["student"], r["score"]) for r in rows) == [("ada", 0), ("bob", 0)]


def test_other_code_another_mode_and_a_load_dependent_report_are_graded(make_client):
    client, grader = make_client(reuse_verdicts=True)
    submit(client, REFERENCE, "ada")
    submit(client, REFERENCE + "\n# a comment\n", "bob")  # other bytes: graded
    client.post("/api/run", json={"code": REFERENCE})  # Run: another mode, graded
    for student in ("cy", "dee"):  # a timeout may be the machine's: graded each time
        submit(client, "def timeout(): pass\n", student)
    for student in ("eve", "fay"):  # a grader fault is never reused from
        submit(client, "# grader-fault\n", student)
    modes = [mode for _, mode in grader.calls]
    assert modes.count("run") == 1 and modes.count("submit") >= 6
    assert reused(client) == 0
    submit(client, REFERENCE, "gus")  # and the first one is reused all the same
    assert reused(client) == 1 and len(grader.calls) == len(modes)


def test_it_is_off_when_the_setting_says_so(make_client):
    client, grader = make_client(reuse_verdicts=False)
    submit(client, STARTER, "ada")
    submit(client, STARTER, "bob")
    assert len(grader.calls) == 2 and reused(client) == 0


def job(**changes) -> Job:
    values = {"grading_id": "g", "submission_id": "s", "kind": "submit", "exercise": "gspo",
              "code": "x = 1\n", "attempts": 1}  # fmt: skip
    return Job(**(values | changes))


def test_the_key_holds_course_version_mode_code_and_sandbox_and_no_regrade_has_one():
    reuse = VerdictReuse(Limits())
    key = reuse.key(job(), "v1")
    assert key is not None and key == VerdictReuse(Limits()).key(job(grading_id="h"), "v1")
    others = [
        reuse.key(job(course="lti:other"), "v1"),
        reuse.key(job(), "v2"),
        reuse.key(job(kind="run"), "v1"),
        reuse.key(job(code="x = 1 \n"), "v1"),
        reuse.key(job(exercise="dpo"), "v1"),
        VerdictReuse(Limits(cpu_seconds=5.0)).key(job(), "v1"),
    ]
    assert None not in others and len({key, *others}) == len(others) + 1
    assert reuse.key(job(priority=1), "v1") is None  # a regrading runs the tiers again
    assert reuse.key(job(), None) is None  # an exercise not in the catalog
    assert len(grader_build()) == 64


def test_only_reports_that_depend_on_the_code_alone_are_reusable():
    ok = Report(passed=False, score=0, max_score=100)
    assert VerdictReuse.reusable(ok)
    for kind in ("syntax_error", "missing_function", "import_error"):
        error = SubmissionError(kind=kind, message="m")
        assert VerdictReuse.reusable(ok.model_copy(update={"submission_error": error}))
    for kind in ("timeout", "crash", "memory_limit"):
        error = SubmissionError(kind=kind, message="m")
        assert not VerdictReuse.reusable(ok.model_copy(update={"submission_error": error}))


def test_an_earlier_report_that_does_not_read_back_is_graded_again(make_client):
    client, grader = make_client(reuse_verdicts=True)
    submit(client, STARTER, "ada")
    store = client.app.state.service.store
    with store.engine.begin() as c:  # a stored report this build cannot read
        c.execute(text('UPDATE gradings SET report_json = \'{"passed": "maybe"}\''))
    again = submit(client, STARTER, "bob")
    assert len(grader.calls) == 2 and reused(client) == 0
    assert Report.model_validate(again["report"]).submission == again["submission_id"]
