"""The request and response bodies of the HTTP API (they also make the OpenAPI page at /docs)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from grader.report import Report

# A student name starts with a letter or digit (so a gradebook cell can never start a
# spreadsheet formula) and holds letters, digits, spaces and . _ @ - (any script).
STUDENT_PATTERN = r"^[^\W_][\w .@-]*$"


class RunRequest(BaseModel):
    code: str = Field(description="The student's Python source.")


class SubmitRequest(BaseModel):
    code: str = Field(description="The student's Python source.")
    student: str = Field(min_length=1, max_length=64, pattern=STUDENT_PATTERN)


PLOTS_FIELD = Field(
    default_factory=dict, description="Plot name -> URL of its PNG (drawn after the verdict)."
)


class RunResponse(BaseModel):
    report_id: str
    report: Report
    plots: dict[str, str] = PLOTS_FIELD


class SubmissionView(BaseModel):
    submission_id: str
    report_id: str
    student: str
    report: Report
    plots: dict[str, str] = PLOTS_FIELD


class SubmitResponse(SubmissionView):
    student_key: str = Field(description="Send it back as X-Student-Key on later requests.")


class SubmissionItem(BaseModel):
    submission_id: str
    created_at: str
    passed: bool
    score: float
    max_score: float


class SubmissionList(BaseModel):
    student: str
    submissions: list[SubmissionItem]


class InstructorItem(SubmissionItem):
    student: str


class InstructorList(BaseModel):
    submissions: list[InstructorItem]


class TierInfo(BaseModel):
    id: str
    title: str
    description: str = ""
    points: float = 0.0
    visibility: str = "visible"


class ExerciseInfo(BaseModel):
    title: str
    statement: str
    starter: str
    functions: list[str]
    tiers: list[TierInfo]


class Health(BaseModel):
    status: str
