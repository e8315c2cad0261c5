"""The credit each stored Submit earned, as the API shows it: the raw score, the credit
applied (percent of the maximum score, by the moment the Submit was accepted), the credited
score and whether it counts (practice never does), with the note a regrade left."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from grader.store import Store, SubmissionSummary, Term
from grader.term import credit_for, credited


class Terms:
    """Terms read once per request (the service sees changes without a restart)."""

    def __init__(self, store: Store):
        self.store = store
        self.found: dict[tuple[str, str], Term] = {}

    def credit(self, course: str, exercise: str, student: str | None, accepted_at: str) -> dict:
        """The credit a submission accepted at `accepted_at` earned, and whether it counts."""
        if (course, exercise) not in self.found:
            self.found[course, exercise] = self.store.term(course, exercise)
        schedule = self.found[course, exercise].schedule_for(student)
        credit = credit_for(schedule, datetime.fromisoformat(accepted_at))
        return {"credit": credit.percent, "counted": credit.counted}

    def fields(self, s: SubmissionSummary, notes: dict[str, str]) -> dict:
        found = self.credit(s.course, s.exercise, s.student, s.created_at)
        score = credited(s.score, s.max_score, found["credit"])
        return found | {"credited_score": score, "note": notes.get(s.submission_id)}


def credited_rows(store: Store, found: list[SubmissionSummary]) -> list[dict]:
    """Each summary's fields with its credit's."""
    terms = Terms(store)
    notes = store.notes_of([s.submission_id for s in found])
    return [vars(s) | terms.fields(s, notes) for s in found]


def gradebook_rows(rows: list[dict]) -> list[SubmissionSummary]:
    """The counted submissions with their credited scores, for the class gradebook."""
    keep = [r for r in rows if r["counted"] or r["status"] != "done"]
    names = SubmissionSummary.__dataclass_fields__
    return [
        replace(SubmissionSummary(**{k: r[k] for k in names}), score=r["credited_score"])
        for r in keep
    ]
