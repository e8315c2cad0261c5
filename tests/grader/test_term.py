"""The term's pure rules: credit by the moment a Submit was accepted, late windows,
practice after the last, extensions, best and latest, quotas, and bad schedules."""

from __future__ import annotations

from datetime import timedelta

import pytest

from grader.term import (
    LateWindow,
    Quota,
    Schedule,
    TermError,
    at,
    check_schedule,
    counted_span,
    course_score,
    credit_for,
    credited,
    extended,
    quota_frees_at,
    schedule_dict,
    schedule_of,
    seconds_of,
)

DUE = at("2026-12-04T23:59:00+00:00")
SUNDAY = at("2026-12-06T23:59:00+00:00")
TERM = Schedule(due_at=DUE, late=(LateWindow(SUNDAY, 50.0),))


def test_full_credit_until_due_then_the_late_windows_then_practice():
    assert credit_for(TERM, DUE - timedelta(seconds=1)).percent == 100.0
    assert credit_for(TERM, DUE).percent == 100.0
    late = credit_for(TERM, DUE + timedelta(hours=1))
    assert (late.percent, late.counted, late.refused) == (50.0, True, None)
    after = credit_for(TERM, SUNDAY + timedelta(seconds=1))
    assert (after.counted, after.refused) == (False, None)  # practice: graded, never counted


def test_a_closed_term_and_one_not_yet_open_refuse_saying_when():
    closed = Schedule(due_at=DUE, after="closed", opens_at=DUE - timedelta(days=7))
    refused = credit_for(closed, DUE + timedelta(seconds=1)).refused
    assert refused == f"This exercise closed at {DUE.isoformat()}."
    early = credit_for(closed, DUE - timedelta(days=8)).refused
    assert early == f"This exercise opens at {(DUE - timedelta(days=7)).isoformat()}."


@pytest.mark.parametrize(
    "schedule",
    [
        TERM,
        Schedule(due_at=DUE),
        Schedule(due_at=DUE, opens_at=DUE - timedelta(days=7), after="closed"),
        extended(TERM, DUE + timedelta(days=2)),
    ],
)
def test_the_counted_span_is_where_credit_for_counts(schedule):
    """The class statistics leave practice out by this span (in SQL): it must agree."""
    opens, ends = counted_span(schedule)
    moments = [DUE + timedelta(hours=h, microseconds=u) for h in range(-200, 200, 7)
               for u in (-1, 0, 1)]  # fmt: skip
    moments += [m + d for m in (opens, ends) if m for d in (timedelta(microseconds=-1),
                timedelta(0), timedelta(microseconds=1))]  # fmt: skip
    for moment in moments:
        inside = (opens is None or opens <= moment) and moment <= ends
        assert credit_for(schedule, moment).counted == inside, moment
    assert counted_span(None) == (None, None)


def test_no_schedule_is_full_credit_for_ever_and_credit_caps_the_raw_score():
    assert credit_for(None, SUNDAY).percent == 100.0
    assert credited(80.0, 100.0, 50.0) == 50.0
    assert credited(30.0, 100.0, 50.0) == 30.0
    assert credited(None, None, 50.0) is None


def test_an_extension_moves_the_due_date_and_the_late_windows_with_it():
    mine = extended(TERM, DUE + timedelta(days=2))
    assert credit_for(mine, DUE + timedelta(days=1)).percent == 100.0
    assert mine.late[0].until == SUNDAY + timedelta(days=2)


def test_best_never_decreases_latest_is_the_last():
    assert course_score([80.0, 40.0], "best") == 80.0
    assert course_score([80.0, 40.0], "latest") == 40.0
    assert course_score([], "best") is None


def test_a_quota_frees_its_oldest_submit_after_the_window():
    now = at("2026-12-01T12:00:00+00:00")
    quota = Quota(2, 3600)
    times = [now - timedelta(minutes=50), now - timedelta(minutes=10)]
    assert quota_frees_at(times, quota, now) == now + timedelta(minutes=10)
    assert quota_frees_at(times[1:], quota, now) is None
    assert seconds_of("1h") == 3600 and seconds_of("1d") == 86400


@pytest.mark.parametrize(
    ("late", "message"),
    [
        ([LateWindow(DUE - timedelta(hours=1), 50.0)], "late windows must go forwards"),
        ([LateWindow(SUNDAY, 50.0), LateWindow(SUNDAY, 20.0)], "late windows must go forwards"),
        ([LateWindow(SUNDAY, 120.0)], "a credit is a percentage from 0 to 100, got 120"),
        ([LateWindow(SUNDAY, -5.0)], "a credit is a percentage from 0 to 100, got -5"),
    ],
)
def test_bad_schedules_say_what_was_expected(late, message):
    with pytest.raises(TermError, match=message):
        check_schedule(Schedule(due_at=DUE, late=tuple(late)))


def test_bad_times_and_durations_are_refused_and_a_schedule_round_trips():
    with pytest.raises(TermError, match="with a zone"):
        at("2026-12-04T23:59")
    with pytest.raises(TermError, match="like 30m, 1h or 1d"):
        seconds_of("soon")
    with pytest.raises(TermError, match="opens at"):
        check_schedule(Schedule(due_at=DUE, opens_at=SUNDAY))
    assert schedule_of(schedule_dict(TERM)) == TERM
