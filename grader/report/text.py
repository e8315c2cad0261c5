"""The human report: per tier a mark, the title and the score, then what failed and why.

Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org).
"""

from __future__ import annotations

import os
import textwrap
from typing import TextIO

from grader.report.model import (
    Report,
    TestResult,
    TierResult,
    more_text,
    repeated_errors,
    score_text,
)

MAX_OUTPUT_LINES = 40
_CODES = {"green": "32", "red": "31", "yellow": "33", "bold": "1", "dim": "2"}


def use_colour(stream: TextIO) -> bool:
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


class _Style:
    def __init__(self, colour: bool):
        self.colour = colour

    def __call__(self, text: str, name: str) -> str:
        return f"\033[{_CODES[name]}m{text}\033[0m" if self.colour else text


def render_text(report: Report, colour: bool = False) -> str:
    style = _Style(colour)
    name = report.submission or "submission"
    lines = [style(f"gspo-grader: {name} ({report.mode})", "bold")]
    lines += _problems(report, style)
    repeats = repeated_errors(report)
    for tier in report.tiers:
        lines += _tier(tier, style, repeats)
    verdict = style("PASSED", "green") if report.passed else style("FAILED", "red")
    lines.append(f"Score: {score_text(report.score)}/{score_text(report.max_score)}  {verdict}")
    lines += _output(report, style)
    return "\n".join(lines) + "\n"


def _problems(report: Report, style: _Style) -> list[str]:
    lines = []
    error = report.submission_error
    if error is not None:
        where = f" (line {error.line})" if error.line else ""
        lines.append(style(f"Submission error [{error.kind}]{where}: {error.message}", "red"))
        lines += [_indent(error.detail, 2)] if error.detail else []
    if report.grader_error is not None:
        lines.append(style(report.grader_error.message, "yellow"))
        lines += [_indent(report.grader_error.detail, 2)] if report.grader_error.detail else []
    return lines


def _tier(tier: TierResult, style: _Style, repeats: dict[str, list[TestResult]]) -> list[str]:
    mark = style("✔", "green") if tier.passed else style("✘", "red")
    score = f"{score_text(tier.score)}/{score_text(tier.max_score)}"
    lines = [f"{mark} {tier.id:<4}{tier.title:<40}{score:>10}"]
    for test in tier.tests:
        if test.outcome in ("failed", "error") and test.same_error_as is None:
            lines += _failure(test, style, len(repeats.get(test.id, ())))
    alike = sum(test.same_error_as is not None for test in tier.tests)
    if alike:
        noun = "test" if alike == 1 else "tests"
        lines.append(f"    {style('-', 'red')} {alike} {noun} failed with the same error as above")
    return lines


def _failure(test: TestResult, style: _Style, repeated: int) -> list[str]:
    label = "grader error" if test.outcome == "error" else "failed"
    hidden = " (hidden test)" if test.hidden else ""
    lines = [f"    {style('-', 'red')} {test.name}{hidden} [{label}]"]
    if test.message:
        lines.append(_indent(test.message, 6))
    if test.inputs:
        lines.append(style(_indent("inputs: " + test.inputs, 6), "dim"))
    if repeated:
        lines.append(style(_indent(f"... {more_text(repeated)}", 6), "dim"))
    return lines


def _output(report: Report, style: _Style) -> list[str]:
    if not report.output:
        return []
    shown = report.output.splitlines()
    more = len(shown) > MAX_OUTPUT_LINES or report.output_truncated
    lines = [style("Output of your code:", "bold"), _indent("\n".join(shown[:MAX_OUTPUT_LINES]), 2)]
    return lines + ([style("  ... (truncated)", "dim")] if more else [])


def _indent(text: str, spaces: int) -> str:
    return textwrap.indent(text.rstrip(), " " * spaces)
