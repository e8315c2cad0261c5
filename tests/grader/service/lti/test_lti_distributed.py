"""LTI in the distributed deployment: two API nodes over one PostgreSQL share the login
states, the session key and the passback outbox. A GradingNode around the FakeGrader stands
in for `gspo-grader worker` (what it writes is the same)."""

from __future__ import annotations

import time

import httpx
import pytest
from fake_lms import register
from servers import ServerThread
from service_fakes import FakeDrawer, FakeGrader
from test_lti_launch import session_of
from test_lti_passback import PASSING, wait_for

from grader.node import GradingNode, Metrics
from grader.service import create_app, load_settings
from grader.store import open_store, upgrade_url

pytestmark = pytest.mark.service


@pytest.fixture
def api_nodes(lms, postgres, tmp_path, monkeypatch):
    url = postgres.new_database()
    upgrade_url(url)
    monkeypatch.setenv("GSPO_GRADER_DATABASE_URL", url)
    register(lms, tmp_path / "unused")
    servers = [ServerThread("127.0.0.1") for _ in range(2)]
    for index, server in enumerate(servers):
        settings = load_settings(
            data_dir=tmp_path / f"node-{index}",
            web_dir=tmp_path / "no-web",
            database_url=url,
            public_url=servers[0].base,  # one public address, as behind a load balancer
            lti_retry_seconds=0.2,
            verdict_wait_seconds=0.5,
        )
        server.start(create_app(settings))
    lms.tool_base = servers[0].base
    store = open_store(url)
    yield [s.base for s in servers], store
    store.close()
    for server in servers:
        server.stop()


def test_a_launch_and_its_passback_span_two_api_nodes(api_nodes, browser, lms):
    (a, b), store = api_nodes
    browser.login()
    assert browser.authorize().status_code == 200, lms.problems
    browser.action = f"{b}/lti/launch"  # the load balancer sends the form post to node B
    token = session_of(browser.post_launch())
    browser.action = f"{a}/lti/launch"
    assert browser.post_launch().status_code == 400  # the state was taken, on node B
    assert httpx.get(f"{a}/api/lti/session", headers={"X-LTI-Session": token}).status_code == 200

    queued = httpx.post(
        f"{b}/api/lti/submit", json={"code": PASSING}, headers={"X-LTI-Session": token}
    )
    assert queued.status_code == 202, queued.text  # no grading node has taken it yet
    submission_id = queued.json()["submission_id"]
    node = GradingNode(store, FakeGrader(), Metrics(), "node-1", 1, draw=FakeDrawer())
    node.grader.start()
    job = store.claim(node.name)
    assert job.submission_id == submission_id
    node.run(job)
    node.close()  # its drawings end before the fixture closes the store

    wait_for(lambda: lms.scores, message="a score from one of the API nodes")
    time.sleep(2.0)  # both nodes drain every second: a second post would have come
    assert len(lms.scores) == 1, lms.scores
    assert lms.scores[0]["body"]["scoreGiven"] == 20
    seen = httpx.get(f"{a}/api/lti/submissions/{submission_id}", headers={"X-LTI-Session": token})
    assert seen.json()["status"] == "done"
