"""Edits take effect: a tier test added to an exercise folder while the service runs grades
the next Submit, and the grader says so in its log."""

from __future__ import annotations

import logging
import shutil
import warnings

import pytest
from service_kit import wait_until

from grader.exercise import REPO_ROOT, refresh_catalog
from grader.judge import Grader
from grader.report import Report
from grader.sandbox import Limits
from grader.service import create_app, load_settings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = [pytest.mark.service, pytest.mark.sandbox, pytest.mark.slow]

SLACK = {"call_wall_seconds": 60.0, "grading_wall_seconds": 240.0, "cpu_seconds": 120.0}
ADDED = '''
import pytest

from grader.checks import fail

pytestmark = pytest.mark.tier("T0")


def test_added_while_serving(student):
    """A test the instructor added while the service ran."""
    fail("added while the service ran")
'''


@pytest.fixture
def served_copy(tmp_path, monkeypatch):
    """DPO's folder copied to tmp_path and served as the root exercise."""
    folder = tmp_path / "dpo"
    skip = shutil.ignore_patterns("__pycache__", "implementations")
    shutil.copytree(REPO_ROOT / "exercises" / "dpo", folder, ignore=skip)
    monkeypatch.setenv("GSPO_GRADER_EXERCISE_DIR", str(folder))
    refresh_catalog()
    yield folder
    monkeypatch.delenv("GSPO_GRADER_EXERCISE_DIR")
    refresh_catalog()


def test_an_edited_statement_shows_on_the_page_without_a_restart(make_client, served_copy):
    client, _ = make_client()
    before = client.get("/api/exercise").json()
    (served_copy / "statement.md").write_text("# DPO, edited while serving\n")
    tiers = served_copy / "tests" / "tiers" / "tiers.toml"
    tiers.write_text(tiers.read_text().replace('title = "', 'title = "Edited: ', 1))
    after = client.get("/api/exercise").json()
    assert before["statement"] != after["statement"] == "# DPO, edited while serving\n"
    assert after["tiers"][0]["title"].startswith("Edited: ")
    assert not before["tiers"][0]["title"].startswith("Edited: ")


def test_a_tier_test_added_while_serving_grades_the_next_submit(served_copy, tmp_path, caplog):
    reference = (served_copy / "reference" / "dpo.py").read_text()
    settings = load_settings(  # the verdict waits for the restarted judge, however slow
        data_dir=tmp_path / "data", web_dir=tmp_path / "no-web", verdict_wait_seconds=300
    )
    grader = Grader(pool_size=1, limits=Limits.from_env(**SLACK))
    with grader, TestClient(create_app(settings, grader)) as client:
        wait_until(lambda: client.app.state.service.ready, timeout=180)
        first = client.post("/api/submit", json={"code": reference, "student": "ada"})
        before = Report.model_validate(first.json()["report"])
        assert before.passed, first.json()
        (served_copy / "tests" / "tiers" / "test_t0_added.py").write_text(ADDED)
        with caplog.at_level(logging.INFO, logger="grader.judge.grader"):
            second = client.post("/api/submit", json={"code": reference, "student": "bo"})
    assert second.status_code == 200, (second.status_code, second.text[:500])
    after = Report.model_validate(second.json()["report"])
    tests = {test.id: test for tier in after.tiers for test in tier.tests}
    added = tests["test_t0_added.py::test_added_while_serving"]
    assert added.outcome == "failed" and added.message == "added while the service ran"
    assert len(tests) == sum(len(tier.tests) for tier in before.tiers) + 1
    assert not after.passed
    changed = [r.getMessage() for r in caplog.records if "changed (version" in r.getMessage()]
    assert len(changed) == 1 and changed[0].startswith("exercise dpo changed (version ")
    assert changed[0].endswith(": new gradings use the new version")
