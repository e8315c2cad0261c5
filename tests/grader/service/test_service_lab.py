"""The Lab's API: the reference preview of each exercise, and a student's own submitted code
(with their key, or their LMS session) and no one else's."""

from __future__ import annotations

import pytest
from service_kit import TOKEN, wait_until

from grader.exercise import catalog, default_exercise

pytestmark = pytest.mark.service

REFERENCE = default_exercise().reference.read_text()


def ready_preview(client, exercise_id: str) -> dict:
    answers = []
    wait_until(lambda: answers.append(client.get(f"/api/exercises/{exercise_id}/preview")) or
               answers[-1].status_code == 200, timeout=120)  # fmt: skip
    return answers[-1].json()


@pytest.mark.parametrize("exercise_id", list(catalog()))
def test_each_exercise_has_a_reference_preview_of_its_manifests_artifacts(make_client, exercise_id):
    client, _ = make_client()
    exercise = catalog()[exercise_id]
    body = ready_preview(client, exercise_id)
    assert body["status"] == "ready" and body["exercise"] == exercise_id
    tables = body["artifacts"]["tables"]
    assert [t["name"] for t in tables] == [t.name for t in exercise.tables]
    assert all(t["rows"] and t["rows"][0]["cells"] for t in tables), tables
    assert [p["alt"] for p in body["artifacts"]["plots"]] == [p.text for p in exercise.plots]
    for name, url in body["plots"].items():
        png = client.get(url)
        assert png.status_code == 200, (name, png.text)
        assert png.content.startswith(b"\x89PNG")
    assert client.get(f"/api/exercises/{exercise_id}/preview/nothing.png").status_code == 404


def test_the_gspo_preview_holds_the_reference_solutions_numbers(make_client):
    client, _ = make_client()
    tables = {t["name"]: t for t in ready_preview(client, "gspo")["artifacts"]["tables"]}
    row0 = tables["grad_matrix"]["rows"][0]["cells"]
    assert row0[:2] == pytest.approx([-1 / 6, -1 / 6]), row0
    assert [row["cells"] for row in tables["checks"]["rows"]] == [["pass"]] * 7


def test_an_unknown_exercise_has_no_preview(make_client):
    client, _ = make_client()
    missing = client.get("/api/exercises/nope/preview")
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]


def test_a_student_reads_their_own_submitted_code_and_no_one_elses(make_client):
    client, _ = make_client(instructor_token=TOKEN)
    mine = client.post("/api/submit", json={"code": REFERENCE, "student": "ada"}).json()
    assert mine["code"] == REFERENCE
    other = client.post("/api/submit", json={"code": "x = 1\n", "student": "bob"}).json()
    path = f"/api/submissions/{mine['submission_id']}"
    own = client.get(path, headers={"X-Student-Key": mine["student_key"]})
    assert own.status_code == 200 and own.json()["code"] == REFERENCE
    for headers in ({"X-Student-Key": other["student_key"]}, {}):
        refused = client.get(path, headers=headers)
        assert refused.status_code == 404 and "code" not in refused.json()
    instructor = client.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
    assert instructor.json()["code"] == REFERENCE
