"""The database both the web service and the grading nodes use: schema, migrations, queries.

    from grader.store import open_store
    store = open_store("sqlite:///data/grader.sqlite3", migrate=True)
    store.admit(submission, grading_id, admission)   # a submission and its queued grading
    job = store.claim("node-a")                      # a grading node takes the oldest one
    store.finish(job.grading_id, verdict)            # its report, written once

It imports no web framework and no torch: a grading node and an API node both load it.
"""

from grader.store.courses import QuotaUsed, Regrade, RegradeItem, Term
from grader.store.database import (
    DatabaseError,
    current_revision,
    head_revision,
    is_postgres,
    open_engine,
    upgrade,
    upgrade_url,
)
from grader.store.jobs import VERDICT_CHANNEL, WORK_CHANNEL, Job
from grader.store.queries import (
    PREVIEW_DATA,
    Also,
    Store,
    artifacts_key,
    open_store,
    preview_key,
)
from grader.store.records import (
    Admission,
    GradedSubmission,
    GradingRecord,
    GradingResult,
    NameTaken,
    OwnerBusy,
    PlotsWanted,
    QueueFull,
    Submission,
    SubmissionSummary,
    TooManyNames,
    ago,
    now,
)
from grader.store.schema import FINISHED, IN_FLIGHT
