"""GET /api/exercise: what the page shows before any grading (statement, starter, tiers)."""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter

from grader.exercise import Exercise, default_exercise
from grader.judge.registry import load_tiers
from grader.service.schemas import ExerciseInfo, TierInfo

router = APIRouter(prefix="/api", tags=["exercise"])


@router.get("/exercise", response_model=ExerciseInfo)
def exercise() -> ExerciseInfo:
    return exercise_info(default_exercise())


@cache
def exercise_info(ex: Exercise) -> ExerciseInfo:
    """Read once: the exercise files do not change while the service runs."""
    return ExerciseInfo(
        title=ex.title,
        statement=_read(ex.statement, "The statement has not been written yet."),
        starter=_read(ex.starter, ""),
        functions=list(ex.function_names),
        tiers=load_tier_infos(ex),
    )


def load_tier_infos(ex: Exercise) -> list[TierInfo]:
    """The tiers as the judge's registry (tests/tiers/tiers.toml) declares them. A broken
    registry raises (the server checks it before it listens; see server.check_exercise)."""
    return [
        TierInfo(
            id=t.id,
            title=t.title,
            description=t.description,
            points=t.points,
            visibility=t.visibility,
        )
        for t in load_tiers(ex.tiers_file)
    ]


def _read(path, fallback: str) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else fallback
