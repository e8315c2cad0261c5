"""The exercises: GET /api/exercises (the catalog), GET /api/exercises/{id} (statement,
starter, functions, tiers, plot names), GET /api/exercise (the root exercise's; the page
reads the first two), and GET /api/exercises/{id}/preview: the reference preview, the toy
as the reference solution runs it (tables and data, and its plots' URLs), which a grading
node draws once per exercise version at its start and stores beside graded plots."""

from __future__ import annotations

import asyncio
from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse, Response

from grader.exercise import Exercise, catalog, default_exercise, exercise_version
from grader.judge import load_tiers
from grader.report import Artifacts
from grader.service.deps import Service
from grader.service.schemas import ExerciseInfo, ExerciseSummary, Preview, TierInfo
from grader.service.views import plot_names
from grader.store import PREVIEW_DATA, preview_key

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
    return exercise_info(_known(exercise_id))


@router.get(
    "/exercises/{exercise_id}/preview",
    response_model=Preview,
    responses={202: {"description": "Still being drawn: poll again after Retry-After."}},
)
async def exercise_preview(exercise_id: str, service: Service):
    """The reference preview of the exercise's current version."""
    ex = _known(exercise_id)
    key = await asyncio.to_thread(_preview_key, ex)  # the version now: edits take effect
    data = await asyncio.to_thread(service.store.plot_png, key, PREVIEW_DATA)
    if data is None:
        retry = {"Retry-After": str(service.settings.retry_after_seconds)}
        drawing = Preview(exercise=ex.id, status="drawing").model_dump()
        return JSONResponse(drawing, status_code=202, headers=retry)
    base = f"/api/exercises/{ex.id}/preview"
    return Preview(
        exercise=ex.id,
        status="ready",
        artifacts=Artifacts.model_validate_json(data),
        plots={name: f"{base}/{name}.png" for name in plot_names(ex)},
    )


@router.get(
    "/exercises/{exercise_id}/preview/{name}.png",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}},
)
async def exercise_preview_plot(exercise_id: str, name: str, service: Service) -> Response:
    ex = _known(exercise_id)
    if name not in plot_names(ex):
        raise HTTPException(
            404, f"There is no plot named {name!r}; try {', '.join(plot_names(ex))}."
        )
    key = await asyncio.to_thread(_preview_key, ex)
    png = await asyncio.to_thread(service.store.plot_png, key, name)
    if png is None:
        retry = {"Retry-After": str(service.settings.retry_after_seconds)}
        raise HTTPException(503, "The reference preview is still being drawn.", retry)
    return Response(png, media_type="image/png", headers={"Cache-Control": "max-age=300"})


def _known(exercise_id: str) -> Exercise:
    found = catalog().get(exercise_id)
    if found is None:
        raise HTTPException(404, f"There is no exercise {exercise_id!r}; see /api/exercises.")
    return found


def _preview_key(ex: Exercise) -> str:
    return preview_key(ex.id, exercise_version(ex))


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
