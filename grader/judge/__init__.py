"""The judge: tier registry, the Grader and its judge processes (no torch, no pytest here).

    from grader.judge import Grader, grade

    report = grade(source, mode="submit")                  # cold, one shot
    with Grader(pool_size=2) as grader:                    # warm judge processes
        report = grader.grade(source, mode="run", exercise="gspo")

One Submit, hop by hop: Grader.grade (grader.py) -> JudgeClient.grade (client.py, over the
link of link.py) -> the judge process's loop (grader/judge_process.py, outside this package:
it starts its sandbox before it imports this face) -> Judge.grade and the prepared pytest
session (engine/) -> the tier tests, with the fixtures of engine/plugin.py and the
GradingRun of engine/grading_run.py -> the sandboxed student (grader.sandbox.remote) ->
GradingRun.report -> back, with the GradingStats (stats.py) beside the Report.

What runs inside a judge process (pytest, torch) is `grader.judge.engine`; importing this
face loads neither, so the CLI's `tiers` and the service's API nodes stay light.
"""

from grader.judge.checkup import check_exercise, grade_one
from grader.judge.client import JudgeClient, JudgeFailed, JudgeTimeout
from grader.judge.failures import failed_report, grader_error, grading_timeout
from grader.judge.grader import MODES, Grader, ProgressBar, grade, grade_files
from grader.judge.link import GradingRequest, LinkClosed
from grader.judge.registry import Tier, TierRegistryError, load_tiers, parse_tier_list, runs
from grader.judge.stats import COUNTERS, GradingStats
from grader.judge.stderr_relay import StderrRelay
