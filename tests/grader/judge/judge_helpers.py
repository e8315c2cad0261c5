"""Small throw-away copies of the exercise, for the judge's tests.

A copy holds the real reference, starter, experiment.py and statement.md, plus tier suites
written by the test, and is selected with GSPO_GRADER_EXERCISE_DIR (the judge processes the
Grader starts inherit it).
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from grader.exercise import REPO_ROOT

EXERCISE_FILES = ("exercise.toml", "reference", "starter", "experiment.py", "statement.md")


def build_exercise(root: Path, tiers_toml: str, tests: dict[str, str], copy_tiers=False) -> Path:
    """An exercise folder at `root`; `tests` maps file names under tests/tiers to sources."""
    root.mkdir(parents=True, exist_ok=True)
    for name in EXERCISE_FILES:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)
    tiers = root / "tests" / "tiers"
    if copy_tiers:
        shutil.copytree(
            REPO_ROOT / "tests" / "tiers", tiers, ignore=shutil.ignore_patterns("__pycache__")
        )
    tiers.mkdir(parents=True, exist_ok=True)
    if tiers_toml:
        (tiers / "tiers.toml").write_text(textwrap.dedent(tiers_toml), encoding="utf-8")
    for name, source in tests.items():
        (tiers / name).write_text(textwrap.dedent(source), encoding="utf-8")
    return root
