"""docs/instructors.md, done for real: add a T4 tier to a copy of the exercise."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from judge_helpers import build_exercise

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

T4_TIER = """
[[tier]]
id = "T4"
title = "Batch invariance"
description = "Splitting a batch in two gives the same per-response ratios."
points = 10
visibility = "visible"
order = 4
"""

T4_TEST = '''
import pytest
import torch

pytestmark = pytest.mark.tier("T4")


def test_splitting_the_batch_keeps_each_ratio(student, reference):
    """Ratios do not depend on which other responses share the batch."""
    logp = torch.randn(4, 6, dtype=torch.float64)
    old = logp + 0.1 * torch.randn(4, 6, dtype=torch.float64)
    mask = torch.ones(4, 6, dtype=torch.bool)
    whole = student.sequence_ratio(logp, old, mask)
    halves = torch.cat([student.sequence_ratio(logp[:2], old[:2], mask[:2]),
                        student.sequence_ratio(logp[2:], old[2:], mask[2:])])
    assert torch.allclose(whole, halves), "a response's ratio must only use its own tokens"
'''

TYPO_TEST = """
import pytest


@pytest.mark.tier("T5")
def test_with_a_typo(student):
    pass
"""


def cli(root, *args):
    env = {**os.environ, "GSPO_GRADER_EXERCISE_DIR": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        capture_output=True, text=True, timeout=600, cwd=root, env=env,
    )  # fmt: skip


@pytest.fixture
def exercise(tmp_path):
    root = build_exercise(tmp_path / "exercise", "", {}, copy_tiers=True)
    tiers_toml = root / "tests" / "tiers" / "tiers.toml"
    tiers_toml.write_text(tiers_toml.read_text(encoding="utf-8") + T4_TIER, encoding="utf-8")
    (root / "tests" / "tiers" / "test_t4_batch.py").write_text(T4_TEST, encoding="utf-8")
    return root


def test_a_declared_tier_with_a_test_file_is_listed_and_graded(exercise):
    listing = cli(exercise, "tiers")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    t4 = lines.index("T4 Batch invariance (10 points, visible; 1 test)")
    assert lines[t4 + 1].startswith("    visible  test_t4_batch.py::test_splitting_the_batch")
    graded = cli(exercise, "grade", "reference/gspo.py", "--tiers", "T4", "--json", "-")
    assert graded.returncode == 0, graded.stderr
    report = json.loads(graded.stdout)
    assert [tier["id"] for tier in report["tiers"]] == ["T4"]
    assert report["tiers"][0]["passed"] and report["score"] == 10.0


def test_an_undeclared_tier_in_a_marker_is_a_clear_error(exercise):
    (exercise / "tests" / "tiers" / "test_typo.py").write_text(TYPO_TEST, encoding="utf-8")
    listing = cli(exercise, "tiers")
    assert listing.returncode == 2
    message = listing.stderr
    assert message.startswith("gspo-grader: error: ")
    for words in ("test_typo.py::test_with_a_typo", "unknown tier 'T5'", "T0, T1, T2, T3, T4"):
        assert words in message, message


WARNING_TEST = """
import warnings

import pytest

pytestmark = pytest.mark.tier("T4")


def test_a_tier_test_that_warns(student):
    warnings.warn("a warning of the tier code, not a failure", UserWarning)
    assert student.sequence_ratio is not None
"""

MISTYPED_MARKER_TEST = """
import pytest

pytestmark = pytest.mark.tier("T4")


@pytest.mark.hiden
def test_meant_to_be_hidden(student):
    pass
"""


def test_a_grading_reads_no_pytest_settings_from_the_folders_above_the_exercise(exercise):
    """A project's `filterwarnings = error` above the exercise does not fail its tier tests."""
    (exercise.parent / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n', encoding="utf-8"
    )
    (exercise / "tests" / "tiers" / "test_t4_warns.py").write_text(WARNING_TEST, "utf-8")
    graded = cli(exercise, "grade", "reference/gspo.py", "--tiers", "T4", "--json", "-")
    assert graded.returncode == 0, graded.stderr
    report = json.loads(graded.stdout)
    outcomes = {test["id"]: test["outcome"] for test in report["tiers"][0]["tests"]}
    assert outcomes["test_t4_warns.py::test_a_tier_test_that_warns"] == "passed", outcomes
    assert report["passed"] and report["score"] == 10.0


def test_a_mistyped_marker_is_a_clear_error_not_a_visible_test(exercise):
    (exercise / "tests" / "tiers" / "test_t4_typo.py").write_text(MISTYPED_MARKER_TEST, "utf-8")
    listing = cli(exercise, "tiers")
    assert listing.returncode == 2
    assert "'hiden' not found in `markers`" in listing.stderr, listing.stderr
