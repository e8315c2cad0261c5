"""One place to configure the service: environment variables GSPO_GRADER_*, checked at start-up.

A typo'd or out-of-range value stops the service before it accepts a request, with a message
that names the variable, instead of surfacing later as a confusing grading failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from grader.exercise import REPO_ROOT

ENV_PREFIX = "GSPO_GRADER_"
MIN_TOKEN_CHARS = 32


class SettingsError(ValueError):
    """The service's configuration is invalid; the message names each bad variable."""


class Settings(BaseSettings):
    """Every knob of the service. Sandbox limits are read by `Limits.from_env()`
    (GSPO_GRADER_SANDBOX_*), so there is still one place to set them."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    data_dir: Path = Path("./data")
    database_url: str | None = None  # default: sqlite in data_dir; postgresql://: distributed
    web_dir: Path | None = None  # default: web/dist beside the grader package
    pool_size: int = Field(2, ge=1, le=64)  # judge processes (each keeps a sandbox worker ready)
    max_concurrent: int = Field(2, ge=1, le=64)  # gradings in flight
    # of a node's judges, this many take live work only, never a regrading (node/lanes.py);
    # at most all but one: a node of one judge reserves none
    live_judges: int = Field(1, ge=0, le=64)
    regrade_nice: int = Field(10, ge=0, le=19)  # CPU niceness of the judges that may regrade
    # a node starts a regrading only after this long with no live grading (0: whenever free)
    regrade_lull_seconds: float = Field(1.0, ge=0, le=60)
    max_queue: int = Field(16, ge=0, le=10_000)  # gradings waiting for a slot
    max_per_student: int = Field(1, ge=1, le=64)  # a student's Submits admitted at once
    names_per_hour: int = Field(20, ge=1, le=100_000)  # new student names per address
    max_code_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    instructor_token: SecretStr | None = None  # None: instructor endpoints are disabled
    # a live grading of code graded before (same course, exercise version, mode, limits and
    # grader build) takes that report and runs nothing (node/reuse.py); false: grade each
    reuse_verdicts: bool = True
    run_retention_hours: float = Field(24.0, gt=0, le=24 * 365)  # Run reports kept (plots)
    verdict_wait_seconds: float = Field(20.0, ge=0, le=600)  # then 202 and the page polls
    heartbeat_seconds: float = Field(2.0, gt=0, le=10)  # grading nodes' heartbeat period
    stalled_seconds: float = Field(10.0, ge=1, le=30)  # no heartbeat this long: node is dead
    metrics_port: int = Field(9400, ge=0, le=65535)  # a grading node's /metrics; 0: none
    plot_wait_seconds: float = Field(20.0, ge=0, le=300)
    retry_after_seconds: int = Field(5, ge=1, le=3600)
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    # LTI 1.3 (grader/service/lti): the address LMSs and browsers reach this service at,
    # e.g. https://grader.example.edu; None: taken from each request's own URL
    public_url: str | None = None
    lti_retry_seconds: float = Field(30.0, gt=0, le=3600)  # first grade passback retry; doubles
    lti_session_hours: float = Field(8.0, gt=0, le=24 * 7)  # a launch's session, renewals and all
    lti_logins_per_address: int = Field(300, ge=1, le=100_000)  # live LTI logins (10 min each)
    lti_key_set_refetch_seconds: float = Field(60.0, ge=0, le=3600)  # an LMS's key set, at most
    # origins besides the registered LMSs' that may frame the page, space separated (an LMS
    # whose pages are on another origin than its issuer, e.g. https://school.instructure.com)
    frame_origins: str = ""
    docs: bool = True  # /docs, /openapi.json: Swagger UI from the page's build, never a CDN
    # HTTP: uvicorn's caps (the reverse proxy adds read timeouts: docs/deploy.md)
    http_max_connections: int = Field(1000, ge=1, le=100_000)  # then 503
    http_keep_alive_seconds: int = Field(5, ge=1, le=300)  # an idle connection is closed
    http_max_header_bytes: int = Field(64 * 1024, ge=1024, le=1024 * 1024)
    instructor_failures_per_minute: int = Field(10, ge=1, le=10_000)  # per address, then 429

    @field_validator("instructor_token")
    @classmethod
    def _token_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        """A short token could be guessed; refuse to start, saying how to make a good one."""
        if value is not None and len(value.get_secret_value()) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"the instructor token must be at least {MIN_TOKEN_CHARS} characters, not "
                f"{len(value.get_secret_value())}; generate one with: "
                'python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )
        return value

    @field_validator("public_url")
    @classmethod
    def _absolute_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError("give the full address, e.g. https://grader.example.edu")
        return value.rstrip("/") if value is not None else None

    @field_validator("database_url")
    @classmethod
    def _supported_database(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite:///", "postgresql://")):
            raise ValueError("use sqlite:///PATH or postgresql://USER:PASSWORD@HOST/DB")
        return value

    @property
    def distributed(self) -> bool:
        """PostgreSQL: API nodes and grading nodes apart, the queue in the database."""
        return self.resolved_database_url.startswith("postgresql://")

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "grader.sqlite3"

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.sqlite_path}"

    @property
    def resolved_web_dir(self) -> Path:
        return self.web_dir or REPO_ROOT / "web" / "dist"

    def sandbox_limits(self):
        """The sandbox limits, from GSPO_GRADER_SANDBOX_* (checked here, at start-up)."""
        from grader.sandbox import Limits

        return Limits.from_env()

    def verdict_reuse(self):
        """A node's VerdictReuse, or None when `reuse_verdicts` is off."""
        from grader.node.reuse import VerdictReuse

        return VerdictReuse(self.sandbox_limits()) if self.reuse_verdicts else None


def load_settings(**overrides) -> Settings:
    """Settings from the environment plus `overrides`; SettingsError on a bad value."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"]) or "settings"
            problems.append(f"{ENV_PREFIX}{field.upper()}: {error['msg']}")
        raise SettingsError("invalid configuration: " + "; ".join(problems)) from None
