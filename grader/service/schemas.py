"""The request and response bodies of the HTTP API (they also make the OpenAPI page at /docs)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from grader.report import Artifacts, Report
from grader.store.names import mixed_scripts_message, normal_name

# A student name starts with a letter or digit (so a gradebook cell can never start a
# spreadsheet formula) and holds letters, digits, spaces and . _ @ - (any script).
STUDENT_PATTERN = r"^[^\W_][\w .@-]*$"


def _one_script(name: str) -> str:
    if message := mixed_scripts_message(name):
        raise PydanticCustomError("mixed_scripts", message)
    return name


def _valid_code(code: str) -> str:
    """A lone surrogate (\\ud800 in the JSON) is no character: refused before it is stored."""
    try:
        code.encode()
    except UnicodeEncodeError as error:
        line = code.count("\n", 0, error.start) + 1
        why = f"line {line} holds a lone surrogate ({code[error.start]!r}); expected UTF-8 text"
        raise PydanticCustomError("not_utf8", "the code is not valid Unicode: " + why) from None
    return code


# Normalised (grader/store/names.py) before it is checked, compared or stored.
StudentName = Annotated[
    str,
    BeforeValidator(lambda value: normal_name(value) if isinstance(value, str) else value),
    Field(min_length=1, max_length=64, pattern=STUDENT_PATTERN),
    AfterValidator(_one_script),
]

Status = Literal["queued", "grading", "done", "ungradable"]
EXERCISE_FIELD = Field(
    None, description="An exercise id from GET /api/exercises; default: the first."
)


class RunRequest(BaseModel):
    code: Annotated[str, AfterValidator(_valid_code)] = Field(
        description="The student's Python source."
    )
    exercise: str | None = EXERCISE_FIELD
    student: StudentName | None = Field(
        None, description="Who runs it (one Run in flight each); default: the client's address."
    )


class SubmitRequest(RunRequest):
    student: StudentName


class GradingView(BaseModel):
    """A grading's state. `report` is set once the status is done or ungradable (the
    report then says what the grader could not do); `position` while it is queued."""

    report_id: str
    exercise: str
    status: Status
    position: int | None = Field(None, description="1 = next to be graded, over the cluster.")
    report: Report | None = None
    plots: dict[str, str] = Field(default_factory=dict, description="plot name -> image URL")


class RunResponse(GradingView):
    pass


class Credited(BaseModel):
    """A Submit's raw score and the credit its acceptance time earned (grader/term.py)."""

    score: float | None = None  # raw: what the tiers gave
    max_score: float | None = None
    credit: float = Field(100.0, description="Percent of the maximum score this Submit can earn.")
    credited_score: float | None = Field(None, description="min(credit, score).")
    counted: bool = Field(True, description="False: practice, after the last late window.")
    note: str | None = Field(None, description="What a regrade changed, once applied.")


class SubmissionView(GradingView, Credited):
    submission_id: str
    student: str
    created_at: str
    code: str = Field("", description="The submitted source (its student and the instructor only).")
    hint: str = Field("", description="The known mistake its failing tests match, if allowed.")


class SubmitResponse(SubmissionView):
    student_key: str = Field(description="Send it back as X-Student-Key on later requests.")


class SubmissionItem(Credited):
    submission_id: str
    exercise: str
    created_at: str
    status: Status
    passed: bool | None = None  # None until done, and for ever when ungradable


class SubmissionList(BaseModel):
    student: str
    submissions: list[SubmissionItem]


class GradingItem(BaseModel):
    """One grading of a submission: the current one is what the student sees."""

    grading_id: str
    current: bool
    status: Status
    attempts: int
    exercise_version: str | None = None  # None: graded before versions were recorded
    score: float | None = None
    max_score: float | None = None
    passed: bool | None = None
    queued_at: str
    started_at: str | None = None
    finished_at: str | None = None


class GradingList(BaseModel):
    submission_id: str
    gradings: list[GradingItem]


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


class ExerciseSummary(BaseModel):
    id: str
    title: str
    paper: str
    section: str


class ExerciseInfo(BaseModel):
    id: str
    title: str
    paper: str
    section: str
    statement: str
    starter: str
    functions: list[str]
    tiers: list[TierInfo]
    plots: list[str]


class Preview(BaseModel):
    """The reference preview: what a correct solution's toy produces."""

    exercise: str
    status: Literal["ready", "drawing"]
    artifacts: Artifacts | None = None
    plots: dict[str, str] = Field(default_factory=dict, description="plot name -> image URL")


class Health(BaseModel):
    status: str
    detail: str = ""
    deployment: Literal["embedded", "distributed"] = "embedded"
    database: str = "ok"
    workers: int | None = None  # distributed: grading nodes with a fresh heartbeat
    isolation: str = ""  # embedded: the sandbox's level on this machine
    warning: str = ""
    warnings: list[str] = Field(default_factory=list)  # e.g. data files other users can read
