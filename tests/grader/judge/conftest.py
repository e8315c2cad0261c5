"""Fixtures for the judge's tests (helpers live in judge_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.exercise import refresh_catalog


@pytest.fixture
def use_exercise(monkeypatch):
    """Point this process (and the judges it starts) at another exercise folder."""

    def use(root: Path) -> None:
        monkeypatch.setenv("GSPO_GRADER_EXERCISE_DIR", str(root))
        refresh_catalog()

    yield use
    refresh_catalog()
