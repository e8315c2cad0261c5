"""The exercises: GET /api/exercises (the catalog), GET /api/exercises/{id} (statement,
starter, functions, tiers, plot names), and GET /api/exercise (the root exercise's; the page
reads the first two)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, HTTPException

from grader.exercise import Exercise, catalog, default_exercise, exercise_version
from grader.judge import load_tiers
from grader.service.schemas import ExerciseInfo, ExerciseSummary, TierInfo
from grader.service.views import plot_names

router = APIRouter(prefix="/api", tags=["exercise"])


@router.get("/exercises", response_model=list[ExerciseSummary])
def exercises() -> list[ExerciseSummary]:
    """Every exercise this service grades, the root one first."""
    return [
        ExerciseSummary(id=ex.id, title=ex.title, paper=ex.paper, section=ex.section)
        for ex in catalog().values()
    ]


@router.get("/exercises/{exercise_id}", response_model=ExerciseInfo)
def one_exercise(exercise_id: str) -> ExerciseInfo:
    found = catalog().get(exercise_id)
    if found is None:
        raise HTTPException(404, f"There is no exercise {exercise_id!r}; see /api/exercises.")
    return exercise_info(found)


@router.get("/exercise", response_model=ExerciseInfo)
def exercise() -> ExerciseInfo:
    """The root exercise's (the page's first exercise)."""
    return exercise_info(default_exercise())


def exercise_info(ex: Exercise) -> ExerciseInfo:
    """Read again only when the folder changed: its exercise version (manifest, reference,
    tiers, toy) or the statement's or starter's modification time, so an instructor's edit
    shows on the page as it does in the next grading."""
    return _exercise_info(ex, exercise_version(ex), _stamp(ex.statement), _stamp(ex.starter))


def _stamp(path: Path) -> int:
    return path.stat().st_mtime_ns if path.is_file() else 0


@lru_cache(maxsize=64)
def _exercise_info(ex: Exercise, version: str, *stamps: int) -> ExerciseInfo:
    return ExerciseInfo(
        id=ex.id,
        title=ex.title,
        paper=ex.paper,
        section=ex.section,
        statement=_read(ex.statement, "The statement has not been written yet."),
        starter=_read(ex.starter, ""),
        functions=list(ex.function_names),
        tiers=load_tier_infos(ex),
        plots=list(plot_names(ex)),
    )


def load_tier_infos(ex: Exercise) -> list[TierInfo]:
    """The tiers as the judge's registry (tests/tiers/tiers.toml) declares them. A broken
    registry raises (the server checks it before it listens; see grader.node.check_exercises)."""
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
