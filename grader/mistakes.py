"""An exercise's known mistakes: the wrong implementations of its corpus
(`tests/implementations/wrong/*.py`), each named by its docstring (its first sentence: the
human name; its first paragraph: the explanation), and each one's *signature*: the set of
tests it fails on Submit.

Signatures are found by grading each file once per exercise version, on a background
thread (a request never waits for it), and kept in `<data dir>/mistakes/<id>-<version>.json`.

    signatures = Signatures(data_dir / "mistakes", grade_all)
    found = signatures.get(exercise)      # {name: failing tests}, or None while grading
"""

from __future__ import annotations

import ast
import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from grader.exercise import Exercise, exercise_version
from grader.report import Report

log = logging.getLogger(__name__)

GradeAll = Callable[[list[Path], str], list[Report]]  # (files, exercise id) -> reports


@dataclass(frozen=True)
class KnownMistake:
    name: str  # the file's name without .py
    title: str  # the docstring's first sentence; the name when there is no docstring
    explanation: str  # the docstring's first paragraph, on one line; "" when none
    path: Path


@cache
def known_mistakes(exercise: Exercise) -> tuple[KnownMistake, ...]:
    found = []
    for path in sorted((exercise.corpus / "wrong").glob("*.py")):
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        except (SyntaxError, ValueError):  # a mistake may be a syntax error
            doc = ""
        first = " ".join(doc.split("\n\n")[0].split()) if doc else ""
        if first.startswith("Caught by"):
            first = ""
        title = re.split(r"(?<=[.:])\s", first, maxsplit=1)[0].rstrip(".:") or path.stem
        found.append(KnownMistake(path.stem, title, first, path))
    return tuple(found)


def failing_tests(report: Report) -> frozenset[str]:
    """The tests a report failed or errored (skipped ones are not failures)."""
    tests = (test for tier in report.tiers for test in tier.tests)
    return frozenset(t.id for t in tests if t.outcome in ("failed", "error"))


def cold_grade_all(paths: list[Path], exercise_id: str) -> list[Report]:
    from grader.judge import grade_files  # torch: only where signatures are graded

    return grade_files(paths, exercise=exercise_id, jobs=1)


class Signatures:
    def __init__(self, folder: Path, grade_all: GradeAll = cold_grade_all):
        self.folder = folder
        self.grade_all = grade_all
        self._busy: set[str] = set()
        self._lock = threading.Lock()

    def path(self, exercise: Exercise) -> Path:
        return self.folder / f"{exercise.id}-{exercise_version(exercise)}.json"

    def get(self, exercise: Exercise, wait: bool = False) -> dict[str, frozenset[str]] | None:
        """The signatures at the exercise's current version; None while they are graded in
        the background (started here if need be). `wait`: grade them now instead."""
        path = self.path(exercise)
        if path.is_file():
            return {k: frozenset(v) for k, v in json.loads(path.read_text()).items()}
        if wait:
            self._grade(exercise, path)
            return self.get(exercise)
        with self._lock:
            if path.name in self._busy:
                return None
            self._busy.add(path.name)
        threading.Thread(target=self._grade, args=(exercise, path), daemon=True).start()
        return None

    def save(self, exercise: Exercise, found: dict[str, frozenset[str]]) -> None:
        path = self.path(exercise)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps({k: sorted(v) for k, v in sorted(found.items())}))
        partial.replace(path)

    def _grade(self, exercise: Exercise, path: Path) -> None:
        try:
            mistakes = known_mistakes(exercise)
            reports = self.grade_all([m.path for m in mistakes], exercise.id)
            pairs = zip(mistakes, reports, strict=True)
            found = {m.name: failing_tests(r) for m, r in pairs if r.grader_error is None}
            self.save(exercise, found)
        except Exception:
            log.exception("grading the known mistakes of %s failed", exercise.id)
        finally:
            with self._lock:
                self._busy.discard(path.name)


def matching(failing: frozenset[str], found: dict[str, frozenset[str]]) -> list[str]:
    """The known mistakes whose signature is exactly this set of failing tests."""
    return sorted(name for name, signature in found.items() if signature == failing)


def hint(exercise: Exercise, report: Report, found: dict[str, frozenset[str]] | None) -> str:
    """The one-line explanation of the one known mistake a failed report matches, where the
    manifest allows it (`[hints] mistakes = true`); "" otherwise."""
    if not exercise.mistake_hints or found is None or report.passed:
        return ""
    names = matching(failing_tests(report), found)
    if len(names) != 1:
        return ""
    mistake = next(m for m in known_mistakes(exercise) if m.name == names[0])
    return mistake.explanation or mistake.title
