"""The judge's engine: what runs inside a judge process (pytest and torch; never the API's).

judge.py           Judge: one request -> (Report, GradingStats); inventory(exercise)
pytest_session.py  CollectedSession: the tier suites collected once, run for grading after grading
tier_state.py      what a grading could leave in a session, fingerprinted
pytest_private.py  every private pytest name the judge uses, in one place
protocol.py        each test's phases through pytest's runner, reports built without formatting
runtime.py         what a judge keeps of one exercise between gradings
grading_run.py     GradingRun: one grading's clock and its Report
ledger.py          the tier tests of one grading: bound, selected, judged, scored
student_session.py the sandboxed submission of one grading
plugin.py          the hooks and fixtures (student, reference, experiment, ...)
verdicts.py        an exception in a test -> outcome, message and whose fault
recording.py       the `student` fixture: calls noted, signatures read from the source
reference_memo.py  the `reference` fixture: results remembered between gradings
rehearsal.py       a first grading's forecasts: the reference graded while the sandbox starts
tiercode.py        the tier modules compiled once per judge process
"""

from grader.judge.engine.judge import Judge, inventory
from grader.judge.engine.ledger import TestLedger, TestRecord, tier_results
from grader.judge.engine.pytest_private import PRIVATE_NAMES
from grader.judge.engine.recording import RecordedCall, RecordingStudent, source_signature
from grader.judge.engine.reference_memo import (
    DOUBLE_BACKWARD,
    READ_ONLY,
    RememberedReference,
)
from grader.judge.engine.tier_state import TierState
from grader.judge.engine.tiercode import TierCode
from grader.judge.engine.verdicts import (
    GRADER_FAULT,
    GraderFault,
    SubmissionNotLoaded,
    TestVerdict,
    judge_exception,
)
