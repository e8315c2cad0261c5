"""The outside review's findings on the service, each reproduced: private data files,
normalised names, invalid Unicode, security headers, the API reference, the instructor token,
one answer for an unknown name and a wrong key, and the instructor's view of a submission."""

from __future__ import annotations

import logging
import stat

import pytest
from service_kit import TOKEN

from grader.exercise import REPO_ROOT, default_exercise
from grader.service import load_settings
from grader.settings import SettingsError

pytestmark = pytest.mark.service

REFERENCE = default_exercise().reference.read_text()


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def submit(client, student, key=None, code=REFERENCE):
    headers = {"X-Student-Key": key} if key else {}
    return client.post("/api/submit", json={"code": code, "student": student}, headers=headers)


def test_the_data_folder_and_its_files_are_private_and_healthz_warns_otherwise(make_client):
    client, _ = make_client()
    data = client.app.state.settings.data_dir
    assert mode(data) == 0o700
    files = [p for p in data.iterdir() if p.is_file()]
    assert files and {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    assert client.get("/healthz").json()["warnings"] == []
    data.chmod(0o750)
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json()["warnings"] == [
        f"{data} is 0750, open to other local users; expected 0700 (chmod 700 {data})"
    ]


def test_names_are_normalised_before_they_are_compared_and_stored(make_client):
    client, _ = make_client()
    first = submit(client, "  Ada   Lovelace ").json()
    assert first["student"] == "ada lovelace"
    key = first["student_key"]
    for spelling in ("ADA LOVELACE", "ａｄａ lovelace", "ada\tlovelace"):
        assert submit(client, spelling).status_code == 403  # the same student: key needed
        assert submit(client, spelling, key).json()["student"] == "ada lovelace"
    listing = client.get(
        "/api/submissions", params={"student": "Ada Lovelace "}, headers={"X-Student-Key": key}
    )
    assert listing.status_code == 200 and len(listing.json()["submissions"]) == 4


def test_a_name_that_mixes_scripts_is_refused_with_a_clear_message(make_client):
    client, grader = make_client()
    refused = submit(client, "\u0430da")  # Cyrillic а, then Latin d and a
    assert refused.status_code == 422
    assert "mixes letters of 2 scripts (Cyrillic, Latin)" in refused.json()["detail"]
    assert refused.json()["detail"].endswith("student's name.")  # one full stop, not two
    assert submit(client, "李雷 2").status_code == 200 and grader.calls  # one script is fine


@pytest.mark.parametrize("path", ["/api/run", "/api/submit"])
def test_code_with_a_lone_surrogate_is_422_without_a_traceback(make_client, caplog, path):
    client, grader = make_client()
    body = b'{"code": "x = 1\\n\\ud800", "student": "ada"}'
    with caplog.at_level(logging.WARNING):
        response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert "not valid Unicode: line 2 holds a lone surrogate" in response.json()["detail"]
    assert grader.calls == [] and not [r for r in caplog.records if r.exc_info]


def test_every_response_carries_the_security_headers(make_client):
    client, _ = make_client()
    for path in ("/", "/api/exercise", "/healthz", "/api/submissions/nope"):
        headers = client.get(path).headers
        assert headers["x-content-type-options"] == "nosniff", path
        assert headers["referrer-policy"] == "no-referrer", path
        policy = headers["content-security-policy"]
        assert "script-src 'self';" in policy and "frame-ancestors 'self'" in policy, path
        assert "unsafe-inline" not in policy.split("style-src-attr")[0], path


def test_registered_lms_origins_may_frame_the_page(make_client):
    client, _ = make_client()
    values = {"issuer": "https://lms.example/x", "client_id": "c1", "name": "LMS"}
    values |= {"auth_url": "https://sso.example:8443/auth", "token_url": "https://t.example"}
    client.app.state.lti.store.save_platform(
        {**values, "jwks_url": "https://j.example", "token_audience": None}, ["d1"]
    )
    policy = client.get("/").headers["content-security-policy"]
    assert policy.endswith("frame-ancestors 'self' https://lms.example https://sso.example:8443")
    api = client.get("/api/exercise").headers["content-security-policy"]
    assert api.endswith("frame-ancestors 'self'")  # only pages are framed
    more, _ = make_client(frame_origins="https://school.lms.example")  # the same database
    framing = more.get("/").headers["content-security-policy"].split("frame-ancestors ")[1]
    origins = ["https://lms.example", "https://school.lms.example", "https://sso.example:8443"]
    assert framing.split() == ["'self'", *origins]


@pytest.mark.filterwarnings("ignore:Duplicate Operation ID")  # GET|POST /lti/login
def test_the_api_reference_is_served_from_the_build_or_turned_off(make_client, tmp_path):
    web = tmp_path / "dist"
    (web / "docs").mkdir(parents=True)
    (web / "index.html").write_text("<!doctype html><title>page</title>")
    for name in ("index.html", "init.js"):
        (web / "docs" / name).write_text((REPO_ROOT / "web" / "docs" / name).read_text())
    client, _ = make_client(web_dir=web)
    page = client.get("/docs")
    assert page.status_code == 200 and "swagger-ui-bundle.js" in page.text
    for text in (page.text, client.get("/docs/init.js").text):
        assert "//" not in text.replace("// ", ""), "the reference must load nothing elsewhere"
    assert client.get("/openapi.json").json()["info"]["title"] == "gspo-grader"
    off, _ = make_client(web_dir=web, docs=False)
    assert off.get("/docs").status_code == 404 and off.get("/docs/init.js").status_code == 404
    assert off.get("/openapi.json").status_code == 404


def test_a_short_instructor_token_stops_start_up_saying_how_to_make_one():
    with pytest.raises(SettingsError) as refused:
        load_settings(instructor_token="x" * 31)
    assert "at least 32 characters, not 31" in str(refused.value)
    assert 'python -c "import secrets; print(secrets.token_urlsafe(32))"' in str(refused.value)


def test_wrong_instructor_tokens_are_rate_limited_per_address(make_client):
    client, _ = make_client(instructor_token=TOKEN, instructor_failures_per_minute=3)
    url, right = "/api/instructor/submissions", {"Authorization": f"Bearer {TOKEN}"}
    assert client.get(url, headers=right).status_code == 200  # successes are not counted
    wrong = {"Authorization": "Bearer " + "w" * 40}
    assert [client.get(url, headers=wrong).status_code for _ in range(3)] == [401] * 3
    blocked = client.get(url, headers=right)
    assert blocked.status_code == 429 and int(blocked.headers["Retry-After"]) >= 1
    assert "Too many wrong instructor tokens" in blocked.json()["detail"]


def test_an_unknown_name_and_a_wrong_key_get_the_same_answer(make_client):
    client, _ = make_client()
    key = submit(client, "ada").json()["student_key"]
    answers = []
    for student, sent in (("ada", "wrong"), ("nobody", "wrong"), ("ada", None), ("nobody", None)):
        headers = {"X-Student-Key": sent} if sent else {}
        got = client.get("/api/submissions", params={"student": student}, headers=headers)
        answers.append((got.status_code, got.json()))
    assert answers == [answers[0]] * 4 and answers[0][0] == 403
    mine = client.get("/api/submissions", params={"student": "ada"}, headers={"X-Student-Key": key})
    assert mine.status_code == 200


def test_the_instructor_reads_a_submissions_code(make_client):
    client, _ = make_client(instructor_token=TOKEN)
    sid = submit(client, "ada").json()["submission_id"]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    got = client.get(f"/api/instructor/submissions/{sid}", headers=auth)
    assert got.status_code == 200
    body = got.json()
    assert (body["code"], body["student"], body["status"]) == (REFERENCE, "ada", "done")
    assert client.get(f"/api/instructor/submissions/{sid}").status_code == 401
    assert client.get("/api/instructor/submissions/" + "0" * 32, headers=auth).status_code == 404
