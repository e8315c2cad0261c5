"""The Report's other shapes: Gradescope results.json, JUnit XML, CSV gradebook, text."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from grader.report import (
    Report,
    SubmissionError,
    TestResult,
    TierResult,
    gradebook_csv,
    gradescope_results,
    junit_xml,
    render_text,
    use_colour,
    write_gradebook,
    write_gradescope,
    write_junit,
)


def sample_report(**changes) -> Report:
    t0 = TierResult(
        id="T0",
        title="Contract",
        passed=True,
        score=10.0,
        max_score=10.0,
        tests=[TestResult(id="t0.py::a", name="shape", outcome="passed")],
    )
    t1 = TierResult(
        id="T1",
        title="Reference compare",
        passed=False,
        score=10.0,
        max_score=30.0,
        tests=[
            TestResult(id="t1.py::a", name="values", outcome="passed"),
            TestResult(
                id="t1.py::b",
                name="gradients <&>",
                outcome="failed",
                message="grad was 0.1; expected 0.2",
                inputs="gspo_loss(tensor(float64, shape [2, 3]))",
            ),
            TestResult(id="t1.py::c", name="hidden", outcome="error", message="bug", hidden=True),
            TestResult(id="t1.py::d", name="skip", outcome="skipped", message="no bf16"),
        ],
    )
    fields = dict(
        submission="alice.py",
        passed=False,
        score=20.0,
        max_score=40.0,
        tiers=[t0, t1],
        output="hello \x00 from print\n",
    )
    return Report(**{**fields, **changes})


def test_gradescope_scores_add_up_and_hidden_tests_wait_for_publication(tmp_path):
    results = gradescope_results(sample_report())
    assert results["score"] == 20.0 and results["max_score"] == 40.0
    assert results["stdout_visibility"] == "visible"
    tests = results["tests"]
    assert len(tests) == 5
    assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(tests[0])
    assert sum(t["max_score"] for t in tests) == pytest.approx(40.0)
    assert sum(t["score"] for t in tests) == pytest.approx(20.0)
    failed = tests[2]
    assert failed["status"] == "failed" and "expected 0.2" in failed["output"]
    assert "shape [2, 3]" in failed["output"]
    assert tests[3]["visibility"] == "after_published" and tests[3]["status"] == "failed"
    assert "hello" in results["output"]
    write_gradescope(sample_report(), tmp_path / "results.json")
    assert json.loads((tmp_path / "results.json").read_text())["score"] == 20.0


def test_junit_parses_with_one_suite_per_tier(tmp_path):
    write_junit(sample_report(), tmp_path / "junit.xml")
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["T0 Contract", "T1 Reference compare"]
    t1 = suites[1]
    assert (t1.get("tests"), t1.get("failures"), t1.get("errors"), t1.get("skipped")) == (
        "4",
        "1",
        "1",
        "1",
    )
    failure = t1.find("testcase[@name='gradients <&>']/failure")
    assert failure.get("message") == "grad was 0.1; expected 0.2"
    assert root.get("tests") == "5" and root.get("failures") == "1"
    assert "\x00" not in root.find("system-out").text


def test_junit_shows_a_timeout_that_left_no_tests():
    error = SubmissionError(kind="timeout", message="The grading took longer than 60 s.")
    report = Report(passed=False, score=0, max_score=0, submission_error=error)
    root = ET.fromstring(junit_xml(report).split("\n", 1)[1])
    failure = root.find("testsuite[@name='submission']/testcase/failure")
    assert "60 s" in failure.get("message") and root.get("failures") == "1"


def test_gradebook_columns_and_rows(tmp_path):
    error = SubmissionError(kind="syntax_error", message="invalid syntax", line=3)
    broken = Report(
        submission="bob.py", passed=False, score=0, max_score=100, submission_error=error
    )
    write_gradebook([sample_report(), broken], tmp_path / "grades.csv")
    rows = list(csv.reader(io.StringIO((tmp_path / "grades.csv").read_text())))
    assert rows[0] == ["submission", "passed", "score", "max_score", "T0", "T1", "error"]
    assert rows[1] == ["alice.py", "false", "20", "40", "10", "10", ""]
    assert rows[2] == ["bob.py", "false", "0", "100", "", "", "syntax_error: invalid syntax"]
    assert gradebook_csv([]).splitlines() == ["submission,passed,score,max_score,error"]


def test_text_lists_tiers_failures_and_score_without_colour_off_a_terminal():
    text = render_text(sample_report())
    assert "\033[" not in text
    lines = text.splitlines()
    assert any(line.startswith("✔ T0") and line.endswith("10/10") for line in lines)
    assert any(line.startswith("✘ T1") and line.endswith("10/30") for line in lines)
    assert "grad was 0.1; expected 0.2" in text and "shape [2, 3]" in text
    assert "Score: 20/40  FAILED" in text


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_colour(Terminal()) and not use_colour(io.StringIO())
    assert "\033[" in render_text(sample_report(), colour=True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour(Terminal())


def test_text_puts_a_submission_error_first():
    error = SubmissionError(kind="syntax_error", message="invalid syntax", line=3, detail="^")
    text = render_text(Report(passed=False, score=0, max_score=0, submission_error=error))
    assert text.splitlines()[1] == "Submission error [syntax_error] (line 3): invalid syntax"


def thirds_report() -> Report:
    """Scores that are not round, and three tests failing with one student error."""
    error = "NotImplementedError: not written yet (gspo.py, line 37)"
    tests = [
        TestResult(id="a.py::one", name="one", outcome="failed", message=error),
        TestResult(
            id="a.py::two", name="two", outcome="failed", message=error, same_error_as="a.py::one"
        ),
        TestResult(id="a.py::three", name="three", outcome="passed"),
    ]
    tier = TierResult(
        id="T0", title="Contract", passed=False, score=10 / 3, max_score=10, tests=tests
    )
    alike = TestResult(
        id="b.py::x", name="x", outcome="failed", message=error, same_error_as="a.py::one"
    )
    t1 = TierResult(id="T1", title="Compare", passed=False, score=0, max_score=10, tests=[alike])
    return Report(submission="s.py", passed=False, score=10 / 3, max_score=20, tiers=[tier, t1])


def test_scores_show_at_most_two_decimals_while_the_report_keeps_them_exact():
    report = thirds_report()
    assert report.score == 10 / 3
    assert "Score: 3.33/20  FAILED" in render_text(report)
    assert gradebook_csv([report]).splitlines()[1].split(",")[2:5] == ["3.33", "20", "3.33"]
    results = gradescope_results(report)
    assert results["score"] == 3.33 and "3.33 / 20" in results["output"]


def test_repeated_student_errors_are_shown_once_then_counted():
    report = thirds_report()
    text = render_text(report)
    assert text.count("NotImplementedError: not written yet") == 1
    assert "... and 2 more tests failed with this same error" in text
    assert "1 test failed with the same error as above" in text
    tests = gradescope_results(report)["tests"]
    assert len(tests) == 4 and tests[0]["output"].endswith(
        "and 2 more tests failed with this same error"
    )
    assert tests[1]["output"] == "Failed with the same error as test a.py::one."
    assert tests[1]["status"] == "failed"  # each test keeps its own entry and outcome
    root = ET.fromstring(junit_xml(report).split("\n", 1)[1])
    assert root.get("failures") == "3"
