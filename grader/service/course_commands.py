"""`gspo-grader course schedule|extend|quota` and `gspo-grader regrade`: a course's term from
the command line, on the database the settings name (`--data-dir`, or
GSPO_GRADER_DATABASE_URL like `lti add-platform`); a running service sees them at once.

    gspo-grader course schedule EXERCISE [--course ID] [--opens T] --due T [--late T=PCT]...
                [--after practice|closed] [--policy best|latest]
    gspo-grader course extend EXERCISE STUDENT [--course ID] --due T
    gspo-grader course quota EXERCISE [--course ID] --submits N --per DURATION
    gspo-grader regrade EXERCISE [--course ID] (--preview [--json] | --apply ID | --rollback)
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from grader.term import (
    DEFAULT_COURSE,
    LateWindow,
    Quota,
    Schedule,
    TermError,
    at,
    check_schedule,
    seconds_of,
)

POLL_S = 2.0


def _store(data_dir: str | None):
    from grader.settings import load_settings
    from grader.store import open_store

    settings = load_settings(**({"data_dir": data_dir} if data_dir else {}))
    return open_store(settings.resolved_database_url, migrate=not settings.distributed)


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("exercise", metavar="EXERCISE")
    common.add_argument("--course", default=DEFAULT_COURSE, help="default: default (no LMS)")
    common.add_argument("--data-dir", default=None)
    return common


def _late(text: str) -> LateWindow:
    until, _, percent = text.rpartition("=")
    try:
        return LateWindow(at(until), float(percent))
    except ValueError:
        raise TermError(
            f"--late: expected TIME=PERCENT like 2026-12-06T23:59+00:00=50, got {text!r}"
        ) from None


def course_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gspo-grader course")
    actions = parser.add_subparsers(dest="action", required=True)
    schedule = actions.add_parser("schedule", parents=[_common()], help="deadlines and credit")
    schedule.add_argument("--opens", default=None, metavar="T")
    schedule.add_argument("--due", required=True, metavar="T")
    schedule.add_argument("--late", action="append", default=[], metavar="T=PCT")
    schedule.add_argument("--after", choices=("practice", "closed"), default="practice")
    schedule.add_argument("--policy", choices=("best", "latest"), default="best")
    extend = actions.add_parser("extend", parents=[_common()], help="a student's new due date")
    extend.add_argument("student", metavar="STUDENT")
    extend.add_argument("--due", required=True, metavar="T")
    quota = actions.add_parser("quota", parents=[_common()], help="Submits per rolling window")
    quota.add_argument("--submits", type=int, required=True, metavar="N")
    quota.add_argument("--per", required=True, metavar="DURATION", help="like 30m, 1h, 1d")
    args = parser.parse_args(argv)
    try:
        _known(args.exercise)
        store = _store(args.data_dir)
        if args.action == "schedule":
            opens = at(args.opens) if args.opens else None
            late = tuple(_late(t) for t in args.late)
            plan = Schedule(at(args.due), opens, late, args.after, args.policy)
            store.set_term(args.course, args.exercise, {"schedule": check_schedule(plan)})
        elif args.action == "extend":
            store.set_extension(args.course, args.exercise, args.student, at(args.due))
        else:
            if args.submits < 1:
                raise TermError(f"--submits: expected at least 1, got {args.submits}")
            store.set_term(
                args.course, args.exercise, {"quota": Quota(args.submits, seconds_of(args.per))}
            )
    except TermError as error:
        return _fail(str(error))
    print(f"gspo-grader: {args.action} of {args.exercise} in course {args.course} saved")
    return 0


def regrade_command(argv: list[str]) -> int:
    from grader.service import regrading

    parser = argparse.ArgumentParser(prog="gspo-grader regrade", parents=[_common()])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--preview", action="store_true", help="grade again, change nothing")
    what.add_argument("--apply", metavar="PREVIEW_ID", help="make a preview's gradings current")
    what.add_argument("--rollback", action="store_true", help="restore the previous gradings")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        _known(args.exercise)
        store = _store(args.data_dir)
        if args.preview:
            preview_id = regrading.start_preview(store, args.course, args.exercise)
            result = _wait(store, preview_id)
        elif args.apply:
            result = regrading.apply_preview(store, args.apply)
        else:
            result = regrading.rollback(store, args.course, args.exercise)
    except TermError as error:
        return _fail(str(error))
    print(json.dumps(result, indent=2) if args.json else _text(result))
    return 0


def _wait(store, preview_id: str) -> dict:
    from grader.service.regrading import preview

    while True:
        shown = preview(store, preview_id)
        print(f"\rregrading: {shown['graded']} of {shown['total']} graded", end="", file=sys.stderr)
        if shown["status"] == "ready":
            print(file=sys.stderr)
            return shown
        time.sleep(POLL_S)


def _text(result: dict) -> str:
    lines = [f"regrade {result['preview_id']}: {result.get('state', '')}"]
    for s in result["students"]:
        lines.append(f"  {s['student']}: {s['old_score']} -> {s['new_score']}")
    for t in result.get("tests", []):
        lines.append(f"  test {t['test']}: {t['flipped']} verdicts flipped")
    if result.get("state") == "preview":
        course = "" if result["course"] == DEFAULT_COURSE else f" --course {result['course']}"
        command = f"gspo-grader regrade {result['exercise']}{course} --apply {result['preview_id']}"
        lines.append(f"apply with: {command}")
    return "\n".join(lines)


def _known(exercise: str) -> None:
    from grader.exercise import catalog

    if exercise not in catalog():
        raise TermError(
            f"there is no exercise {exercise!r}; expected one of {', '.join(catalog())}"
        )


def _fail(message: str) -> int:
    print(f"gspo-grader: error: {message}; nothing changed", file=sys.stderr)
    return 2
