"""The LTI rows on both databases: what must hold across API nodes (two engines on one
database stand for two nodes)."""

from __future__ import annotations

import threading

import pytest

from grader.service.lti import Launch, LoginState, LtiStore, Outbox, later, row_writer
from grader.store import Admission, GradingResult, Submission, now, open_store


@pytest.fixture
def two_nodes(database_url):
    stores = [open_store(database_url, migrate=True), open_store(database_url)]
    yield stores
    for store in stores:
        store.close()


def registered(lti: LtiStore) -> int:
    values = {"issuer": "https://lms.example", "client_id": "c1", "auth_url": "https://a"}
    values |= {"token_url": "https://t", "jwks_url": "https://j", "token_audience": None}
    platform, created = lti.save_platform({**values, "name": "LMS"}, ["d1"])
    assert created
    again, created = lti.save_platform({**values, "name": "LMS"}, ["d2", "d1"])
    assert not created and again.deployment_ids == ("d1", "d2")
    return platform.platform_id


def test_a_login_state_is_taken_once_by_any_node(two_nodes):
    a, b = (LtiStore(s.engine) for s in two_nodes)
    platform_id = registered(a)
    state = LoginState("s1", "n1", platform_id, "https://tool/lti/launch", "u1", None, later(600))
    assert a.add_state(state, 10)
    assert b.peek_state("s1") == state
    taken = []
    threads = [
        threading.Thread(target=lambda s=s: taken.append(s.take_state("s1"))) for s in (a, b)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(bool, taken)) == [False, True]
    expired = LoginState("s2", "n2", platform_id, "x", "u1", None, later(-1))
    assert a.add_state(expired, 10)
    assert b.take_state("s2") is None
    assert a.prune_states() == 0  # taking it removed it as well


def test_an_outbox_row_is_claimed_by_one_node_and_only_once_graded(two_nodes):
    store = two_nodes[0]
    a, b = (LtiStore(s.engine) for s in two_nodes)
    platform_id = registered(a)
    entry = Launch(
        platform_id,
        *("d1", "sub-1", "Ada", "student", "ctx", "Course", "rl", "Link", "gspo", "https://l/1"),
    )
    seat = a.seat(entry)
    assert b.seat(entry) == seat  # the same user, course and link from any node
    record = Submission("s" * 32, "submit", seat.student, seat.student, "gspo", "code", now())
    outbox_row = row_writer(seat.user_id, seat.link_id)
    store.admit(record, "r" * 32, Admission(10, 10, 1), also=outbox_row)
    assert Outbox(a).due(8) == []  # not graded yet: nothing to post
    store.claim("node-a")
    store.finish("r" * 32, GradingResult("{}", 20.0, 20.0, True))
    assert Outbox(b).due(8) == [record.submission_id]
    claims = [Outbox(s).claim(record.submission_id) for s in (a, b)]
    assert [c is not None for c in claims] == [True, False]
    assert claims[0].sub == "sub-1" and claims[0].lineitem == "https://l/1"
    assert claims[0].policy == "best"
    assert [g.score for g in Outbox(b).graded(seat.user_id, seat.link_id)] == [20.0]
