"""`gspo-grader`: grade submissions, list and check exercises, check the sandbox, serve.

    gspo-grader grade PATH [PATH...] [--exercise ID|DIR] [--mode run|submit] [--tiers T0,T2]
                [--recursive] [--json FILE|-] [--gradescope FILE] [--junit FILE]
                [--artifacts DIR] [--csv FILE] [--jobs N] [--verbose]
    gspo-grader check-exercise DIR [--corpus] [--verbose]
    gspo-grader exercises | tiers | statement   [--exercise ID|DIR]
    gspo-grader doctor
    gspo-grader serve [--host 127.0.0.1] [--port 8000] [--data-dir DIR]
    gspo-grader worker [--concurrency N] [--metrics-port PORT]   (GSPO_GRADER_DATABASE_URL)
    gspo-grader db upgrade [--data-dir DIR]
    gspo-grader stats EXERCISE [--course ID] [--json] [--data-dir DIR]
    gspo-grader lti add-platform | platforms | rotate-key   (LTI 1.3; see docs/lti.md)
    gspo-grader course schedule | extend | quota ...         (a term; see docs/instructors.md)
    gspo-grader regrade EXERCISE [--course ID] --preview [--json] | --apply ID | --rollback

Exit status: 0 every graded submission passed (or every check held); 1 one failed (a syntax
error and a timeout count as failures); 2 the command itself was wrong (a missing path, an
unknown tier or exercise, a broken manifest, a sandbox weaker than GSPO_GRADER_SANDBOX_REQUIRE).
Results go to stdout; grade and check-exercise log only warnings and errors to stderr (the
judges' too), unless --verbose.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from pathlib import Path

from grader.exercise import Exercise, ExerciseError, catalog, find_exercise
from grader.judge import TierRegistryError, load_tiers, parse_tier_list
from grader.sandbox import IsolationError, check_host

PROG = "gspo-grader"
LOG_LEVEL = "GSPO_GRADER_LOG_LEVEL"  # the judges' log level (grader/judge_process.py)


class UsageProblem(Exception):
    """A mistake in the command line: exit status 2 with one line on stderr."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Grader for paper-to-code exercises.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    exercise = argparse.ArgumentParser(add_help=False)
    exercise.add_argument("--exercise", default=None, help="an exercise id or folder")
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("--verbose", "-v", action="store_true", help="log at INFO to stderr")
    grade = commands.add_parser("grade", parents=[exercise, verbose], help="grade files")
    grade.add_argument("paths", nargs="+", metavar="PATH", help="a .py file or a folder")
    grade.add_argument("--recursive", "-r", action="store_true", help="and their subfolders")
    grade.add_argument("--mode", choices=("run", "submit"), default="submit")
    grade.add_argument("--tiers", default=None, help="only these tiers, e.g. T0,T2")
    grade.add_argument("--json", dest="json_out", metavar="FILE|-", help="Report JSON")
    grade.add_argument("--gradescope", metavar="FILE", help="Gradescope results.json")
    grade.add_argument("--junit", metavar="FILE", help="JUnit XML")
    grade.add_argument("--artifacts", metavar="DIR", help="the toy's toy.json and plots")
    grade.add_argument("--csv", metavar="FILE", help="gradebook, one row per submission")
    grade.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel gradings")
    commands.add_parser("exercises", help="list the exercises this installation serves")
    check = commands.add_parser("check-exercise", parents=[verbose], help="check an exercise")
    check.add_argument("folder", metavar="DIR", help="the exercise's folder")
    check.add_argument("--corpus", action="store_true", help="grade its corpus too")
    commands.add_parser("tiers", parents=[exercise], help="list the tiers and their tests")
    commands.add_parser("statement", parents=[exercise], help="print the exercise statement")
    commands.add_parser("doctor", help="show the sandbox's isolation and the versions")
    serve = commands.add_parser("serve", help="start the web service")
    # None: the setting decides (GSPO_GRADER_HOST, _PORT, _DATA_DIR; else its default)
    serve.add_argument("--host", default=None, help="default: GSPO_GRADER_HOST or 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: GSPO_GRADER_PORT or 8000")
    serve.add_argument("--data-dir", default=None, help="default: GSPO_GRADER_DATA_DIR or ./data")
    worker = commands.add_parser("worker", help="grade jobs of the distributed queue")
    worker.add_argument("--concurrency", type=int, default=None, help="warm judges")
    worker.add_argument("--metrics-port", type=int, default=None, help="0: no /metrics")
    db = commands.add_parser("db", help="the service's database")
    db.add_argument("action", choices=("upgrade",), help="create or migrate the schema")
    db.add_argument("--data-dir", default=None)
    stats = commands.add_parser("stats", help="the class's statistics on an exercise")
    stats.add_argument("exercise", metavar="EXERCISE", help="the exercise's id")
    stats.add_argument("--course", default=None, help="only this course's students")
    stats.add_argument("--json", action="store_true", help="the API's JSON object")
    stats.add_argument("--data-dir", default=None)
    lti = commands.add_parser("lti", help="LTI 1.3: register LMSs, rotate this tool's key")
    lti.add_argument("lti_args", nargs=argparse.REMAINDER, metavar="ACTION ...")
    for name, what in (("course", "a course's term"), ("regrade", "grade Submits again")):
        more = commands.add_parser(name, help=what, add_help=False)
        more.add_argument("more_args", nargs=argparse.REMAINDER, metavar="...")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {
        "grade": cmd_grade,
        "exercises": cmd_exercises,
        "check-exercise": cmd_check_exercise,
        "tiers": cmd_tiers,
        "statement": cmd_statement,
        "doctor": cmd_doctor,
        "serve": cmd_serve,
        "worker": cmd_worker,
        "db": cmd_db,
        "stats": cmd_stats,
        "lti": cmd_lti,
        "course": cmd_course,
        "regrade": cmd_course,
    }
    try:
        with _logging(getattr(args, "verbose", None)):
            return handlers[args.command](args)
    except (UsageProblem, TierRegistryError, ExerciseError, IsolationError) as error:
        print(f"{PROG}: error: {_one_line(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


@contextlib.contextmanager
def _logging(verbose: bool | None):
    """For a command with --verbose: this process's log and its judges' (through
    GSPO_GRADER_LOG_LEVEL) go to stderr at INFO, or at WARNING without it; put back after."""
    level, saved = "info" if verbose else "warning", os.environ.get(LOG_LEVEL)
    handler, root = logging.StreamHandler(sys.stderr), logging.getLogger()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    before = root.level
    if verbose is not None:
        root.addHandler(handler)
        root.setLevel(level.upper())
        os.environ[LOG_LEVEL] = level
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(before)
        os.environ.pop(LOG_LEVEL, None)
        os.environ.update({LOG_LEVEL: saved} if saved is not None else {})


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "; ".join(lines[:3]) if lines else "unknown problem"


# ---- grade ------------------------------------------------------------------------------
def submission_paths(names: list[str], recursive: bool = False) -> list[Path]:
    """Files as given; folders as their *.py files, sorted (and their subfolders' too)."""
    paths: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.glob("**/*.py" if recursive else "*.py") if p.is_file())
            if not found:
                raise UsageProblem(f"{name}: folder holds no .py submission")
            paths += found
        elif path.is_file():
            paths.append(path)
        else:
            raise UsageProblem(f"{name}: no such file or folder")
    return paths


def cmd_grade(args: argparse.Namespace) -> int:
    from grader.judge import ProgressBar, grade_files

    exercise = find_exercise(args.exercise)
    paths = submission_paths(args.paths, args.recursive)
    tiers = parse_tier_list(args.tiers, load_tiers(exercise.tiers_file))
    if len(paths) > 1 and (args.gradescope or args.junit):
        raise UsageProblem("--gradescope and --junit take a single submission")
    if args.jobs < 1:
        raise UsageProblem(f"--jobs must be at least 1; got {args.jobs}")
    check_host()  # GSPO_GRADER_SANDBOX_REQUIRE: refuse before grading
    reports = grade_files(
        paths,
        mode=args.mode,
        exercise=args.exercise,
        tiers=tiers,
        jobs=args.jobs,
        progress=ProgressBar(),
    )
    _write_outputs(args, exercise, reports)
    return 0 if all(report.passed for report in reports) else 1


def _write_outputs(args: argparse.Namespace, exercise: Exercise, reports: list) -> None:
    from grader.report import write_gradebook, write_gradescope, write_junit

    if args.json_out:
        data = [r.model_dump(mode="json") for r in reports]
        text = json.dumps(data[0] if len(data) == 1 else data, indent=2) + "\n"
        _write(args.json_out, text)
    if args.gradescope:
        write_gradescope(reports[0], args.gradescope)
    if args.junit:
        write_junit(reports[0], args.junit)
    if args.csv:
        write_gradebook(reports, args.csv)
    if args.artifacts:
        for report in reports:
            _write_artifacts(report, exercise, Path(args.artifacts), several=len(reports) > 1)
    if args.json_out != "-":
        _print_human(reports)


def _write(target: str, text: str) -> None:
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).write_text(text, encoding="utf-8")


def _print_human(reports: list) -> None:
    from grader.report import render_text, score_text, use_colour

    colour = use_colour(sys.stdout)
    if len(reports) == 1:
        sys.stdout.write(render_text(reports[0], colour))
        return
    for report in reports:
        mark = "ok  " if report.passed else "FAIL"
        error = report.submission_error.kind if report.submission_error else ""
        error = error or ("grader_error" if report.grader_error else "")
        score = f"{score_text(report.score)}/{score_text(report.max_score)}"
        print(f"{mark} {score:>10} {report.submission} {error}")
    passed = sum(report.passed for report in reports)
    print(f"{passed}/{len(reports)} submissions passed")


def _write_artifacts(report, exercise: Exercise, root: Path, several: bool) -> None:
    """toy.json and the exercise's plots of one submission (a sub-folder each when several)."""
    from grader.exercise import load_module

    out = root / Path(report.submission or "submission").stem if several else root
    out.mkdir(parents=True, exist_ok=True)
    if report.artifacts is None:
        (out / "toy.json").write_text("null\n", encoding="utf-8")
        return
    data = report.artifacts.data
    (out / "toy.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    try:
        load_module(exercise.experiment, f"{exercise.id}_experiment").render_plots(data, out)
    except Exception as error:  # a student's NaNs must not stop the other outputs
        print(f"{PROG}: warning: plots not drawn for {report.submission}: {error}", file=sys.stderr)


# ---- exercises --------------------------------------------------------------------------
def cmd_exercises(args: argparse.Namespace) -> int:
    for exercise in catalog().values():
        print(f"{exercise.id:<12}{exercise.title}")
        print(f"{'':<12}{exercise.paper}; {exercise.section}")
        print(f"{'':<12}{exercise.root}")
    return 0


def cmd_check_exercise(args: argparse.Namespace) -> int:
    from grader.judge import check_exercise

    folder = Path(args.folder)
    if not folder.is_dir():
        raise UsageProblem(f"{args.folder}: no such folder")
    failed = 0
    for check in check_exercise(folder, corpus=args.corpus):
        failed += not check.ok
        print(f"[{'ok' if check.ok else 'FAIL'}] {check.name}: {check.detail}")
    print(f"{PROG}: {'every check holds' if not failed else f'{failed} check(s) failed'}")
    return 0 if not failed else 1


def cmd_tiers(args: argparse.Namespace) -> int:
    from grader.judge.engine import inventory

    exercise = find_exercise(args.exercise)
    tiers = load_tiers(exercise.tiers_file)
    tests = inventory(exercise)
    for tier in tiers:
        mine = [test for test in tests if test.tier.id == tier.id]
        hidden = sum(test.hidden for test in mine)
        count = f"{len(mine)} test{'s' * (len(mine) != 1)}" + f", {hidden} hidden" * bool(hidden)
        print(f"{tier.id} {tier.title} ({tier.points:g} points, {tier.visibility}; {count})")
        if not mine:
            print("    warning: no tests")
        for test in mine:
            print(f"    {'hidden ' if test.hidden else 'visible'}  {test.id}  {test.name}")
    print(f"Total: {sum(t.points for t in tiers):g} points, {len(tests)} tests")
    return 0


def cmd_statement(args: argparse.Namespace) -> int:
    path = find_exercise(args.exercise).statement
    if not path.is_file():
        raise UsageProblem(f"{path}: no statement found")
    sys.stdout.write(path.read_text(encoding="utf-8"))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    import platform

    import pytest
    import torch

    from grader import __version__
    from grader.sandbox import doctor_report

    print(doctor_report())
    print("Versions:")
    print(f"  gspo-grader {__version__}")
    print(f"  python {platform.python_version()} ({sys.executable})")
    print(f"  torch {torch.__version__}")
    print(f"  pytest {pytest.__version__}")
    print("Exercises:")
    for exercise in catalog().values():
        print(f"  {exercise.id}: {exercise.root}")
    from grader.service.file_modes import wider_than_private
    from grader.settings import load_settings

    with _service_problems():
        data_dir = load_settings().data_dir
    open_to_others = wider_than_private(data_dir)
    print(f"Data folder: {data_dir}" + ("" if open_to_others else " (private to this user)"))
    for line in open_to_others:
        print(f"  WARNING: {line}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from grader.service import serve

    with _service_problems():
        serve(host=args.host, port=args.port, data_dir=args.data_dir)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from grader.node import start_node

    with _service_problems():
        start_node(concurrency=args.concurrency, metrics_port=args.metrics_port)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """The instructor page's numbers; the known mistakes are graded first if need be."""
    from grader.mistakes import Signatures
    from grader.service.class_report import class_stats, stats_text
    from grader.settings import load_settings
    from grader.store import open_store

    exercise = find_exercise(args.exercise)
    with _service_problems():
        settings = load_settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
        store = open_store(settings.resolved_database_url)
        signatures = Signatures(settings.data_dir / "mistakes")
        try:
            found = class_stats(store, exercise, signatures, args.course, wait=True)
        finally:
            store.close()
    print(json.dumps(found, indent=2) if args.json else stats_text(found))
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from grader.settings import load_settings
    from grader.store import upgrade_url

    with _service_problems():
        settings = load_settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
        print(f"{PROG}: {upgrade_url(settings.resolved_database_url)}")
    return 0


def cmd_lti(args: argparse.Namespace) -> int:
    from grader.service.lti.commands import run_lti_command

    return run_lti_command(args.lti_args)


def cmd_course(args: argparse.Namespace) -> int:
    from grader.service.course_commands import course_command, regrade_command

    with _service_problems():
        command = course_command if args.command == "course" else regrade_command
        return command(args.more_args)


@contextlib.contextmanager
def _service_problems():
    """A bad setting or an unusable database: one line, exit status 2."""
    from grader.settings import SettingsError
    from grader.store import DatabaseError

    try:
        yield
    except (SettingsError, DatabaseError) as error:
        raise UsageProblem(str(error)) from None
