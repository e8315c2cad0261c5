"""Fixtures for the service tests: an app around the fake grader, a client, settings."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():
    # Starlette asks for httpx2 instead of httpx; the venv holds httpx. Harmless for tests.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from grader.service import create_app, load_settings
from grader.store import open_store

sys.path.insert(0, str(Path(__file__).parent))
from postgres_server import PostgresServer, find_bindir
from service_fakes import FakeDrawer, FakeGrader
from service_kit import wait_until


@pytest.fixture(scope="session")
def postgres():
    """One real PostgreSQL server for the whole session (scripts/setup.sh --test installs it)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.fail("PostgreSQL is not installed: run `bash scripts/setup.sh --test` as root")
    server = PostgresServer(bindir)
    server.start()
    yield server
    server.destroy()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """A fresh, empty database of each kind the store supports."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'grader.sqlite3'}"
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def store(database_url):
    """A migrated store on each database, with two students: ada and grace."""
    store = open_store(database_url, migrate=True)
    store.create_student("ada", "hash-a")
    store.create_student("grace", "hash-g")
    yield store
    store.close()


@pytest.fixture
def settings_for(tmp_path):
    """Settings for a test: a private data dir and no web build, plus any overrides."""

    def make(**overrides):
        base = {"data_dir": tmp_path / "data", "web_dir": tmp_path / "no-web"}
        return load_settings(**{**base, **overrides})

    return make


@pytest.fixture
def make_client(settings_for):
    """Start an app around a FakeGrader whose node draws plots with a FakeDrawer; returns
    (client, grader). Closed after the test. Every grading reaches the FakeGrader unless a
    test turns `reuse_verdicts` on (tests of queues and gates send the same code again)."""
    opened = []

    def make(grader: FakeGrader | None = None, wait_ready: bool = True, **overrides):
        grader = grader or FakeGrader()
        settings = settings_for(**{"reuse_verdicts": False, **overrides})
        app = create_app(settings, grader, draw=FakeDrawer())  # no plotting process
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        opened.append(client)
        service = client.app.state.service
        if wait_ready:
            wait_until(lambda: service.ready)
        return client, grader

    yield make
    for client in opened:
        client.__exit__(None, None, None)
