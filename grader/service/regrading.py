"""Regrade with a preview: grade every counted Submit of an exercise in a course again,
against the exercise as it is now, below live work and out of sight (the new gradings are
not current); compare; apply (the new gradings become current, the old are kept, the LMS
is sent only the scores that changed, each affected student gets a note); roll back.

    preview_id = start_preview(store, "default", "gspo")
    preview(store, preview_id)       # {"status": "grading"|"ready", "students", "tests", ...}
    apply_preview(store, preview_id) # then rollback(store, "default", "gspo")

The CLI (`gspo-grader regrade`) and the instructor API (routers/course.py) call these.
A grading node killed mid-way loses nothing: each new grading is a grading row, the job.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import update

from grader.exercise import catalog
from grader.service.deps import new_id
from grader.service.lti.rows import lti_scores
from grader.store import GradingRecord, Regrade, RegradeItem, Store, now
from grader.term import TermError, course_score, credit_for, credited


def start_preview(store: Store, course: str, exercise: str) -> str:
    """Queue a new grading of each counted Submit; the preview's id."""
    if exercise not in catalog():
        known = ", ".join(catalog())
        raise TermError(f"there is no exercise {exercise!r}; expected one of {known}")
    term = store.term(course, exercise)
    items = []
    for graded in store.submits_of(course, exercise):
        sent, grading = graded.submission, graded.grading
        credit = credit_for(term.schedule_for(sent.student), _at(sent.accepted_at))
        if credit.counted and grading.status == "done":
            items.append(RegradeItem(sent.submission_id, grading.grading_id, new_id(), None))
    if not items:
        raise TermError(f"course {course!r} has no graded Submit of {exercise!r} to regrade")
    preview_id = new_id()
    store.add_preview(Regrade(preview_id, course, exercise, "preview", now(), None, tuple(items)))
    return preview_id


def preview(store: Store, preview_id: str) -> dict:
    """Per student the course score now and after applying, per test how many verdicts flip."""
    regrade = _found(store, preview_id)
    old, new, sent = _gradings(store, regrade)
    unfinished = sum(new[i.submission_id].status in ("queued", "grading") for i in regrade.items)
    flips: dict[str, int] = {}
    for item in regrade.items:
        for test in _changes(old[item.submission_id], new[item.submission_id]):
            flips[test] = flips.get(test, 0) + 1
    return {
        "preview_id": preview_id,
        "course": regrade.course,
        "exercise": regrade.exercise,
        "state": regrade.state,
        "status": "grading" if unfinished else "ready",
        "graded": len(regrade.items) - unfinished,
        "total": len(regrade.items),
        "students": _students(store, regrade, old, _kept(old, new), sent),
        "tests": [{"test": t, "flipped": n} for t, n in sorted(flips.items())],
    }


def apply_preview(store: Store, preview_id: str) -> dict:
    """Make the preview's gradings current; the students whose course score changed."""
    regrade = _found(store, preview_id)
    if regrade.state != "preview":
        raise TermError(f"preview {preview_id} was {regrade.state.replace('_', ' ')} already")
    shown = preview(store, preview_id)
    if shown["status"] != "ready":
        raise TermError(
            f"preview {preview_id} is still grading ({shown['graded']} of {shown['total']}"
            " graded); apply it once ready"
        )
    old, new, sent = _gradings(store, regrade)
    for item in regrade.items:
        if store.get(item.submission_id).grading.grading_id != item.old_grading_id:
            raise TermError(
                f"preview {preview_id} is stale: a newer regrade was applied; make a new preview"
            )
    kept = _kept(old, new)
    return _swap(store, regrade, "applied", kept, old, sent, shown["students"])


def rollback(store: Store, course: str, exercise: str) -> dict:
    """Restore the gradings the last applied regrade replaced."""
    preview_id = store.last_applied(course, exercise)
    if preview_id is None:
        raise TermError(f"no applied regrade of {exercise!r} in course {course!r} to roll back")
    regrade = _found(store, preview_id)
    old, new, sent = _gradings(store, regrade)
    now_current = _kept(old, new)
    students = _students(store, regrade, now_current, old, sent)
    return _swap(store, regrade, "rolled_back", old, now_current, sent, students)


def _swap(store, regrade, state, target, before, sent, students) -> dict:
    day = datetime.now(UTC).date().isoformat()
    verb = "regraded" if state == "applied" else "regrade rolled back"
    changed = {s["student"] for s in students if s["old_score"] != s["new_score"]}
    scores = {s["student"]: s for s in students}
    notes = {}
    for item in regrade.items:
        student = sent[item.submission_id][0]
        a, b = before[item.submission_id], target[item.submission_id]
        if a.grading_id == b.grading_id:
            continue
        tests = "; ".join(_changes(a, b, words=True)[:3])
        row = scores[student]
        text = f"{verb} on {day}: {_num(row['old_score'])} -> {_num(row['new_score'])}"
        notes[item.submission_id] = f"{text}; {tests}" if tests else text
    current = {i.submission_id: target[i.submission_id].grading_id for i in regrade.items}
    store.swap(regrade.preview_id, state, current, notes)
    resend = [i.submission_id for i in regrade.items if sent[i.submission_id][0] in changed]
    with store.write() as c:  # the passback outbox posts each changed course score again
        pending = {
            "state": "pending",
            "attempts": 0,
            "next_attempt_at": now(),
            "claimed_until": None,
        }
        c.execute(
            update(lti_scores).where(lti_scores.c.submission_id.in_(resend)).values(**pending)
        )
    return {
        "preview_id": regrade.preview_id,
        "state": state,
        "changed": sorted(changed),
        "students": students,
    }


def _found(store: Store, preview_id: str) -> Regrade:
    regrade = store.regrade(preview_id)
    if regrade is None:
        raise TermError(f"there is no regrade preview {preview_id!r}")
    return regrade


def _gradings(store: Store, regrade: Regrade):
    """Old and new grading of each item, and each submission's (student, accepted_at)."""
    old = {i.submission_id: store.grading(i.old_grading_id) for i in regrade.items}
    new = {i.submission_id: store.grading(i.new_grading_id) for i in regrade.items}
    sent = {
        g.submission.submission_id: (g.submission.student, g.submission.accepted_at)
        for g in store.submits_of(regrade.course, regrade.exercise)
    }
    return old, new, sent


def _kept(old: dict, new: dict) -> dict:
    """The new grading where it is done; the old one where the regrade could not grade."""
    return {k: new[k] if new[k].status == "done" else old[k] for k in old}


def _students(store, regrade, before: dict, after: dict, sent: dict) -> list[dict]:
    term = store.term(regrade.course, regrade.exercise)
    policy = term.schedule.policy if term.schedule else "best"
    rows: dict[str, tuple[list, list]] = {}
    for submission_id in sorted(before, key=lambda k: sent[k][1]):
        student, accepted_at = sent[submission_id]
        percent = credit_for(term.schedule_for(student), _at(accepted_at)).percent
        a, b = before[submission_id], after[submission_id]
        old_list, new_list = rows.setdefault(student, ([], []))
        old_list.append(credited(a.score, a.max_score, percent))
        new_list.append(credited(b.score, b.max_score, percent))
    return [
        {"student": s, "old_score": course_score(o, policy), "new_score": course_score(n, policy)}
        for s, (o, n) in sorted(rows.items())
    ]


def _verdicts(grading: GradingRecord) -> dict[str, bool]:
    report = json.loads(grading.report_json or "{}")
    return {
        t["id"]: t["outcome"] == "passed" for tier in report.get("tiers", []) for t in tier["tests"]
    }


def _changes(before: GradingRecord, after: GradingRecord, words: bool = False) -> list[str]:
    """The tests whose verdict differs (ids, or sentences saying how)."""
    if after.status != "done":
        return []
    a, b = _verdicts(before), _verdicts(after)
    out = []
    for test in sorted(a.keys() | b.keys()):
        if a.get(test) == b.get(test):
            continue
        if not words:
            out.append(test)
        elif test not in a:
            out.append(f"test {test} was added")
        elif test not in b:
            out.append(f"test {test} was removed")
        else:
            out.append(f"test {test} now {'passes' if b[test] else 'fails'}")
    return out


def _num(score: float | None) -> str:
    return "none" if score is None else f"{score:g}"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)
