"""The HTTP contract, against a fake grader: shapes, identity, errors, instructor, plots."""

from __future__ import annotations

import threading

import pytest
from service_fakes import FakeGrader, fake_report
from service_kit import TOKEN, wait_until

from grader.exercise import default_exercise
from grader.report import Report
from grader.store import Admission, Submission, open_store

pytestmark = pytest.mark.service

REFERENCE = default_exercise().reference.read_text()
STARTER = default_exercise().starter.read_text()


def submit(client, code=REFERENCE, student="ada", key=None):
    headers = {"X-Student-Key": key} if key else {}
    return client.post("/api/submit", json={"code": code, "student": student}, headers=headers)


def test_exercise_describes_statement_starter_and_tiers(make_client):
    client, _ = make_client()
    body = client.get("/api/exercise").json()
    assert body["starter"] == STARTER
    assert body["functions"] == ["sequence_ratio", "gspo_loss"]
    assert "GSPO" in body["title"]
    assert [t["id"] for t in body["tiers"]] == ["T0", "T1", "T2", "T3"]
    assert sum(t["points"] for t in body["tiers"]) == 100
    assert {t["visibility"] for t in body["tiers"]} <= {"visible", "hidden"}


def test_healthz_is_503_until_the_grader_is_warm(make_client):
    gate = threading.Event()
    client, grader = make_client(FakeGrader(start_gate=gate), wait_ready=False)
    cold = client.get("/healthz")
    assert cold.status_code == 503 and cold.headers["Retry-After"]
    assert client.post("/api/run", json={"code": REFERENCE}).status_code == 503
    gate.set()
    wait_until(lambda: grader.ready)
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["deployment"] == "embedded" and body["isolation"]


def test_run_returns_the_graders_visible_verdict_and_stores_nothing(make_client):
    client, grader = make_client()
    response = client.post("/api/run", json={"code": REFERENCE})
    assert response.status_code == 200
    body = response.json()
    assert len(body["report_id"]) == 32
    report = Report.model_validate(body["report"])
    expected = fake_report(REFERENCE, "run")
    assert (report.passed, report.score, report.mode) == (True, expected.score, "run")
    assert grader.calls == [(REFERENCE, "run")]
    assert client.app.state.service.store.list_submissions() == []


def test_first_submit_creates_the_student_and_later_ones_need_the_key(make_client):
    client, grader = make_client()
    first = submit(client, student="ada")
    assert first.status_code == 200
    key = first.json()["student_key"]
    assert first.json()["report"]["mode"] == "submit" and grader.calls[-1][1] == "submit"
    assert submit(client, student="ada").status_code == 403
    assert submit(client, student="ada", key="wrong").status_code == 403
    assert len(grader.calls) == 1  # refused before grading
    again = submit(client, code=STARTER, student="ada", key=key)
    assert again.status_code == 200 and again.json()["student_key"] == key
    assert again.json()["report"]["passed"] is False
    other = submit(client, student="grace", key=key)  # another name gets its own key
    assert other.status_code == 200 and other.json()["student_key"] != key


def test_history_is_newest_first_and_private(make_client):
    client, _ = make_client()
    key = submit(client).json()["student_key"]
    second = submit(client, code=STARTER, key=key).json()
    ada = {"student": "ada"}
    listing = client.get("/api/submissions", params=ada, headers={"X-Student-Key": key})
    assert listing.status_code == 200
    items = listing.json()["submissions"]
    assert items[0]["submission_id"] == second["submission_id"]
    assert [i["passed"] for i in items] == [False, True]
    wrong = client.get("/api/submissions", params=ada, headers={"X-Student-Key": "x"})
    unknown = client.get(
        "/api/submissions", params={"student": "nobody"}, headers={"X-Student-Key": "x"}
    )
    assert (wrong.status_code, wrong.json()) == (
        unknown.status_code,
        unknown.json(),
    )  # no enumeration
    assert wrong.status_code == 403 and "name and key" in wrong.json()["detail"]


def test_one_submission_is_visible_to_its_student_and_the_instructor_only(make_client):
    client, _ = make_client(instructor_token=TOKEN)
    ada = submit(client).json()
    grace = submit(client, student="grace").json()
    url = f"/api/submissions/{ada['submission_id']}"
    mine = client.get(url, headers={"X-Student-Key": ada["student_key"]})
    assert mine.status_code == 200
    assert mine.json()["report"] == ada["report"] and "student_key" not in mine.json()
    assert client.get(url, headers={"X-Student-Key": grace["student_key"]}).status_code == 404
    assert client.get(url).status_code == 404
    assert client.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/api/submissions/" + "0" * 32).status_code == 404
    assert client.get("/api/submissions/not-an-id").status_code == 404


def test_code_over_the_size_limit_is_413(make_client):
    client, grader = make_client(max_code_bytes=1024)
    too_big = "#" * 1025
    response = client.post("/api/run", json={"code": too_big})
    assert response.status_code == 413 and "1024" in response.json()["detail"]
    huge = client.post("/api/run", content=b'{"code": "' + b"x" * 200_000 + b'"}')
    assert huge.status_code == 413
    assert client.post("/api/run", json={"code": "#" * 1000}).status_code == 200
    assert len(grader.calls) == 1


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/run", {}, "code"),
        ("/api/submit", {"code": "x"}, "student"),
        ("/api/submit", {"student": "ada"}, "code"),
        ("/api/submit", {"code": "x", "student": "=cmd()"}, "student"),
        ("/api/submit", {"code": "x", "student": ""}, "student"),
    ],
)
def test_missing_or_bad_fields_are_422_with_one_sentence(make_client, path, body, field):
    client, _ = make_client()
    response = client.post(path, json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert isinstance(detail, str) and field in detail


def test_unicode_student_names_are_accepted(make_client):
    client, _ = make_client()
    assert submit(client, student="李雷 2").status_code == 200


def test_a_full_queue_answers_503_at_once(make_client):
    grader = FakeGrader()
    grader.grade_gate = threading.Event()
    client, _ = make_client(grader, max_concurrent=1, max_queue=1)
    results = []

    def submit_one(student):
        results.append(submit(client, student=student).status_code)

    threads = [threading.Thread(target=submit_one, args=(name,)) for name in ("s1", "s2")]
    for thread in threads:
        thread.start()
    service = client.app.state.service
    wait_until(lambda: service.node.in_flight == 1 and service.store.waiting() == 1)
    refused = submit(client, student="s3")
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0
    assert "queue" in refused.json()["detail"]
    grader.grade_gate.set()
    for thread in threads:
        thread.join(10)
    assert sorted(results) == [200, 200]
    assert "gspo_grader_rejected_total 1" in client.get("/metrics").text


def test_a_second_submit_of_the_same_student_in_flight_is_429(make_client):
    grader = FakeGrader()
    client, _ = make_client(grader, max_concurrent=2, max_queue=8)
    key = submit(client, student="ada").json()["student_key"]
    service = client.app.state.service
    # the node counts a grading out after its answer has gone (plots queued, and so on):
    # until then the first Submit would pass for the second one below
    wait_until(lambda: service.node.in_flight == 0)
    grader.grade_gate = threading.Event()
    results = []
    waiting = threading.Thread(target=lambda: results.append(submit(client, key=key)))
    waiting.start()
    wait_until(lambda: service.node.in_flight == 1)
    again = submit(client, key=key)
    assert again.status_code == 429 and int(again.headers["Retry-After"]) > 0
    assert "still being graded" in again.json()["detail"]
    other = threading.Thread(target=lambda: results.append(submit(client, student="bob")))
    other.start()  # another student is not held back
    wait_until(lambda: service.node.in_flight == 2)
    grader.grade_gate.set()
    for thread in (waiting, other):
        thread.join(10)
    assert [r.status_code for r in results] == [200, 200]
    assert submit(client, key=key).status_code == 200  # the place was given back


def test_instructor_endpoints_do_not_exist_without_a_token(make_client):
    client, _ = make_client()
    assert client.get("/api/instructor/submissions").status_code == 404
    assert client.get("/api/instructor/gradebook.csv").status_code == 404


def test_instructor_endpoints_need_the_right_token(make_client):
    client, _ = make_client(instructor_token=TOKEN)
    key = submit(client, code=STARTER).json()["student_key"]
    submit(client, key=key)
    submit(client, student="grace", code=STARTER)
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
        response = client.get("/api/instructor/gradebook.csv", headers=headers)
        assert response.status_code == 401 and response.headers["WWW-Authenticate"] == "Bearer"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    listing = client.get("/api/instructor/submissions", headers=auth).json()["submissions"]
    assert sorted(i["student"] for i in listing) == ["ada", "ada", "grace"]
    csv = client.get("/api/instructor/gradebook.csv", headers=auth)
    assert csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.strip().split("\n")
    assert lines[0].startswith("student,exercise,submissions,ungradable,best_score,max_score")
    assert lines[1].startswith("ada,gspo,2,0,20,20,20,True,")
    assert lines[2].startswith("grace,gspo,1,0,0,20,0,False,")


def test_metrics_count_gradings_by_outcome(make_client):
    client, _ = make_client()
    client.post("/api/run", json={"code": REFERENCE})
    client.post("/api/run", json={"code": "syntax("})
    text = client.get("/metrics").text
    assert 'gspo_grader_gradings_total{mode="run",outcome="passed"} 1' in text
    assert 'gspo_grader_gradings_total{mode="run",outcome="submission_error"} 1' in text
    assert 'gspo_grader_grading_seconds_bucket{le="+Inf"} 2' in text
    assert "gspo_grader_pool_size 3" in text and "gspo_grader_queue_depth 0" in text


def test_plots_are_served_as_png_for_run_and_submit(make_client):
    client, _ = make_client()
    for response in (client.post("/api/run", json={"code": REFERENCE}), submit(client)):
        plots = response.json()["plots"]
        assert set(plots) == {"curves", "grad_matrix", "token_vs_sequence"}
        for url in plots.values():
            image = client.get(url)
            assert image.status_code == 200, image.text
            assert image.headers["content-type"] == "image/png"
            assert image.content.startswith(b"\x89PNG\r\n\x1a\n")
    report_id = response.json()["report_id"]
    assert client.get(f"/api/reports/{report_id}/plots/nope.png").status_code == 404
    assert client.get(f"/api/reports/{'0' * 32}/plots/curves.png").status_code == 404


def test_metrics_count_plots_drawn_once_per_distinct_toy_result(make_client):
    client, _ = make_client()
    for code in (REFERENCE, REFERENCE + "\n# the same toy result\n", REFERENCE + "\n# !\n"):
        client.post("/api/run", json={"code": code})

    def counted() -> dict[str, str]:
        lines = client.get("/metrics").text.splitlines()
        return dict(line.split() for line in lines if line.startswith("gspo_grader_plots_"))

    wait_until(lambda: sum(map(float, counted().values())) == 3)  # drawn after each verdict
    assert counted() == {
        "gspo_grader_plots_drawn_total": "2",
        "gspo_grader_plots_reused_total": "1",
    }


def test_a_report_without_artifacts_has_no_plots(make_client):
    client, _ = make_client()
    body = client.post("/api/run", json={"code": STARTER}).json()
    assert body["report"]["artifacts"] is None
    url = f"/api/reports/{body['report_id']}/plots/curves.png"
    assert client.get(url).status_code == 404


def test_fallback_page_when_the_web_page_is_not_built(make_client):
    client, _ = make_client()
    page = client.get("/")
    assert page.status_code == 200 and "npm run build" in page.text


@pytest.mark.filterwarnings("ignore:Duplicate Operation ID")  # GET|POST /lti/login
def test_built_web_page_is_served_at_the_root(make_client, tmp_path):
    web = tmp_path / "dist"
    (web / "assets").mkdir(parents=True)
    (web / "index.html").write_text("<!doctype html><title>gspo page</title>")
    (web / "assets" / "app.js").write_text("console.log(1)")
    client, _ = make_client(web_dir=web)
    assert "gspo page" in client.get("/").text
    assert "gspo page" in client.get("/?exercise=dpo").text  # the page's address of an exercise
    assert client.get("/assets/app.js").text == "console.log(1)"
    assert client.get("/api/exercise").status_code == 200
    assert client.get("/openapi.json").status_code == 200


def test_a_grader_that_raises_makes_the_job_ungradable_after_two_attempts(make_client):
    grader = FakeGrader()

    def broken(code, mode="submit", filename="x", tiers=None, **kwargs):
        grader.calls.append((code, mode))
        raise ZeroDivisionError("division by zero")

    grader.grade = broken
    client, _ = make_client(grader)
    response = client.post("/api/run", json={"code": REFERENCE})
    assert response.status_code == 200 and response.json()["status"] == "ungradable"
    error = response.json()["report"]["grader_error"]
    assert "not your code's fault" in error["message"] and "ZeroDivisionError" in error["detail"]
    assert len(grader.calls) == 2
    assert 'outcome="grader_error"} 1' in client.get("/metrics").text
    assert "gspo_grader_retries_total 1" in client.get("/metrics").text


def test_shutdown_leaves_a_passed_in_grader_to_its_owner(make_client):
    client, grader = make_client()
    client.__exit__(None, None, None)
    assert grader.closed is False


def test_code_at_the_limit_passes_the_body_limit_however_json_escapes_it(make_client):
    """A byte of code may take 6 bytes of JSON (\\u0001): the body limit leaves room for that."""
    client, grader = make_client(max_code_bytes=8192)
    body = b'{"code": "' + b"\\u0001" * 8192 + b'"}'  # 8,192 bytes of code in 49,164 of JSON
    response = client.post("/api/run", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 200 and len(grader.calls) == 1


def test_a_chunked_body_over_the_limit_is_413(make_client):
    client, grader = make_client(max_code_bytes=1024)
    chunks = iter([b'{"code": "', b"x" * 20_000, b"x" * 20_000, b'"}'])
    response = client.post("/api/run", content=chunks, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and grader.calls == []


def test_malformed_json_is_422_in_plain_words(make_client):
    client, _ = make_client()
    response = client.post("/api/run", content=b"{", headers={"Content-Type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"] == (
        "The request body is not valid JSON."
    )


def test_a_grader_that_cannot_start_keeps_healthz_at_503(make_client):
    grader = FakeGrader()

    def broken_start():
        raise RuntimeError("no sandbox available")

    grader.start = broken_start
    client, _ = make_client(grader, wait_ready=False)
    wait_until(lambda: client.app.state.service.start_error is not None)
    health = client.get("/healthz")
    assert health.status_code == 503
    assert health.json()["status"] == "failed" and "no sandbox" in health.json()["detail"]


def test_identical_toy_results_are_drawn_once(make_client):
    client, _ = make_client()
    first = client.post("/api/run", json={"code": REFERENCE}).json()
    second = client.post("/api/run", json={"code": REFERENCE + "\n# same toy results\n"}).json()
    assert first["report_id"] != second["report_id"]
    for body in (first, second):
        assert client.get(body["plots"]["curves"]).status_code == 200
    # the node also draws each exercise's reference preview with the same drawer (the real
    # toy's result, whose ratios are the fake's too, once rounded as a report keeps them):
    # count the drawings of these Runs' toy results (the FakeGrader's: ratios and loss) only
    drawn = client.app.state.service.node.drawings.draw.results
    ours = [result for result in drawn if result == fake_report(REFERENCE, "run").artifacts.data]
    assert len(ours) == 1, f"the Runs' identical toy results were drawn {len(ours)} times"


def test_plots_live_in_the_database_and_survive_a_restart(make_client):
    client, _ = make_client()
    url = client.post("/api/run", json={"code": REFERENCE}).json()["plots"]["curves"]
    png = client.get(url).content
    # each preview is drawn on a thread of its own: let the first node finish them all
    previews = [f"/api/exercises/{ex['id']}/preview" for ex in client.get("/api/exercises").json()]
    wait_until(lambda: all(client.get(p).status_code == 200 for p in previews), timeout=60)
    client.__exit__(None, None, None)
    again, _ = make_client()  # same data dir: a new process would find the same rows
    assert again.get(url).content == png
    assert again.app.state.service.node.drawings.draw.results == []  # previews and plots alike


def test_exercises_are_listed_and_described_by_id(make_client):
    client, _ = make_client()
    listing = client.get("/api/exercises").json()
    assert listing[0]["id"] == default_exercise().id
    assert set(listing[0]) == {"id", "title", "paper", "section"}
    one = client.get(f"/api/exercises/{listing[0]['id']}").json()
    assert one == client.get("/api/exercise").json()
    assert one["plots"] == [plot.name for plot in default_exercise().plots]
    missing = client.get("/api/exercises/no-such")
    assert missing.status_code == 404 and "no-such" in missing.json()["detail"]


def test_an_unknown_exercise_is_422_and_grades_nothing(make_client):
    client, grader = make_client()
    for path, body in (("/api/run", {}), ("/api/submit", {"student": "ada"})):
        response = client.post(path, json={"code": REFERENCE, "exercise": "nope", **body})
        assert response.status_code == 422 and "nope" in response.json()["detail"]
    assert grader.calls == [] and client.app.state.service.store.student_key_hash("ada") is None


def test_submissions_carry_and_filter_by_exercise(make_client):
    client, grader = make_client(instructor_token=TOKEN)
    ada = submit(client).json()
    assert ada["exercise"] == default_exercise().id and ada["status"] == "done"
    assert grader.names == [ada["submission_id"]]  # the report names the submission
    assert ada["report"]["submission"] == ada["submission_id"]
    key = {"X-Student-Key": ada["student_key"]}
    mine = client.get("/api/submissions", params={"student": "ada"}, headers=key).json()
    assert mine["submissions"][0]["exercise"] == default_exercise().id
    other = {"student": "ada", "exercise": "dpo"}
    assert client.get("/api/submissions", params=other, headers=key).json()["submissions"] == []
    auth = {"Authorization": f"Bearer {TOKEN}"}
    listing = client.get("/api/instructor/submissions", params={"exercise": "dpo"}, headers=auth)
    assert listing.json()["submissions"] == []
    csv = client.get("/api/instructor/gradebook.csv", params={"exercise": "dpo"}, headers=auth)
    assert csv.text.strip().count("\n") == 0  # the header only


def test_a_verdict_slower_than_the_wait_is_202_then_polled(make_client):
    grader = FakeGrader()
    client, _ = make_client(grader, verdict_wait_seconds=0.2)
    grader.grade_gate = threading.Event()
    first = submit(client)
    assert first.status_code == 202
    body = first.json()
    assert body["report"] is None and body["status"] in ("queued", "grading")
    url = f"/api/submissions/{body['submission_id']}"
    key = {"X-Student-Key": body["student_key"]}
    assert client.get(url, headers=key).json()["status"] == "grading"
    run = client.post("/api/run", json={"code": REFERENCE}).json()  # waits behind it
    assert run["status"] in ("queued", "grading")
    grader.grade_gate.set()
    wait_until(lambda: client.get(url, headers=key).json()["status"] == "done")
    done = client.get(url, headers=key).json()
    assert done["report"]["passed"] is True and done["plots"]
    wait_until(lambda: client.get(f"/api/runs/{run['report_id']}").json()["status"] == "done")
    assert client.get("/api/runs/" + "0" * 32).status_code == 404


def test_a_grader_fault_is_retried_then_ungradable_and_never_scores(make_client):
    client, grader = make_client(instructor_token=TOKEN)
    key = submit(client).json()["student_key"]
    faulty = submit(client, code=REFERENCE + "\n# grader-fault\n", key=key)
    assert faulty.status_code == 200
    body = faulty.json()
    assert body["status"] == "ungradable" and body["plots"] == {}
    assert "not your code's fault" in body["report"]["grader_error"]["message"]
    assert len(grader.calls) == 3  # the good one, then the faulty one twice
    listing = client.get(
        "/api/submissions", params={"student": "ada"}, headers={"X-Student-Key": key}
    ).json()["submissions"]
    assert listing[0]["status"] == "ungradable" and listing[0]["score"] is None
    auth = {"Authorization": f"Bearer {TOKEN}"}
    row = client.get("/api/instructor/gradebook.csv", headers=auth).text.strip().split("\n")[1]
    assert row.startswith("ada,gspo,1,1,20,20,20,True,")  # latest is the graded one


def test_a_refused_first_submit_claims_no_name(make_client):
    grader = FakeGrader()
    client, _ = make_client(grader, max_concurrent=1, max_queue=0)
    grader.grade_gate = threading.Event()
    holder = threading.Thread(target=lambda: submit(client, student="bob"))
    holder.start()
    wait_until(lambda: client.app.state.service.node.in_flight == 1)
    assert submit(client, student="ada").status_code == 503
    assert client.app.state.service.store.student_key_hash("ada") is None
    grader.grade_gate.set()
    holder.join(10)
    assert submit(client, student="ada").status_code == 200


def test_jobs_left_unfinished_by_a_killed_service_are_graded_at_the_next_start(
    make_client, settings_for
):
    store = open_store(settings_for().resolved_database_url, migrate=True)
    store.create_student("ada", "hash")
    left = Submission("a" * 32, "submit", "ada", "ada", "gspo", REFERENCE, "2026-01-01T00:00:00")
    store.admit(left, "b" * 32, Admission(10, 10, 1))
    assert store.claim("the-killed-service").grading_id == "b" * 32  # it was grading
    store.close()
    client, grader = make_client(instructor_token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    url = f"/api/submissions/{left.submission_id}"
    wait_until(lambda: client.get(url, headers=auth).json()["status"] == "done")
    assert client.get(url, headers=auth).json()["report"]["passed"] is True
    assert grader.names == [left.submission_id]
    history = client.get(url + "/gradings", headers=auth).json()["gradings"]
    assert [(g["attempts"], g["current"]) for g in history] == [(2, True)]


def test_db_upgrade_migrates_a_first_release_data_dir(tmp_path):
    import subprocess
    import sys

    from test_service_migrations import first_release_database

    (tmp_path / "data").mkdir()
    first_release_database(tmp_path / "data" / "grader.sqlite3")
    argv = [sys.executable, "-m", "grader", "db", "upgrade", "--data-dir", str(tmp_path / "data")]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and "upgraded from 0001 to revision" in first.stdout
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "nothing to do" in again.stdout


def test_two_slow_runs_leave_room_for_a_submit(make_client):
    """Issue 26: with MAX_QUEUE=1, two slow Runs used to make every Submit get 503. Runs fill
    at most half the queue, one in flight per client."""
    grader = FakeGrader()
    grader.grade_gate = threading.Event()
    client, _ = make_client(grader, max_concurrent=1, max_queue=1)
    service = client.app.state.service
    slow = threading.Thread(
        target=lambda: client.post("/api/run", json={"code": REFERENCE, "student": "r1"})
    )
    slow.start()
    wait_until(lambda: service.node.in_flight == 1)
    again = client.post("/api/run", json={"code": REFERENCE, "student": "r1"})
    assert again.status_code == 429 and "previous Run" in again.json()["detail"]
    other = client.post("/api/run", json={"code": REFERENCE, "student": "r2"})
    assert other.status_code == 503  # Runs have their share of the queue
    answers = []
    waiting = threading.Thread(target=lambda: answers.append(submit(client)))
    waiting.start()
    wait_until(lambda: service.store.waiting() == 1)  # the Submit was admitted
    grader.grade_gate.set()
    for thread in (slow, waiting):
        thread.join(10)
    assert answers[0].status_code == 200 and answers[0].json()["status"] == "done"


def test_new_names_are_limited_per_address(make_client):
    client, _ = make_client(names_per_hour=2)
    assert [submit(client, student=name).status_code for name in ("n1", "n2")] == [200, 200]
    third = submit(client, student="n3")
    assert third.status_code == 429 and third.headers["Retry-After"] == "3600"
    assert client.app.state.service.store.student_key_hash("n3") is None


def test_the_gradings_of_a_submission_are_its_students_to_read(make_client):
    client, _ = make_client()
    ada = submit(client).json()
    bob = submit(client, student="bob").json()
    url = f"/api/submissions/{ada['submission_id']}/gradings"
    mine = client.get(url, headers={"X-Student-Key": ada["student_key"]})
    [grading] = mine.json()["gradings"]
    assert grading["grading_id"] == ada["report_id"] and grading["current"] is True
    assert (grading["status"], grading["score"], grading["attempts"]) == ("done", 20.0, 1)
    assert len(grading["exercise_version"]) == 16  # the exercise's content hash
    assert client.get(url, headers={"X-Student-Key": bob["student_key"]}).status_code == 404
    assert client.get(url).status_code == 404
