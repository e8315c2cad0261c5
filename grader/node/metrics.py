"""Prometheus metrics, written by hand: a handful of lines do not justify a dependency.

Exposed: gradings by mode and outcome (counter), grading latency (histogram), requests turned
away because the queue was full (counter), attempts retried after a grader fault or a lost
grading node (counter), the judges' own counters summed over gradings (`GradingStats`: CPU
in the judge and the sandboxed worker, student calls, calls answered ahead, tier tests; they
are not the student's to read, so they live here and not in the report), the toy results
whose plots were drawn and those whose plots were already there (counters: plots are drawn
once per distinct result and cost more CPU than a grading), and gauges the caller passes
(queue depth, in flight, readiness...).
"""

from __future__ import annotations

import threading
from collections import Counter

from grader.judge import COUNTERS

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
OUTCOMES = ("passed", "failed", "submission_error", "grader_error")


class Metrics:
    """Thread-safe counters; `render()` gives the Prometheus text exposition format."""

    def __init__(self):
        self._lock = threading.Lock()
        self._gradings: Counter[tuple[str, str]] = Counter()  # (mode, outcome) -> count
        self._rejected = 0
        self._retries = 0
        self._reused = 0
        self._bucket_counts = [0] * len(LATENCY_BUCKETS)
        self._latency_sum = 0.0
        self._latency_count = 0
        self._stats: Counter[str] = Counter()  # GradingStats field -> sum over gradings
        self._plots: Counter[bool] = Counter()  # drawn (True) or already there (False)

    def observe_grading(self, mode: str, outcome: str, seconds: float) -> None:
        with self._lock:
            self._gradings[(mode, outcome)] += 1
            self._latency_sum += seconds
            self._latency_count += 1
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    self._bucket_counts[i] += 1

    def observe_stats(self, report, stats) -> None:
        """A judge's counters of one grading (`Grader(on_stats=...)`)."""
        with self._lock:
            for field in COUNTERS:
                self._stats[field] += getattr(stats, field)

    def observe_plots(self, drawn: bool) -> None:
        """A finished grading's toy result: its plots drawn now, or already there."""
        with self._lock:
            self._plots[drawn] += 1

    def observe_rejected(self) -> None:
        with self._lock:
            self._rejected += 1

    def observe_retry(self) -> None:
        """An attempt ended by a grader fault; the job is graded again."""
        with self._lock:
            self._retries += 1

    def observe_reuse(self) -> None:
        """A live grading took an earlier grading's report (reuse.py); it is counted among
        the gradings too."""
        with self._lock:
            self._reused += 1

    def render(self, gauges: dict[str, tuple[str, float]]) -> str:
        """The exposition text; `gauges` maps a metric name to (help text, value)."""
        with self._lock:
            lines = self._counter_lines() + self._histogram_lines()
        for name, (help_text, value) in gauges.items():
            lines += [*_header(name, help_text, "gauge"), f"{name} {value:g}"]
        return "\n".join(lines) + "\n"

    def _counter_lines(self) -> list[str]:
        name = "gspo_grader_gradings_total"
        lines = _header(name, "Gradings finished, by mode and outcome.", "counter")
        for mode in ("run", "submit"):
            for outcome in OUTCOMES:
                count = self._gradings[(mode, outcome)]
                lines.append(f'{name}{{mode="{mode}",outcome="{outcome}"}} {count}')
        for name, text, value in (
            ("gspo_grader_rejected_total", "Gradings refused (503, 429).", self._rejected),
            ("gspo_grader_retries_total", "Attempts lost to a grader fault or a dead node, "
             "retried.", self._retries),
            ("gspo_grader_verdicts_reused_total", "Gradings that took the report of an "
             "earlier grading of the same code (no tier ran).", self._reused),
            ("gspo_grader_plots_drawn_total", "Toy results whose plots this node drew.",
             self._plots[True]),
            ("gspo_grader_plots_reused_total", "Gradings whose toy result already had its "
             "plots (drawn once per distinct result).", self._plots[False]),
        ):  # fmt: skip
            lines += [*_header(name, text, "counter"), f"{name} {value}"]
        for field, name in COUNTERS.items():
            text = f"Sum over gradings of the judges' {field.replace('_', ' ')}."
            lines += [*_header(name, text, "counter"), f"{name} {self._stats[field]:g}"]
        return lines

    def _histogram_lines(self) -> list[str]:
        name = "gspo_grader_grading_seconds"
        lines = _header(name, "Time spent grading one submission.", "histogram")
        for bound, count in zip(LATENCY_BUCKETS, self._bucket_counts, strict=True):
            lines.append(f'{name}_bucket{{le="{bound:g}"}} {count}')
        lines.append(f'{name}_bucket{{le="+Inf"}} {self._latency_count}')
        lines.append(f"{name}_sum {self._latency_sum:.6f}")
        lines.append(f"{name}_count {self._latency_count}")
        return lines


def _header(name: str, text: str, kind: str) -> list[str]:
    return [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]


def outcome_label(report) -> str:
    """Which counter a report falls under; a grader fault is never counted as the student's."""
    if report.grader_error is not None:
        return "grader_error"
    if report.submission_error is not None:
        return "submission_error"
    return "passed" if report.passed else "failed"
