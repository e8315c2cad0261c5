"""docs/instructors.md's walk through a term, command by command through the CLI: set a
schedule, extend a student, limit Submits, preview a regrade (graded here as a grading node
would), apply it with the command the preview prints, roll it back."""

from __future__ import annotations

import shlex
import threading

import pytest
from class_seed import report_of, seed

from grader.cli import main
from grader.store import GradingResult, open_store

pytestmark = pytest.mark.service


def test_the_documented_term_walkthrough_runs_as_written(tmp_path, capsys):
    data = ["--data-dir", str(tmp_path)]
    store = open_store(f"sqlite:///{tmp_path / 'grader.sqlite3'}", migrate=True)
    seed(store, "ada", report_of("gspo", {"t::a": "passed", "t::b": "passed"}, 20.0), 0)
    schedule = ["--opens", "2026-11-01T09:00+00:00", "--due", "2026-12-04T23:59+00:00"]
    schedule += ["--late", "2026-12-06T23:59+00:00=50", "--after", "practice", "--policy", "best"]
    assert main(["course", "schedule", "gspo", *data, *schedule]) == 0
    assert main(["course", "extend", "gspo", "ada", *data, "--due", "2026-12-06T23:59+00:00"]) == 0
    assert main(["course", "quota", "gspo", *data, "--submits", "3", "--per", "1h"]) == 0
    term = store.term("default", "gspo")
    assert term.extensions["ada"].isoformat() == "2026-12-06T23:59:00+00:00"
    assert term.quota.submits == 3 and term.schedule.after == "practice"

    previewed: list[int] = []  # the CLI waits for the regradings; grade them as a node would
    waiting = threading.Thread(
        target=lambda: previewed.append(main(["regrade", "gspo", *data, "--preview"]))
    )
    waiting.start()
    job = None
    while job is None and waiting.is_alive():
        job = store.claim("node-a")
    lower = report_of("gspo", {"t::a": "passed", "t::b": "failed"}, 20.0)
    store.finish(job.grading_id, GradingResult(lower.model_dump_json(), 10.0, 20.0, False))
    waiting.join(30)
    assert previewed == [0]
    shown = capsys.readouterr().out
    assert "ada: 20.0 -> 10.0" in shown and "test t::b: 1 verdicts flipped" in shown
    [hint] = [line for line in shown.splitlines() if line.startswith("apply with: ")]
    command = shlex.split(hint.removeprefix("apply with: "))
    assert command[:3] == ["gspo-grader", "regrade", "gspo"]
    assert main([*command[1:], *data]) == 0
    assert store.submits_of("default", "gspo")[0].grading.score == 10.0
    assert main([*command[1:], *data]) == 2  # a second apply: refused, nothing changed
    assert main(["regrade", "gspo", *data, "--rollback"]) == 0
    assert store.submits_of("default", "gspo")[0].grading.score == 20.0
    store.close()
