"""Exercises are folders; this module reads them. The grader knows no paper.

An exercise folder is shaped like this repository's root:

    exercise.toml      the manifest: id, title, paper and section, the functions students
                       write (with their signatures), the starter and reference files, and
                       the artifacts (plots, tables) its toy produces
    statement.md       what the student reads (Markdown with $math$)
    starter/ID.py      what the student edits
    reference/ID.py    the reference solution (trusted; loaded by path, never installed)
    tests/tiers/       the tier suites and tiers.toml
    experiment.py      the toy: run_toy(impl) -> dict and render_plots(result, out_dir)

The repository root is one exercise; more live in `exercises/<id>/` beside it. The catalog
is the root exercise (GSPO_GRADER_EXERCISE_DIR points elsewhere) plus every folder of its
`exercises/` that holds an exercise.toml.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "exercise.toml"
ROOT_ENV = "GSPO_GRADER_EXERCISE_DIR"
ID_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ExerciseError(ValueError):
    """An exercise folder or its manifest is missing or invalid; the message names the file
    and the field, because an instructor reads it."""


@dataclass(frozen=True)
class Function:
    """One function a submission must define."""

    name: str
    signature: str  # as the statement writes it: "(logp, old_logp, mask) -> Tensor [B]"
    summary: str = ""


@dataclass(frozen=True)
class Artifact:
    """A plot or a table the toy produces: its name, title, and the words that stand for it
    (a plot's alt text, a table's caption)."""

    name: str
    title: str
    text: str = ""


@dataclass(frozen=True)
class Exercise:
    """One exercise folder, as its manifest describes it."""

    root: Path
    id: str
    title: str
    paper: str
    section: str
    url: str
    starter: Path
    reference: Path
    functions: tuple[Function, ...]
    plots: tuple[Artifact, ...] = ()
    tables: tuple[Artifact, ...] = ()
    corpus_counts: tuple[int, int] | None = None  # [corpus]: (correct, wrong) files it holds
    mistake_hints: bool = False  # [hints] mistakes: name a matching known mistake to students

    @property
    def function_names(self) -> tuple[str, ...]:
        return tuple(function.name for function in self.functions)

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

    @property
    def corpus(self) -> Path:
        """Complete submissions that the power test and check-exercise grade: correct/ and
        wrong/, each file stating its point in its docstring."""
        return self.root / "tests" / "implementations"


VERSION_HEX_CHARS = 16  # 64 bits of a SHA-256: enough to tell one folder's edits apart


def exercise_version(exercise: Exercise) -> str:
    """The exercise's version: a content hash of what decides a grading, read from disk now.

    It covers the manifest, the reference folder, the tiers folder (tests, helpers and
    tiers.toml) and the toy's experiment.py, by relative path and bytes; caches
    (`__pycache__`, `.pyc`) are left out. A grading records the version it ran against, so
    an edit of any of these makes a new version, and nothing else does."""
    files = [exercise.root / MANIFEST, exercise.experiment]
    for folder in (exercise.reference.parent, exercise.tiers_dir):
        files += sorted(p for p in folder.rglob("*") if p.is_file() and _versioned(p))
    return files_digest(exercise.root, files)[:VERSION_HEX_CHARS]


def files_digest(root: Path, files: Iterable[Path], salt: str = "") -> str:
    """A SHA-256 (hex) of `salt`, then of each of `files` that exists, in the order given,
    by its path relative to `root` and its bytes."""
    digest = hashlib.sha256(salt.encode())
    for path in files:
        if path.is_file():
            name = path.relative_to(root).as_posix()
            data = path.read_bytes()
            digest.update(f"{name}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


def _versioned(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix != ".pyc"


_TOP = {"id", "title", "paper", "section", "url", "starter", "reference", "functions"}
_TOP |= {"artifacts", "corpus", "hints"}
_REQUIRED = ("id", "title", "paper", "section", "starter", "reference", "functions")


def load_exercise(folder: Path | str) -> Exercise:
    """Read and check `folder/exercise.toml`; ExerciseError says what is wrong and where."""
    root = Path(folder).resolve()
    path = root / MANIFEST
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExerciseError(f"{path}: no such file; an exercise folder needs one") from None
    except tomllib.TOMLDecodeError as error:
        raise ExerciseError(f"{path}: not valid TOML: {error}") from None
    _fields(path, "the manifest", data, _TOP, _REQUIRED)
    exercise_id = _text(path, "id", data["id"])
    if not ID_PATTERN.match(exercise_id):
        raise ExerciseError(
            f"{path}: id {exercise_id!r} must be lower case letters, digits, - or _"
        )
    artifacts = data.get("artifacts", {})
    _fields(path, "[artifacts]", artifacts, {"plots", "tables"}, ())
    hints = data.get("hints", {})
    _fields(path, "[hints]", hints, {"mistakes"}, ())
    if not isinstance(hints.get("mistakes", False), bool):
        raise ExerciseError(f"{path}: [hints] mistakes must be true or false")
    return Exercise(
        root=root,
        id=exercise_id,
        title=_text(path, "title", data["title"]),
        paper=_text(path, "paper", data["paper"]),
        section=_text(path, "section", data["section"]),
        url=_text(path, "url", data.get("url", ""), empty=True),
        starter=_file(root, path, "starter", data["starter"]),
        reference=_file(root, path, "reference", data["reference"]),
        functions=_functions(path, data["functions"]),
        plots=_artifacts(path, "plots", artifacts.get("plots", []), "alt"),
        tables=_artifacts(path, "tables", artifacts.get("tables", []), "caption"),
        corpus_counts=_corpus(path, data.get("corpus")),
        mistake_hints=hints.get("mistakes", False),
    )


def _corpus(path: Path, table: object) -> tuple[int, int] | None:
    """[corpus] correct = N, wrong = M: how many files check-exercise --corpus expects."""
    if table is None:
        return None
    _fields(path, "[corpus]", table, {"correct", "wrong"}, ("correct", "wrong"))
    counts = (table["correct"], table["wrong"])
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise ExerciseError(f"{path}: [corpus] correct and wrong must be counts >= 0; got {table}")
    return counts


def _fields(path: Path, where: str, table: object, known: set, required: tuple) -> None:
    if not isinstance(table, dict):
        raise ExerciseError(f"{path}: {where} must be a table")
    missing = [name for name in required if name not in table]
    if missing:
        raise ExerciseError(f"{path}: {where} is missing field(s): {', '.join(missing)}")
    unknown = sorted(set(table) - known)
    if unknown:
        raise ExerciseError(f"{path}: {where} has unknown field(s): {', '.join(unknown)}")


def _text(path: Path, name: str, value: object, empty: bool = False) -> str:
    if not isinstance(value, str) or not (value.strip() or empty):
        raise ExerciseError(f"{path}: {name} must be a non-empty string; got {value!r}")
    return value.strip()


def _file(root: Path, path: Path, name: str, value: object) -> Path:
    relative = _text(path, name, value)
    file = (root / relative).resolve()
    if not file.is_relative_to(root) or not file.is_file():
        raise ExerciseError(f"{path}: {name} = {relative!r} is not a file inside {root}")
    return file


def _functions(path: Path, tables: object) -> tuple[Function, ...]:
    if not isinstance(tables, list) or not tables:
        raise ExerciseError(f"{path}: declares no function; add [[functions]] tables")
    functions = []
    for index, table in enumerate(tables):
        where = f"[[functions]] #{index + 1}"
        _fields(path, where, table, {"name", "signature", "summary"}, ("name", "signature"))
        name = _text(path, f"{where} name", table["name"])
        if not IDENTIFIER.match(name) or name.startswith("_"):
            raise ExerciseError(f"{path}: {where} name {name!r} is not a public Python name")
        signature = _text(path, f"{where} signature", table["signature"])
        summary = _text(path, f"{where} summary", table.get("summary", ""), empty=True)
        functions.append(Function(name, signature, summary))
    _unique(path, "function", [f.name for f in functions])
    return tuple(functions)


def _artifacts(path: Path, kind: str, tables: object, text_field: str) -> tuple[Artifact, ...]:
    if not isinstance(tables, list):
        raise ExerciseError(f"{path}: artifacts.{kind} must be a list of tables")
    found = []
    for index, table in enumerate(tables):
        where = f"[[artifacts.{kind}]] #{index + 1}"
        _fields(path, where, table, {"name", "title", text_field}, ("name", "title", text_field))
        name = _text(path, f"{where} name", table["name"])
        if not IDENTIFIER.match(name):
            raise ExerciseError(f"{path}: {where} name {name!r}: use letters, digits and _")
        title = _text(path, f"{where} title", table["title"])
        found.append(Artifact(name, title, _text(path, f"{where} {text_field}", table[text_field])))
    _unique(path, kind[:-1], [a.name for a in found])
    return tuple(found)


def _unique(path: Path, what: str, names: list[str]) -> None:
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ExerciseError(f"{path}: {what} {twice[0]!r} is declared twice")


# ---- the catalog ----------------------------------------------------------------------------
def root_folder() -> Path:
    """The root exercise's folder: this repository, unless GSPO_GRADER_EXERCISE_DIR says else."""
    configured = os.environ.get(ROOT_ENV)
    return Path(configured).resolve() if configured else REPO_ROOT


@cache
def _catalog(root: Path) -> dict[str, Exercise]:
    exercises = [load_exercise(root)]
    folder = root / "exercises"
    if folder.is_dir():
        exercises += [load_exercise(p.parent) for p in sorted(folder.glob(f"*/{MANIFEST}"))]
    catalog: dict[str, Exercise] = {}
    for exercise in exercises:
        if exercise.id in catalog:
            raise ExerciseError(
                f"exercise id {exercise.id!r} is used by both {catalog[exercise.id].root} "
                f"and {exercise.root}"
            )
        catalog[exercise.id] = exercise
    return catalog


def catalog() -> dict[str, Exercise]:
    """Every exercise this installation serves, the root one first, by id."""
    return _catalog(root_folder())


def default_exercise() -> Exercise:
    """The root exercise: what a grading is for when nobody names one."""
    return next(iter(catalog().values()))


def find_exercise(id_or_path: str | Path | None) -> Exercise:
    """An exercise by catalog id, or any exercise folder by path; None is the root one."""
    if id_or_path is None:
        return default_exercise()
    known = catalog()
    if str(id_or_path) in known:
        return known[str(id_or_path)]
    folder = Path(id_or_path)
    if (folder / MANIFEST).is_file():
        return load_exercise(folder)
    raise ExerciseError(
        f"no exercise {str(id_or_path)!r}: give a folder with an {MANIFEST} or one of "
        f"{', '.join(known)}"
    )


def refresh_catalog() -> None:
    """Forget the catalog (tests that point GSPO_GRADER_EXERCISE_DIR elsewhere)."""
    _catalog.cache_clear()


def load_module(path: Path, name: str) -> ModuleType:
    """Import a trusted exercise file (reference, experiment) by path, as a fresh module.

    The one loader by path in the grader: exercise files are never installed as packages.
    Callers keep the module as long as they need it."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ExerciseError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
