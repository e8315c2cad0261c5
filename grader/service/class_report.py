"""The instructor's statistics of one exercise (and course), as the API, the CLI and the
page show them: the class's numbers (grader/store/class_stats.py, counted in SQL), each
test's share of failing students, the common mistakes named by the exercise's known wrong
implementations (grader/mistakes.py), stuck students; and each table as CSV.

The object's `tests` (each `test`, `title`, `fail_share`) and `mistakes` (each `labels`,
`titles`, `size`, `students`, `failing_tests`) are the names scripts rely on.
"""

from __future__ import annotations

import csv
import io
import json

from grader.exercise import Exercise
from grader.mistakes import Signatures, known_mistakes, matching
from grader.store import Store
from grader.store.class_stats import class_counts, spans_of

CODE_GROUPS = 20  # the largest groups carry one submission's code
TABLES = ("tests", "mistakes", "students", "stuck")


def class_stats(
    store: Store,
    exercise: Exercise,
    signatures: Signatures,
    course: str | None = None,
    wait: bool = False,
) -> dict:
    """Each student's counted submission is their latest graded Submit, or their best where
    the course's schedule says so; practice Submits (after the schedule's last window) and
    Runs never count. `wait`: grade the known mistakes now if need be (the CLI); else they
    are graded in the background and `labels_ready` is false meanwhile."""
    terms = [store.term(course, exercise.id)] if course is not None else store.terms_of(exercise.id)
    schedule = terms[0].schedule if course is not None else None
    policy = schedule.policy if schedule is not None else "latest"
    counts = class_counts(store.engine, exercise.id, course, policy, spans_of(terms))
    found = signatures.get(exercise, wait=wait) if counts.failing else {}
    names = _test_names(counts.latest_report)
    scores = [(c.score / c.max_score if c.max_score else 0.0) for c in counts.counted]
    distribution = [0] * 10
    for share in scores:
        distribution[min(max(int(share * 10), 0), 9)] += 1
    return {
        "exercise": exercise.id,
        "course": course,
        "policy": policy,
        "students": counts.students,
        "graded_students": len(counts.counted),
        "submissions": counts.submissions,
        "practice_submissions": counts.practice,
        "passed": sum(c.passed for c in counts.counted),
        "distribution": [
            {"from": 10 * i, "to": 10 * i + 10, "students": n} for i, n in enumerate(distribution)
        ],
        "timeline": [{"day": day, "submissions": n} for day, n in counts.timeline],
        "tests": [
            {
                "test": t.test_id,
                "title": names.get(t.test_id, t.test_id),
                "fail_share": t.failing_now / t.counted if t.counted else 0.0,
                "first_fail_share": t.failing_first / t.first if t.first else 0.0,
                "failing": t.failing_now,
            }
            for t in counts.tests
        ],
        "labels_ready": found is not None,
        "mistakes": _mistakes(store, exercise, counts.failing, found or {}),
        "reference": exercise.reference.read_text(encoding="utf-8"),
        "counted": [vars(c) for c in counts.counted],
        "stuck": [vars(s) for s in counts.stuck],
    }


def _test_names(report_json: str | None) -> dict[str, str]:
    tiers = json.loads(report_json).get("tiers") or [] if report_json else []
    return {t["id"]: t.get("name") or t["id"] for tier in tiers for t in tier.get("tests", [])}


def _mistakes(store: Store, exercise: Exercise, failing, found) -> list[dict]:
    groups: dict[frozenset[str], list[tuple[str, str]]] = {}
    for student, (submission_id, tests) in failing.items():
        groups.setdefault(tests, []).append((student, submission_id))
    known = {m.name: m for m in known_mistakes(exercise)}
    out = []
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), sorted(kv[0])))
    for rank, (tests, members) in enumerate(ordered):
        labels = matching(tests, found)
        example = min(members)[1]
        shown = store.get(example) if rank < CODE_GROUPS else None
        out.append({
            "labels": labels,
            "titles": [known[n].title for n in labels if n in known],
            "explanations": [known[n].explanation for n in labels if n in known],
            "size": len(members),
            "students": sorted(student for student, _ in members),
            "failing_tests": sorted(tests),
            "submission_id": example,
            "code": shown.submission.code if shown else None,
        })  # fmt: skip
    return out


def stats_csv(stats: dict, table: str) -> str:
    """One table of the statistics as CSV (lists joined with "; ")."""
    rows = {
        "tests": stats["tests"],
        "mistakes": [{k: v for k, v in m.items() if k != "code"} for m in stats["mistakes"]],
        "students": stats["counted"],
        "stuck": stats["stuck"],
    }[table]
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "; ".join(v) if isinstance(v, list) else v for k, v in row.items()})
    return out.getvalue()


def stats_text(stats: dict) -> str:
    """The statistics as a terminal shows them: the class, the most failed tests, mistakes."""
    lines = [
        f"{stats['exercise']}: {stats['students']} students, {stats['submissions']} submissions,"
        f" {stats['passed']} of {stats['graded_students']} graded students passed"
    ]
    worst = sorted(stats["tests"], key=lambda t: -t["fail_share"])[:10]
    lines += [f"  {t['fail_share']:6.0%} fail {t['test']}" for t in worst if t["failing"]]
    for m in stats["mistakes"]:
        name = ", ".join(m["titles"]) or "unlabelled"
        lines.append(f"  {m['size']:4d} students: {name} ({len(m['failing_tests'])} tests fail)")
    lines += [f"  stuck: {s['student']} ({s['submissions']} submissions)" for s in stats["stuck"]]
    return "\n".join(lines)
