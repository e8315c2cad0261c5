"""The service around the real, warm Grader: verdicts equal cold grading, concurrency, plots.

One Grader is started for the module and shared by the apps (a grader passed in is left to
its owner), because every start costs torch imports on a small machine.
"""

from __future__ import annotations

import threading
import warnings

import pytest
from service_kit import wait_until

from grader.exercise import default_exercise
from grader.report import Report
from grader.service import create_app, load_settings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = [pytest.mark.service, pytest.mark.sandbox, pytest.mark.slow]

ROOT = default_exercise().root
REFERENCE = default_exercise().reference.read_text()
STARTER = default_exercise().starter.read_text()


# Generous wall clocks: on a shared 2-core test machine a call can be starved for seconds;
# the verdicts compared here must not depend on that.
SLACK = {"call_wall_seconds": 60.0, "grading_wall_seconds": 240.0, "cpu_seconds": 120.0}


@pytest.fixture(scope="module")
def real_grader():
    from grader.judge import Grader
    from grader.sandbox import Limits

    grader = Grader(pool_size=2, limits=Limits.from_env(**SLACK)).start()
    yield grader
    grader.close()


@pytest.fixture
def make_client(real_grader, tmp_path):
    """An app around the module's grader; every grading runs the tiers unless a test turns
    `reuse_verdicts` on (these tests send the same code more than once)."""

    def make(**overrides):
        options = {"data_dir": tmp_path / "data", "web_dir": tmp_path / "no-web"}
        settings = load_settings(**{**options, "reuse_verdicts": False, **overrides})
        client = TestClient(create_app(settings, real_grader)).__enter__()
        opened.append(client)
        wait_until(lambda: client.app.state.service.ready, timeout=180)
        return client

    opened = []
    yield make
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client):
    return make_client()


@pytest.fixture(scope="module")
def cold_verdicts():
    """What `grade()` (the CLI's path) says, one cold grading per case."""
    from grader.judge import grade
    from grader.sandbox import Limits

    limits = Limits.from_env(**SLACK)
    return {
        ("reference", "submit"): grade(REFERENCE, mode="submit", limits=limits),
        ("starter", "run"): grade(STARTER, mode="run", limits=limits),
    }


def verdict(report: Report) -> dict:
    """The parts of a report that must not depend on how it was graded."""
    return {
        "passed": report.passed,
        "score": report.score,
        "max_score": report.max_score,
        "mode": report.mode,
        "submission_error": report.submission_error and report.submission_error.kind,
        "grader_error": report.grader_error,
        "tiers": [
            (t.id, t.passed, t.score, [(x.id, x.outcome, x.hidden) for x in t.tests])
            for t in report.tiers
        ],
    }


def failures(report: Report) -> list:
    """What to show when an assertion on a verdict fails."""
    tests = [x for tier in report.tiers for x in tier.tests]
    failed = [(x.id, x.message[:200]) for x in tests if x.outcome != "passed"]
    return [report.submission_error, report.grader_error, *failed[:3]]


def test_run_and_submit_verdicts_equal_cold_grading(client, cold_verdicts):
    submitted = client.post("/api/submit", json={"code": REFERENCE, "student": "ada"})
    ran = client.post("/api/run", json={"code": STARTER})
    assert submitted.status_code == 200 and ran.status_code == 200
    warm_reference = Report.model_validate(submitted.json()["report"])
    warm_starter = Report.model_validate(ran.json()["report"])
    assert warm_reference.passed, failures(warm_reference)
    assert warm_reference.score == warm_reference.max_score
    assert not warm_starter.passed and warm_starter.mode == "run"
    assert verdict(warm_reference) == verdict(cold_verdicts[("reference", "submit")])
    assert verdict(warm_starter) == verdict(cold_verdicts[("starter", "run")])


def test_run_on_the_reference_passes_visible_tests_only(client):
    body = client.post("/api/run", json={"code": REFERENCE}).json()
    report = Report.model_validate(body["report"])
    assert report.mode == "run" and report.passed
    assert not any(test.hidden for tier in report.tiers for test in tier.tests)


def test_eight_concurrent_submissions_are_all_answered_correctly(client):
    results: dict[int, tuple[int, dict]] = {}

    def submit(i: int) -> None:
        code = REFERENCE if i % 2 == 0 else STARTER
        response = client.post("/api/submit", json={"code": code, "student": f"s{i}"})
        results[i] = (response.status_code, response.json())

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert sorted(results) == list(range(8))
    for i, (status, body) in results.items():
        assert status == 200, body
        assert body["student"] == f"s{i}"
        report = Report.model_validate(body["report"])
        assert report.passed is (i % 2 == 0), failures(report)
    ids = {body["submission_id"] for _, body in results.values()}
    assert len(ids) == 8


def as_graded(report: Report) -> dict:
    """A report without what differs from one grading of the same code to the next: the
    clock, the sandbox's uid in `isolation`, and which submission it is."""
    kept = report.model_dump(exclude={"timings", "created_at", "isolation", "submission"})
    for tier in kept["tiers"]:
        for test in tier["tests"]:
            test.pop("duration_s")
    return kept


def test_a_reused_verdict_is_the_report_a_new_grading_gives(make_client, real_grader):
    client = make_client(reuse_verdicts=True)
    code = (ROOT / "tests" / "implementations" / "wrong" / "no_clipping.py").read_text()
    first = client.post("/api/submit", json={"code": code, "student": "ada"}).json()
    again = client.post("/api/submit", json={"code": code, "student": "bob"}).json()
    assert "gspo_grader_verdicts_reused_total 1" in client.get("/metrics").text
    reused = Report.model_validate(again["report"])
    assert reused.submission == again["submission_id"] != first["submission_id"]
    fresh = real_grader.grade(code, exercise="gspo")  # the tiers run once more
    assert not fresh.passed and as_graded(reused) == as_graded(fresh)
    assert as_graded(Report.model_validate(first["report"])) == as_graded(fresh)


def test_plots_of_a_real_report_are_pngs(client):
    body = client.post("/api/run", json={"code": REFERENCE}).json()
    plots = body["plots"]
    assert set(plots) == {"curves", "grad_matrix", "token_vs_sequence"}
    for url in plots.values():
        image = client.get(url)
        assert image.status_code == 200, image.text
        assert image.headers["content-type"] == "image/png"
        assert image.content[:8] == b"\x89PNG\r\n\x1a\n" and len(image.content) > 1000
