"""Stored reports of earlier schema versions still load."""

from __future__ import annotations

import json

from grader.report import REPORT_VERSION, Report

# a report as version 2.0 stored it: with the grader's counters in `metrics`
OLD_REPORT = {
    "schema_version": "2.0",
    "exercise": "gspo",
    "mode": "submit",
    "passed": True,
    "score": 10.0,
    "max_score": 10.0,
    "tiers": [{"id": "T0", "title": "Contract", "passed": True, "score": 10.0,
               "max_score": 10.0, "tests": [{"id": "a.py::t", "name": "t",
                                            "outcome": "passed"}]}],
    "metrics": {"student_calls": 160.0, "judge_cpu_s": 0.3, "calls_answered_ahead": 35.0},
    "timings": {"total_s": 0.5},
    "created_at": "2026-11-30T10:00:00Z",
}  # fmt: skip


def test_a_version_2_report_loads_and_keeps_what_the_student_reads():
    report = Report.from_json(json.dumps(OLD_REPORT))
    assert report.schema_version == "2.0" and report.passed and report.score == 10.0
    assert [test.id for tier in report.tiers for test in tier.tests] == ["a.py::t"]
    assert "metrics" not in report.model_dump()  # the counters are the grader's, not kept


def test_a_new_report_has_the_new_version_and_no_metrics():
    report = Report(passed=False, score=0.0, max_score=1.0)
    assert report.schema_version == REPORT_VERSION == "3.0"
    assert Report.from_json(report.model_dump_json()) == report
