"""Where the exercise's files live, and what a submission must define.

The exercise files (starter, reference, statement, toy, tier suites) sit at the top of the
repository and are loaded by path, never installed as packages. GSPO_GRADER_EXERCISE_DIR
points elsewhere (a copy with an extra tier, or an installed image).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Exercise:
    """One exercise: its files, and the functions a submission must define."""

    root: Path
    title: str = "GSPO: sequence importance ratio and clipped sequence loss"
    functions: tuple[str, ...] = ("sequence_ratio", "gspo_loss")

    @property
    def starter(self) -> Path:
        return self.root / "starter" / "gspo.py"

    @property
    def reference(self) -> Path:
        return self.root / "reference" / "gspo.py"

    @property
    def statement(self) -> Path:
        return self.root / "statement.md"

    @property
    def experiment(self) -> Path:
        return self.root / "experiment.py"

    @property
    def tiers_dir(self) -> Path:
        return self.root / "tests" / "tiers"

    @property
    def tiers_file(self) -> Path:
        return self.tiers_dir / "tiers.toml"


@cache
def default_exercise() -> Exercise:
    """The exercise the grader serves: the repository's, unless the environment says else."""
    root = os.environ.get("GSPO_GRADER_EXERCISE_DIR")
    return Exercise(root=Path(root).resolve() if root else REPO_ROOT)
