"""Grade many submission files in parallel, one warm judge (and sandboxed worker) per job.

Used by `gspo-grader grade FOLDER` for a class's worth of submissions: the judges start once,
then each grading costs only its tests; a progress bar on a terminal shows how far it got.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from grader.judge.runner import Grader, grade
from grader.report import Report

if TYPE_CHECKING:
    from grader.sandbox import Limits

BAR_WIDTH = 30


def read_source(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def grade_files(
    paths: list[Path],
    *,
    mode: str = "submit",
    tiers: list[str] | None = None,
    jobs: int = 2,
    limits: Limits | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Report]:
    """One Report per path, in the order given; Report.submission is the path."""
    if len(paths) == 1:
        report = grade(
            read_source(paths[0]), mode=mode, tiers=tiers, filename=paths[0].name, limits=limits
        )
        return [_named(report, paths[0])]
    jobs = max(1, min(jobs, len(paths)))
    done = 0
    with Grader(pool_size=jobs, limits=limits, warm=False) as grader:

        def one(path: Path) -> Report:
            report = grader.grade(read_source(path), mode=mode, filename=path.name, tiers=tiers)
            return _named(report, path)

        with ThreadPoolExecutor(jobs, thread_name_prefix="bulk-grade") as pool:
            futures = [pool.submit(one, path) for path in paths]
            for _ in as_completed(futures):
                done += 1
                if progress is not None:
                    progress(done, len(paths))
            return [future.result() for future in futures]


def _named(report: Report, path: Path) -> Report:
    report.submission = str(path)
    return report


class ProgressBar:
    """`[#####.....] 12/50` on stderr, redrawn in place; silent when stderr is no terminal."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        filled = BAR_WIDTH * done // max(total, 1)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r[{bar}] {done}/{total}{end}")
        self.stream.flush()
