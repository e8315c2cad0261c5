"""The LTI tests' parts, all real: the fake LMS served on 127.0.0.2, the tool (the service
around a FakeGrader) served on 127.0.0.1, registered with each other through the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_lms import FakeLms, register
from servers import LaunchBrowser, ServerThread
from service_fakes import FakeDrawer, FakeGrader

from grader.service import create_app, load_settings


@pytest.fixture
def lms():
    server = ServerThread("127.0.0.2")
    fake = FakeLms(server.base)
    server.start(fake.app())
    yield fake
    server.stop()


class Tool:
    def __init__(self, server: ServerThread, app, grader: FakeGrader, data_dir: Path):
        self.base = server.base
        self.server = server
        self.app = app
        self.grader = grader
        self.data_dir = data_dir

    @property
    def lti(self):
        return self.app.state.lti

    @property
    def service(self):
        return self.app.state.service


@pytest.fixture
def start_tool(lms, tmp_path):
    """Start the tool (once per test) with these settings overrides; the LMS registered."""
    started: list[ServerThread] = []

    def start(grader=None, **overrides) -> Tool:
        server = ServerThread("127.0.0.1")
        data_dir = tmp_path / "data"
        register(lms, data_dir)
        base = {"data_dir": data_dir, "web_dir": tmp_path / "no-web"}
        base |= {"public_url": server.base, "lti_retry_seconds": 0.2}
        settings = load_settings(**{**base, **overrides})
        grader = grader or FakeGrader()
        draw = FakeDrawer() if isinstance(grader, FakeGrader) else None  # no torch: no plots
        app = create_app(settings, grader, draw)
        server.start(app)
        started.append(server)
        lms.tool_base = server.base
        return Tool(server, app, grader, data_dir)

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def tool(start_tool) -> Tool:
    return start_tool()


@pytest.fixture
def browser(lms, tool):
    launcher = LaunchBrowser(lms)
    yield launcher
    launcher.close()
