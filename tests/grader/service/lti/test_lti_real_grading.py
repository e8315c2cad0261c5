"""One passback end to end with the real, warm grader: the reference's full score and the
starter's failure reach the fake LMS as the course's best score, graded in the sandbox."""

from __future__ import annotations

import time

import httpx
import pytest
from test_lti_launch import session_of

from grader.exercise import default_exercise

pytestmark = [pytest.mark.service, pytest.mark.sandbox, pytest.mark.slow]

SLACK = {"call_wall_seconds": 60.0, "grading_wall_seconds": 240.0, "cpu_seconds": 120.0}


@pytest.fixture
def real_tool(start_tool):
    from grader.judge import Grader
    from grader.sandbox import Limits

    grader = Grader(pool_size=1, limits=Limits.from_env(**SLACK))
    tool = start_tool(grader=grader, verdict_wait_seconds=240)
    deadline = time.monotonic() + 300
    while not tool.service.ready:
        assert time.monotonic() < deadline, "the grader did not warm up"
        time.sleep(0.2)
    yield tool
    grader.close()


def test_a_real_grading_posts_its_score_and_the_best_stays(real_tool, lms):
    from servers import LaunchBrowser
    from test_lti_passback import submit, wait_for

    browser = LaunchBrowser(lms)
    token = session_of(browser.launch())
    browser.close()
    exercise = default_exercise()
    graded = submit(real_tool, token, exercise.reference.read_text())
    report = graded["report"]
    assert report["passed"] and report["score"] == report["max_score"] > 0
    wait_for(lambda: lms.scores, 30, "the reference's score at the LMS")
    assert lms.scores[0]["body"]["scoreGiven"] == report["score"]
    assert lms.scores[0]["body"]["scoreMaximum"] == report["max_score"]
    starter = submit(real_tool, token, exercise.starter.read_text())
    assert not starter["report"]["passed"]
    wait_for(lambda: len(lms.scores) == 2, 30, "the second post")
    assert lms.scores[1]["body"]["scoreGiven"] == report["score"]  # best, by default
    assert httpx.get(f"{real_tool.base}/healthz").status_code == 200
