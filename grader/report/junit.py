"""Write a Report as JUnit XML: one <testsuite> per tier, one <testcase> per test.

Failed tests carry <failure>, grader errors <error>, skipped tests <skipped>; a submission
error that left no tier to report (a timeout of the whole grading) becomes a one-test suite
named "submission", so CI tools still show a red mark with the reason.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from grader.report.model import Report, TierResult, score_text

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    """Drop characters XML 1.0 cannot hold (student output may contain anything)."""
    return _NOT_XML.sub("\ufffd", text)


def junit_xml(report: Report) -> str:
    root = ET.Element("testsuites", name=f"gspo-grader {report.submission or ''}".strip())
    for tier in report.tiers:
        root.append(_suite(tier))
    problem = report.submission_error or report.grader_error
    if problem is not None and not any(t.tests for t in report.tiers):
        root.append(_problem_suite(report))
    _count(root, root.findall("testsuite"))
    if report.output:
        ET.SubElement(root, "system-out").text = clean(report.output)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(report: Report, path: Path | str) -> None:
    Path(path).write_text(junit_xml(report), encoding="utf-8")


def _suite(tier: TierResult) -> ET.Element:
    suite = ET.Element("testsuite", name=f"{tier.id} {tier.title}")
    for test in tier.tests:
        case = ET.SubElement(
            suite, "testcase", classname=tier.id, name=clean(test.name), time=f"{test.duration_s}"
        )
        tag = {"failed": "failure", "error": "error", "skipped": "skipped"}.get(test.outcome)
        if tag is not None:
            headline = test.message.splitlines()[0] if test.message.strip() else test.outcome
            element = ET.SubElement(case, tag, message=clean(headline))
            element.text = clean(test.message + (f"\n\n{test.inputs}" if test.inputs else ""))
    _count(suite, suite.findall("testcase"))
    suite.set("score", score_text(tier.score))
    suite.set("max_score", score_text(tier.max_score))
    return suite


def _problem_suite(report: Report) -> ET.Element:
    suite = ET.Element("testsuite", name="submission")
    case = ET.SubElement(suite, "testcase", classname="submission", name="grading", time="0")
    if report.submission_error is not None:
        text = report.submission_error.message
        ET.SubElement(case, "failure", message=clean(text)).text = clean(
            f"{report.submission_error.kind}: {text}\n{report.submission_error.detail}"
        )
    else:
        text = report.grader_error.message
        ET.SubElement(case, "error", message=clean(text)).text = clean(report.grader_error.detail)
    _count(suite, [case])
    return suite


def _count(parent: ET.Element, children: list[ET.Element]) -> None:
    """tests/failures/errors/skipped/time attributes summed over cases or suites."""
    if parent.tag == "testsuites" or (children and children[0].tag == "testsuite"):
        keys = ("tests", "failures", "errors", "skipped")
        for key in keys:
            parent.set(key, str(sum(int(child.get(key, "0")) for child in children)))
        parent.set("time", f"{sum(float(c.get('time', '0')) for c in children):.6f}")
        return
    parent.set("tests", str(len(children)))
    for key, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        parent.set(key, str(sum(child.find(tag) is not None for child in children)))
    parent.set("time", f"{sum(float(c.get('time', '0')) for c in children):.6f}")
