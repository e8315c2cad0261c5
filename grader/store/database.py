"""Opening the database a URL names, and keeping its schema current with Alembic.

    engine = open_engine("sqlite:///data/grader.sqlite3")   # or postgresql://USER:PASS@HOST/DB
    upgrade(engine)        # `gspo-grader db upgrade`; the embedded default runs it at start
    check_schema(engine)   # `serve` and `worker` on PostgreSQL: DatabaseError unless current

The migration scripts live in `grader/store/migrations/`, inside the package, so an
installed grader can upgrade its own database. A SQLite file written by the first release
(its tables, no alembic_version) is recognised and upgraded without losing a row.

SQLite runs in WAL mode with synchronous=FULL, so a row survives a kill -9 once written; a
write transaction starts with BEGIN IMMEDIATE, so two writers queue for the lock instead of
failing halfway (the store asks for it with `write=True`).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.exc import SQLAlchemyError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
FIRST_RELEASE = "0001"  # the schema the first release created without Alembic
CONNECT_TIMEOUT_S = 5  # an unreachable server fails fast instead of hanging a request


class DatabaseError(Exception):
    """The database cannot be used as it is: unreachable, or its schema is not current.
    The message is one line that tells the operator what to do."""


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgresql+psycopg://", "postgres://"))


def driver_url(url: str) -> str:
    """The URL as SQLAlchemy needs it: PostgreSQL through psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def open_engine(url: str) -> Engine:
    if is_postgres(url):
        return create_engine(
            driver_url(url),
            pool_pre_ping=True,  # a connection left over from before a restart is replaced
            pool_size=8,
            max_overflow=8,
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
        )
    if not url.startswith("sqlite:///"):
        raise DatabaseError(f"unsupported database URL {url.split(':', 1)[0]!r}")
    path = Path(url[len("sqlite:///") :])
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    dbapi_connection.isolation_level = None  # transactions are begun by _sqlite_begin
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
        dbapi_connection.execute(f"PRAGMA {pragma}")


def _sqlite_begin(connection) -> None:
    write = connection.get_execution_options().get("write", False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


# ---- migrations ---------------------------------------------------------------------------
def _config(connection=None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    return ScriptDirectory.from_config(_config()).get_current_head() or ""


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, target: str = "head") -> tuple[str | None, str]:
    """Create or migrate the schema to the newest revision (or `target`); (revision before,
    after)."""
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":  # tables are rebuilt: check keys after, not during
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
        before = MigrationContext.configure(connection).get_current_revision()
        if before is None and "submissions" in inspect(connection).get_table_names():
            command.stamp(_config(connection), FIRST_RELEASE)  # a first-release data dir
            before = FIRST_RELEASE
        command.upgrade(_config(connection), target)
        connection.commit()
        if engine.dialect.name == "sqlite":
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")
    return before, head_revision() if target == "head" else target


def upgrade_url(url: str) -> str:
    """`gspo-grader db upgrade`: migrate the database a URL names; a line saying what changed."""
    engine = open_engine(url)
    try:
        before, after = upgrade(engine)
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise DatabaseError(f"the database cannot be upgraded: {reason}") from None
    finally:
        engine.dispose()
    if before == after:
        return f"the database is at revision {after} already; nothing to do"
    return f"the database was upgraded from {before or 'nothing'} to revision {after}"


def check_schema(engine: Engine) -> None:
    """DatabaseError unless the database answers and its schema is the newest."""
    try:
        current = current_revision(engine)
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise DatabaseError(f"the database cannot be reached: {reason}") from None
    head = head_revision()
    if current != head:
        found = f"revision {current}" if current else "no grader schema"
        raise DatabaseError(
            f"the database has {found}, this grader needs {head}: run `gspo-grader db upgrade`"
        )
