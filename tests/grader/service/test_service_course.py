"""A course's term over the API (fake grader, SQLite): credit by the moment a Submit was
accepted, late windows, practice, extensions, best and latest, quotas with 429, and a
regrade's preview, apply and rollback with the LMS sent only the scores that changed."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from service_fakes import FakeGrader
from service_kit import TOKEN, wait_until
from sqlalchemy import insert, select

from grader.exercise import default_exercise
from grader.report import Report, TestResult, TierResult
from grader.service.lti import lti_courses, lti_links, lti_platforms, lti_scores, lti_users

pytestmark = pytest.mark.service

REFERENCE = default_exercise().reference.read_text()
STARTER = default_exercise().starter.read_text()
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def submit(client, code=REFERENCE, student="ada", keys={}):  # noqa: B006 (names' keys)
    headers = {"X-Student-Key": keys[student]} if student in keys else {}
    response = client.post("/api/submit", json={"code": code, "student": student}, headers=headers)
    if "student_key" in response.json():
        keys[student] = response.json()["student_key"]
    return response


def iso(delta_s: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=delta_s)).isoformat()


def schedule(client, due_s: float, late=(), after="practice", policy="best"):
    late = [{"until": iso(s), "credit": c} for s, c in late]
    body = {"exercise": "gspo", "due_at": iso(due_s), "late": late, "after": after}
    return client.put(
        "/api/instructor/course/schedule", json=body | {"policy": policy}, headers=AUTH
    )


@pytest.fixture
def client(make_client):
    return make_client(instructor_token=TOKEN)[0]


def test_a_submit_accepted_a_second_before_the_deadline_and_graded_after_gets_full_credit(
    make_client,
):
    grader = FakeGrader()
    grader.grade_gate = threading.Event()
    client, _ = make_client(grader, instructor_token=TOKEN, verdict_wait_seconds=0.2)
    # due 3 s from now: room for a Submit on a loaded machine to be accepted before it
    assert schedule(client, 3.0, late=[(3600, 50)]).status_code == 200
    sent = submit(client, keys={})
    assert sent.status_code == 202
    time.sleep(3.2)  # the deadline passes while it waits to be graded
    grader.grade_gate.set()
    url = f"/api/submissions/{sent.json()['submission_id']}"
    wait_until(lambda: client.get(url, headers=AUTH).json()["status"] == "done")
    graded = client.get(url, headers=AUTH).json()
    assert (graded["score"], graded["credit"], graded["credited_score"]) == (20.0, 100.0, 20.0)
    assert graded["counted"] is True


def test_late_credit_then_practice_then_closed(client):
    keys: dict = {}
    schedule(client, -60, late=[(3600, 50)])
    late = submit(client, keys=keys).json()
    assert (late["score"], late["credit"], late["credited_score"], late["counted"]) == (
        20.0, 50.0, 10.0, True,
    )  # fmt: skip
    csv = client.get("/api/instructor/gradebook.csv", headers=AUTH).text.splitlines()
    assert csv[1].split(",")[2:5] == ["1", "0", "10"]  # one counted, credited 10 of 20
    schedule(client, -120, late=[(-60, 50)])  # read per request: earlier Submits follow
    practice = submit(client, keys=keys).json()
    assert (practice["score"], practice["counted"], practice["credited_score"]) == (
        20.0,
        False,
        0.0,
    )
    schedule(client, -120, late=[(-60, 50)], after="closed")
    refused = submit(client, keys=keys)
    assert refused.status_code == 403 and "This exercise closed at" in refused.json()["detail"]


def test_an_extension_gives_one_student_full_credit(client):
    keys: dict = {}
    submit(client, student="grace", keys=keys)
    schedule(client, -60, late=[(3600, 50)])
    body = {"exercise": "gspo", "student": "grace", "due_at": iso(3600)}
    assert (
        client.put("/api/instructor/course/extension", json=body, headers=AUTH).status_code == 200
    )
    assert submit(client, student="grace", keys=keys).json()["credit"] == 100.0
    assert submit(client, student="ada", keys=keys).json()["credit"] == 50.0
    got = client.get("/api/instructor/course?exercise=gspo", headers=AUTH).json()
    assert got["extensions"] == [{"student": "grace", "due_at": body["due_at"]}]
    assert got["schedule"]["late"][0]["credit"] == 50.0 and got["quota"] is None


def test_a_quota_refuses_with_retry_after_and_ungradable_gradings_never_count(client):
    keys: dict = {}
    body = {"exercise": "gspo", "submits": 1, "per_seconds": 3600}
    assert client.put("/api/instructor/course/quota", json=body, headers=AUTH).status_code == 200
    fault = submit(client, code=REFERENCE + "\n# grader-fault", keys=keys)
    assert fault.json()["status"] == "ungradable"
    standing = client.get(
        "/api/term?exercise=gspo&student=ada", headers={"X-Student-Key": keys["ada"]}
    )
    assert standing.json()["remaining"] == 1
    assert submit(client, keys=keys).status_code == 200
    refused = submit(client, keys=keys)
    assert refused.status_code == 429 and 3590 <= int(refused.headers["Retry-After"]) <= 3600
    assert "the next one frees up at" in refused.json()["detail"]
    assert client.get("/api/term?exercise=gspo&student=ada").json()["remaining"] is None


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("schedule", {"due_at": iso(60), "late": [{"until": iso(30), "credit": 50}]}, "forwards"),
        ("schedule", {"due_at": iso(60), "late": [{"until": iso(90), "credit": 150}]}, "0 to 100"),
        ("schedule", {"due_at": "tomorrow"}, "ISO 8601"),
        ("extension", {"student": "nobody", "due_at": iso(60)}, "no student named 'nobody'"),
    ],
)
def test_bad_term_input_is_422_and_changes_nothing(client, path, body, message):
    answer = client.put(
        f"/api/instructor/course/{path}", json={"exercise": "gspo"} | body, headers=AUTH
    )
    assert answer.status_code == 422 and message in answer.json()["detail"]
    assert "nothing changed" in answer.json()["detail"]
    got = client.get("/api/instructor/course?exercise=gspo", headers=AUTH).json()
    assert got["schedule"] is None and got["extensions"] == []


def regraded(code: str, mode: str = "submit", *args, **kwargs) -> Report:
    """The tiers after an instructor's fix: ada's answer now fails test b, grace's passes."""
    ok = "grace" in code or "hopper" in code
    tests = [TestResult(id="a", name="a", outcome="passed")]
    tests.append(TestResult(id="b", name="b", outcome="passed" if ok else "failed"))
    tier = TierResult(
        id="T0", title="T0", passed=ok, score=20 if ok else 10, max_score=20, tests=tests
    )
    return Report(passed=ok, score=tier.score, max_score=20, mode=mode, tiers=[tier])


def lms_rows(engine, submissions: dict[str, str]) -> None:
    """An LMS course whose outbox sent each student's score already."""
    with engine.begin() as c:
        platform = c.execute(insert(lti_platforms).values(
            issuer="https://lms", client_id="c", auth_url="https://lms/a", token_url="https://lms/t",
            jwks_url="https://lms/k", name="lms", created_at=iso(0),
        )).inserted_primary_key[0]  # fmt: skip
        course = c.execute(insert(lti_courses).values(
            platform_id=platform, deployment_id="d", context_id="c1", title="t", policy="best",
        )).inserted_primary_key[0]  # fmt: skip
        link = c.execute(insert(lti_links).values(
            course_id=course, resource_link_id="r", title="t", exercise="gspo", lineitem=None,
        )).inserted_primary_key[0]  # fmt: skip
        for student, submission_id in submissions.items():
            user = c.execute(insert(lti_users).values(
                platform_id=platform, deployment_id="d", sub=student, name=student,
                student=student, created_at=iso(0),
            )).inserted_primary_key[0]  # fmt: skip
            c.execute(insert(lti_scores).values(
                submission_id=submission_id, user_id=user, link_id=link, state="sent",
                attempts=1, next_attempt_at=iso(0), created_at=iso(0),
            ))  # fmt: skip


def test_regrade_preview_apply_and_rollback(make_client):
    client, grader = make_client(instructor_token=TOKEN)
    keys: dict = {}
    codes = {
        "ada": REFERENCE + "# ada",
        "grace": STARTER + "# grace",
        "hopper": REFERENCE + "# hopper",
    }
    ids = {s: submit(client, code, s, keys).json()["submission_id"] for s, code in codes.items()}
    store = client.app.state.service.store
    lms_rows(store.engine, ids)
    unknown = client.post("/api/instructor/regrades", json={"exercise": "nope"}, headers=AUTH)
    assert unknown.status_code == 422 and "no exercise 'nope'" in unknown.json()["detail"]
    nothing = client.post(
        "/api/instructor/regrades/rollback", json={"exercise": "gspo"}, headers=AUTH
    )
    assert nothing.status_code == 422 and "no applied regrade" in nothing.json()["detail"]

    grader.grade = regraded
    started = client.post("/api/instructor/regrades", json={"exercise": "gspo"}, headers=AUTH)
    preview_id = started.json()["preview_id"]
    url = f"/api/instructor/regrades/{preview_id}"
    wait_until(lambda: client.get(url, headers=AUTH).json()["status"] == "ready")
    shown = client.get(url, headers=AUTH).json()
    assert shown["students"] == [
        {"student": "ada", "old_score": 20.0, "new_score": 10.0},
        {"student": "grace", "old_score": 0.0, "new_score": 20.0},
        {"student": "hopper", "old_score": 20.0, "new_score": 20.0},
    ]
    assert shown["tests"] == [{"test": "a", "flipped": 3}, {"test": "b", "flipped": 3}]
    visible = client.get(f"/api/submissions/{ids['ada']}", headers=AUTH).json()
    assert visible["score"] == 20.0 and visible["note"] is None  # the preview shows nothing

    applied = client.post(f"{url}/apply", headers=AUTH).json()
    assert applied["changed"] == ["ada", "grace"]
    with store.engine.connect() as c:
        states = dict(c.execute(select(lti_scores.c.submission_id, lti_scores.c.state)).all())
    assert states[ids["hopper"]] == "sent" and states[ids["ada"]] != "sent"
    assert states[ids["grace"]] != "sent"
    history = client.get("/api/submissions?student=ada", headers={"X-Student-Key": keys["ada"]})
    [ada] = history.json()["submissions"]
    assert ada["score"] == 10.0 and ada["note"].endswith(
        ": 20 -> 10; test a was added; test b was added"
    )
    again = client.post(f"{url}/apply", headers=AUTH)
    assert again.status_code == 422 and "was applied already" in again.json()["detail"]

    back = client.post("/api/instructor/regrades/rollback", json={"exercise": "gspo"}, headers=AUTH)
    assert back.status_code == 200 and back.json()["changed"] == ["ada", "grace"]
    restored = client.get(f"/api/submissions/{ids['ada']}", headers=AUTH).json()
    assert restored["score"] == 20.0 and "rolled back" in restored["note"]
    gradings = client.get(f"/api/submissions/{ids['ada']}/gradings", headers=AUTH).json()
    assert [g["score"] for g in gradings["gradings"]] == [20.0, 10.0]  # both kept


def test_quota_and_a_regrade_on_each_database_with_a_node_lost_mid_way(database_url):
    from grader.service import apply_preview, preview, start_preview
    from grader.store import Admission, GradingResult, QuotaUsed, Submission, open_store
    from grader.term import Quota

    store = open_store(database_url, migrate=True)
    store.create_student("ada", "hash-a")
    roomy = Admission(capacity=10, run_capacity=10, submits_per_student=10)
    store.set_term("lti:7", "gspo", {"quota": Quota(1, 3600)})

    def admit(n: int) -> str:
        sent = Submission(f"{n:032x}", "submit", "ada", "ada", "gspo", "x", iso(0), "lti:7")
        store.admit(sent, f"{n + 100:032x}", roomy)
        return f"{n + 100:032x}"

    store.claim("node-a")
    store.finish(admit(1), GradingResult("{}"))  # ungradable: not counted
    done = admit(2)
    store.claim("node-a")
    store.finish(done, GradingResult('{"tiers": []}', 8.0, 20.0, False))
    with pytest.raises(QuotaUsed):
        admit(3)
    preview_id = start_preview(store, "lti:7", "gspo")
    job = store.claim("node-a")
    assert store.requeue(job.grading_id, "node-a")  # its node died: queued again, not lost
    again = store.claim("node-b")
    assert again.grading_id == job.grading_id and again.attempts == 2
    assert store.get(f"{2:032x}").grading.score == 8.0  # nothing visible changed yet
    store.finish(again.grading_id, GradingResult('{"tiers": []}', 12.0, 20.0, False))
    assert preview(store, preview_id)["students"] == [
        {"student": "ada", "old_score": 8.0, "new_score": 12.0}
    ]
    assert apply_preview(store, preview_id)["changed"] == ["ada"]
    assert store.get(f"{2:032x}").grading.score == 12.0
    store.close()


def test_the_cli_sets_a_term_and_refuses_bad_input_changing_nothing(tmp_path, capsys):
    from grader.cli import main
    from grader.store import open_store

    data = ["--data-dir", str(tmp_path)]
    due = ["--due", "2026-12-04T23:59+00:00"]
    good = ["course", "schedule", "gspo", *data, *due, "--late", "2026-12-06T23:59+00:00=50"]
    assert main(good) == 0
    assert main(["course", "quota", "gspo", *data, "--submits", "3", "--per", "1h"]) == 0
    backwards = ["course", "schedule", "gspo", *data, *due, "--late", "2026-12-01T00:00+00:00=50"]
    assert main(backwards) == 2
    assert main(["course", "extend", "gspo", "nobody", *data, *due]) == 2
    assert main(["regrade", "nope", *data, "--preview"]) == 2
    assert main(["regrade", "gspo", *data, "--rollback"]) == 2
    errors = capsys.readouterr().err
    assert "late windows must go forwards" in errors and "no student named 'nobody'" in errors
    assert "no exercise 'nope'" in errors and "no applied regrade of 'gspo'" in errors
    assert errors.count("nothing changed") == 4
    term = open_store(f"sqlite:///{tmp_path / 'grader.sqlite3'}").term("default", "gspo")
    assert term.schedule.late[0].credit_percent == 50.0 and term.quota.per_seconds == 3600
