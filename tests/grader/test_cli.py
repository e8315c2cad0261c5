"""`gspo-grader`: exit codes, pure JSON on stdout, bulk grading with a gradebook."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from grader.cli import main, submission_paths
from grader.exercise import REPO_ROOT

CLI = [sys.executable, "-m", "grader"]


def run_cli(*args: str, timeout: float = 600, env=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GSPO_GRADER_EXERCISE_DIR"} | (env or {})
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env
    )


def test_missing_path_is_a_usage_error(capsys, tmp_path):
    assert main(["grade", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gspo-grader: error: ") and "nope.py" in err
    assert err.count("\n") == 1


def test_unknown_tier_is_a_usage_error(capsys):
    assert main(["grade", str(REPO_ROOT / "reference" / "gspo.py"), "--tiers", "T0,T42"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gspo-grader: error: unknown tier(s) T42; declared: T0")


def test_empty_folder_and_bad_options_are_usage_errors(capsys, tmp_path):
    assert main(["grade", str(tmp_path)]) == 2
    assert "holds no .py" in capsys.readouterr().err
    two = [str(REPO_ROOT / "reference" / "gspo.py"), str(REPO_ROOT / "starter" / "gspo.py")]
    assert main(["grade", *two, "--junit", str(tmp_path / "j.xml")]) == 2
    with pytest.raises(SystemExit) as exit_:
        main(["grade", two[0], "--mode", "later"])
    assert exit_.value.code == 2


def test_a_folder_is_read_recursively_only_when_asked(tmp_path):
    (tmp_path / "wrong").mkdir()
    for name in ("a.py", "wrong/b.py", "notes.txt"):
        (tmp_path / name).write_text("")
    assert submission_paths([str(tmp_path)]) == [tmp_path / "a.py"]
    assert submission_paths([str(tmp_path)], recursive=True) == [
        tmp_path / "a.py",
        tmp_path / "wrong" / "b.py",
    ]


def test_tiers_lists_every_test_with_its_visibility(capsys):
    assert main(["tiers", "--exercise", "dpo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "T0 Contract (10 points, visible; 8 tests)"
    assert lines[1].startswith("    visible  test_t0_contract.py::test_signatures  Both ")
    hidden = "    hidden   test_t1_reference.py::test_long_responses_match_reference  Responses"
    assert any(line.startswith(hidden) for line in lines)
    assert lines[-1] == "Total: 100 points, 32 tests"


def test_statement_is_printed(capsys):
    assert main(["statement"]) == 0
    assert capsys.readouterr().out == (REPO_ROOT / "statement.md").read_text(encoding="utf-8")


@pytest.mark.sandbox
@pytest.mark.slow
def test_reference_exits_0_with_pure_json_and_every_output_file(tmp_path):
    gradescope, junit, artifacts = tmp_path / "results.json", tmp_path / "j.xml", tmp_path / "art"
    result = run_cli(
        "grade", "reference/gspo.py", "--tiers", "T0,T3", "--json", "-",
        "--gradescope", str(gradescope), "--junit", str(junit), "--artifacts", str(artifacts),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] and [t["id"] for t in report["tiers"]] == ["T0", "T3"]
    assert report["submission"] == "reference/gspo.py"
    assert json.loads(gradescope.read_text())["score"] == report["score"]
    assert ET.parse(junit).getroot().get("failures") == "0"
    toy = json.loads((artifacts / "toy.json").read_text())
    assert toy == report["artifacts"]["data"]
    assert len(toy["ratios"]) == 3 and len(toy["grad_matrix"]) == 3
    for name in ("curves", "grad_matrix", "token_vs_sequence"):
        assert (artifacts / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.sandbox
@pytest.mark.slow
def test_folder_bulk_grading_exits_1_and_writes_the_gradebook(tmp_path):
    folder = tmp_path / "class"
    (folder / "late").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "reference" / "gspo.py", folder / "late" / "ada.py")
    shutil.copy(REPO_ROOT / "starter" / "gspo.py", folder / "bob.py")
    (folder / "cy.py").write_text("def sequence_ratio(:\n", encoding="utf-8")
    (folder / "notes.txt").write_text("not a submission", encoding="utf-8")
    grades = tmp_path / "grades.csv"
    reports = tmp_path / "reports.json"
    result = run_cli(
        "grade", str(folder), "--recursive", "--tiers", "T0", "--jobs", "2", "--csv",
        str(grades), "--json", str(reports),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert " INFO " not in result.stderr and " INFO " not in result.stdout, result.stderr
    assert "1/3 submissions passed" in result.stdout, reports.read_text()
    rows = list(csv.DictReader(io.StringIO(grades.read_text(encoding="utf-8"))))
    assert list(rows[0]) == ["submission", "passed", "score", "max_score", "T0", "error"]
    by_name = {os.path.basename(row["submission"]): row for row in rows}
    assert sorted(by_name) == ["ada.py", "bob.py", "cy.py"]
    assert by_name["ada.py"]["submission"] == str(folder / "late" / "ada.py")
    assert by_name["ada.py"]["passed"] == "true" and by_name["ada.py"]["T0"] == "10"
    assert by_name["bob.py"]["passed"] == "false" and by_name["bob.py"]["T0"] == "0"
    assert by_name["cy.py"]["error"].startswith("syntax_error")


def test_a_sandbox_weaker_than_required_is_refused_before_grading():
    env = {"GSPO_GRADER_SANDBOX_LEVEL": "rlimits", "GSPO_GRADER_SANDBOX_REQUIRE": "bwrap"}
    result = run_cli("grade", "reference/gspo.py", env=env, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("gspo-grader: error: sandbox isolation bwrap is required")
    assert result.stderr.count("\n") == 1


@pytest.mark.sandbox
@pytest.mark.slow
def test_run_mode_of_a_failing_file_exits_1_with_visible_tests_only():
    result = run_cli("grade", "starter/gspo.py", "--mode", "run", "--json", "-")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["mode"] == "run" and not report["passed"]
    tests = [test for tier in report["tiers"] for test in tier["tests"]]
    assert tests and not any(test["hidden"] for test in tests)


def test_the_exercises_are_listed_and_each_statement_is_printed(capsys):
    assert main(["exercises"]) == 0
    listing = capsys.readouterr().out
    assert listing.startswith("gspo ") and "\ndpo " in listing
    assert main(["statement", "--exercise", "dpo"]) == 0
    dpo = (REPO_ROOT / "exercises" / "dpo" / "statement.md").read_text(encoding="utf-8")
    assert capsys.readouterr().out == dpo
    assert main(["statement", "--exercise", "nope"]) == 2
    assert "no exercise 'nope'" in capsys.readouterr().err


@pytest.mark.sandbox
@pytest.mark.slow
def test_check_exercise_passes_both_exercises_and_names_a_broken_one(tmp_path):
    for folder in (".", "exercises/dpo"):
        result = run_cli("check-exercise", folder)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("[ok]") == 9 and "every check holds" in result.stdout
        assert "[ok] at least 5 hidden tests: " in result.stdout
    broken = tmp_path / "broken"
    shutil.copytree(REPO_ROOT / "exercises" / "dpo", broken)
    (broken / "starter" / "dpo.py").write_text((broken / "reference" / "dpo.py").read_text())
    result = run_cli("check-exercise", str(broken))
    assert result.returncode == 1
    assert "[FAIL] starter fails every test: 100/100, every test passed; not failed: {" in (
        result.stdout
    )


def test_doctor_prints_the_isolation_report_and_versions(capsys):
    import torch

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Sandbox level: ") and "Limits:" in out
    assert f"torch {torch.__version__}" in out and "gspo-grader 0.1.0" in out


def test_doctor_warns_when_the_data_folder_is_open_to_other_users(capsys, monkeypatch, tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    monkeypatch.setenv("GSPO_GRADER_DATA_DIR", str(data))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"WARNING: {data} is 0755, open to other local users; expected 0700" in out
    data.chmod(0o700)
    assert main(["doctor"]) == 0
    assert "WARNING" not in capsys.readouterr().out
