"""The instructor's statistics: item analysis, common mistakes named by the exercise's known
wrong implementations, stuck students, the API (JSON and CSV) and the CLI."""

from __future__ import annotations

import json
import secrets
import shutil
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from grader.cli import main
from grader.exercise import ExerciseError, catalog, load_exercise
from grader.mistakes import Signatures, hint, known_mistakes
from grader.service import class_stats, stats_csv
from grader.store import GradingResult, Submission, open_store
from grader.term import Schedule

sys.path.insert(0, str(Path(__file__).parent))
from class_seed import ROOM, START, report_of, seed
from service_kit import TOKEN

DPO = catalog()["dpo"]
ALL_PASS = {"a": "passed", "b": "passed", "c": "passed"}
FAILS_A = {"a": "failed", "b": "passed", "c": "passed"}
FAILS_BC = {"a": "passed", "b": "error", "c": "failed"}


def seed_class(store) -> None:
    """ann: passes after failing a; bob and cy fail a (bob's first try passed b only);
    dee fails b and c; eve is stuck (six tries, best score on her first)."""
    seed(store, "ann", report_of("dpo", FAILS_A), 1)
    seed(store, "ann", report_of("dpo", ALL_PASS), 2)
    seed(store, "bob", report_of("dpo", {"a": "failed", "b": "passed", "c": "failed"}), 3)
    seed(store, "bob", report_of("dpo", FAILS_A), 4, code="def bob(): pass")
    seed(store, "cy", report_of("dpo", FAILS_A), 5)
    seed(store, "dee", report_of("dpo", FAILS_BC), 6)
    seed(store, "eve", report_of("dpo", FAILS_A), 7)
    for minute in range(8, 13):
        seed(store, "eve", report_of("dpo", {"a": "failed", "b": "failed", "c": "failed"}), minute)


def signatures_in(folder: Path) -> Signatures:
    """Known signatures saved as if graded: batch_sum fails a, hinge_loss fails b and c."""
    signatures = Signatures(folder, grade_all=lambda paths, exercise: pytest.fail("graded"))
    signatures.save(DPO, {"batch_sum": frozenset({"a"}), "hinge_loss": frozenset({"b", "c"})})
    return signatures


@pytest.fixture
def store(database_url):
    store = open_store(database_url, migrate=True)
    yield store
    store.close()


def test_the_class_numbers_item_analysis_mistakes_and_stuck(store, tmp_path):
    seed_class(store)
    stats = class_stats(store, DPO, signatures_in(tmp_path))
    assert (stats["students"], stats["submissions"], stats["passed"]) == (5, 12, 1)
    assert [d["students"] for d in stats["distribution"]] == [1, 0, 0, 1, 0, 0, 2, 0, 0, 1]
    assert stats["timeline"] == [{"day": "2026-11-02", "submissions": 12}]
    tests = {t["test"]: t for t in stats["tests"]}
    assert tests["a"]["title"] == "name of a"
    # counted now: ann passes, bob/cy fail a, dee passes a, eve fails all: 3 of 5
    assert tests["a"]["fail_share"] == pytest.approx(3 / 5)
    assert tests["c"]["fail_share"] == pytest.approx(2 / 5)  # dee and eve
    assert tests["c"]["first_fail_share"] == pytest.approx(2 / 5)  # bob's first and dee
    mistakes = stats["mistakes"]
    assert mistakes[0]["labels"] == ["batch_sum"]
    assert mistakes[0]["titles"] == [known_mistakes(DPO)[0].title]
    assert (mistakes[0]["size"], mistakes[0]["students"]) == (2, ["bob", "cy"])
    assert mistakes[0]["failing_tests"] == ["a"] and mistakes[0]["code"] == "def bob(): pass"
    by_students = {tuple(m["students"]): m for m in mistakes}
    assert by_students[("dee",)]["labels"] == ["hinge_loss"]
    assert by_students[("eve",)]["labels"] == [] and by_students[("eve",)]["titles"] == []
    assert [s["student"] for s in stats["stuck"]] == ["eve"]
    assert stats["stuck"][0]["since_best"] == 5
    assert stats["reference"] == DPO.reference.read_text()
    lines = stats_csv(stats, "mistakes").splitlines()
    assert lines[0].startswith("labels,titles,explanations,size,students,failing_tests")
    assert "bob; cy" in lines[1]


def run_of(store, report, minutes: int) -> None:
    """An anonymous Run, graded with `report`."""
    at = (START + timedelta(minutes=minutes)).isoformat()
    sent = Submission(secrets.token_hex(16), "run", None, "10.0.0.9", "dpo", "# run", at)
    store.admit(sent, secrets.token_hex(16), ROOM)
    job = store.claim("seeder")
    store.finish(job.grading_id, GradingResult(report.model_dump_json(), report.score,
                                               report.max_score, report.passed))  # fmt: skip


@pytest.mark.parametrize("course", ["default", None])
def test_practice_submits_and_runs_never_count_in_the_class_numbers(store, tmp_path, course):
    """Due 20 minutes in, practice after: ann's and dee's later failing Submits are practice;
    cy's extension makes her later passing one count; a failing Run counts nowhere."""
    seed_class(store)
    due = START + timedelta(minutes=20)
    store.set_term("default", "dpo", {"schedule": Schedule(due, policy="latest")})
    store.set_extension("default", "dpo", "cy", due + timedelta(minutes=20))
    signatures = signatures_in(tmp_path)
    before = {t["test"]: t["fail_share"] for t in class_stats(store, DPO, signatures)["tests"]}
    every_fail = report_of("dpo", {"a": "failed", "b": "failed", "c": "failed"})
    seed(store, "ann", every_fail, 30)  # practice: ann's counted Submit still passes
    seed(store, "dee", every_fail, 31)
    seed(store, "cy", report_of("dpo", ALL_PASS), 35)  # within her extension: counted
    seed(store, "eve", every_fail, 45)  # practice even for the extended schedule's length
    run_of(store, every_fail, 32)
    stats = class_stats(store, DPO, signatures, course)
    assert (stats["students"], stats["submissions"], stats["practice_submissions"]) == (5, 16, 3)
    tests = {t["test"]: t["fail_share"] for t in stats["tests"]}
    assert tests["a"] == pytest.approx(before["a"] - 1 / 5)  # cy passes now; ann still does
    assert tests["b"] == before["b"]  # dee's and eve's practice changed nothing
    assert tests["c"] == before["c"] == pytest.approx(2 / 5)
    assert stats["passed"] == 2 and stats["graded_students"] == 5
    groups = {tuple(m["students"]): m["failing_tests"] for m in stats["mistakes"]}
    assert groups == {("bob",): ["a"], ("dee",): ["b", "c"], ("eve",): ["a", "b", "c"]}
    assert [s["student"] for s in stats["stuck"]] == ["eve"]
    assert stats["stuck"][0]["submissions"] == 6  # her practice Submit is not a try


def test_no_submissions_is_an_empty_state(store, tmp_path):
    stats = class_stats(store, DPO, signatures_in(tmp_path))
    assert (stats["students"], stats["tests"], stats["mistakes"], stats["stuck"]) == (0, [], [], [])
    assert stats_csv(stats, "tests") == ""


def test_a_report_without_tests_counts_in_the_class_and_not_in_items(store, tmp_path):
    seed(store, "old", report_of("dpo", {}), 1)
    stats = class_stats(store, DPO, signatures_in(tmp_path))
    assert (stats["students"], stats["tests"], stats["mistakes"]) == (1, [], [])


def test_api_json_csv_and_who_may_read_them(make_client, tmp_path):
    (tmp_path / "data").mkdir()  # the class is there before the service (and its node) starts
    store = open_store(f"sqlite:///{tmp_path / 'data' / 'grader.sqlite3'}", migrate=True)
    seed_class(store)
    store.close()
    signatures_in(tmp_path / "data" / "mistakes")
    client, _ = make_client(instructor_token=TOKEN)
    url = "/api/instructor/stats?exercise=dpo"
    assert client.get(url).status_code == 401
    wrong = client.get(url, headers={"Authorization": "Bearer wrong-token-0123456789"})
    assert wrong.status_code == 401 and "instructor token" in wrong.json()["detail"]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    stats = client.get(url, headers=auth).json()
    assert stats["mistakes"][0]["labels"] == ["batch_sum"] and stats["labels_ready"]
    csv = client.get(url + "&format=csv&table=stuck", headers=auth)
    assert csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines()[1].startswith("eve,6,")
    unknown = client.get("/api/instructor/stats?exercise=nope", headers=auth)
    assert unknown.status_code == 422 and "nope" in unknown.json()["detail"]
    forged = client.get(url, headers={"X-LTI-Session": "not-a-token"})
    assert forged.status_code == 401


def test_cli_prints_the_api_object(tmp_path, capsys):
    store = open_store(f"sqlite:///{tmp_path / 'grader.sqlite3'}", migrate=True)
    seed_class(store)
    store.close()
    signatures_in(tmp_path / "mistakes")
    assert main(["stats", "dpo", "--json", "--data-dir", str(tmp_path)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["tests"][0] == {
        "test": "a", "title": "name of a", "fail_share": 0.6, "first_fail_share": 0.8,
        "failing": 3,
    }  # fmt: skip
    assert stats["mistakes"][0]["titles"] == [known_mistakes(DPO)[0].title]
    assert main(["stats", "dpo", "--data-dir", str(tmp_path)]) == 0
    assert "2 students: Sums the per-pair losses" in capsys.readouterr().out


def test_the_student_hint_names_one_exact_match_only_where_the_manifest_allows(tmp_path):
    found = {"batch_sum": frozenset({"a"}), "hinge_loss": frozenset({"b", "c"}),
             "keepdim": frozenset({"b", "c"})}  # fmt: skip
    allowed = replace(DPO, mistake_hints=True)
    batch_sum = known_mistakes(DPO)[0]
    assert hint(allowed, report_of("dpo", FAILS_A), found) == batch_sum.explanation
    assert hint(DPO, report_of("dpo", FAILS_A), found) == ""  # off by default
    assert hint(allowed, report_of("dpo", FAILS_BC), found) == ""  # two mistakes match
    assert hint(allowed, report_of("dpo", {"a": "failed", "b": "failed"}), found) == ""
    assert hint(allowed, report_of("dpo", FAILS_A), None) == ""  # not graded yet


def test_the_manifest_key_is_a_boolean_and_a_mistake_without_docstring_is_named(tmp_path):
    folder = tmp_path / "exercise"
    shutil.copytree(DPO.root, folder, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = folder / "exercise.toml"
    text = manifest.read_text()
    manifest.write_text(text + '\n[hints]\nmistakes = "yes"\n')
    with pytest.raises(ExerciseError, match=r"\[hints\] mistakes must be true or false"):
        load_exercise(folder)
    manifest.write_text(text + "\n[hints]\nmistakes = true\n")
    assert load_exercise(folder).mistake_hints
    (folder / "tests" / "implementations" / "wrong" / "aaa_bare.py").write_text("x = (\n")
    first = known_mistakes(load_exercise(folder))[0]
    assert (first.name, first.title, first.explanation) == ("aaa_bare", "aaa_bare", "")
