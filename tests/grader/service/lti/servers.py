"""Real HTTP servers for the LTI tests: uvicorn on a thread, on a chosen loopback address."""

from __future__ import annotations

import html
import re
import socket
import threading
import time

import httpx
import uvicorn


class ServerThread:
    """uvicorn serving `app` on HOST at a free port, on a thread of this process."""

    def __init__(self, host: str):
        self.socket = socket.socket()
        self.socket.bind((host, 0))
        self.base = f"http://{host}:{self.socket.getsockname()[1]}"
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def start(self, app) -> None:
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the server at {self.base} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.thread.join(30)
        self.socket.close()


FORM_ACTION = re.compile(r'<form[^>]*action="([^"]+)"')
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


class LaunchBrowser:
    """What a browser does in a launch, step by step: the tool's login, the LMS's
    authorisation page, and the auto-submitted form post back to the tool. The tool's
    partitioned cookie is carried by hand (it is Secure, and these servers speak http)."""

    def __init__(self, lms):
        self.lms = lms
        self.http = httpx.Client(timeout=20, follow_redirects=False)
        self.login_response: httpx.Response | None = None
        self.form: dict[str, str] = {}

    def login(self, login_hint: str = "student-1") -> httpx.Response:
        self.login_response = self.http.get(self.lms.login_url(login_hint))
        return self.login_response

    def authorize(self) -> httpx.Response:
        """Follow the login's redirect to the LMS; keep the form it would auto-submit."""
        assert self.login_response.status_code == 302, self.login_response.text
        page = self.http.get(self.login_response.headers["location"])
        if page.status_code == 200:
            self.action = html.unescape(FORM_ACTION.search(page.text).group(1))
            self.form = {k: html.unescape(v) for k, v in HIDDEN.findall(page.text)}
        return page

    def state_cookie(self) -> tuple[str, str]:
        header = self.login_response.headers["set-cookie"]
        name, _, rest = header.partition("=")
        return name, rest.split(";", 1)[0]

    def post_launch(self, cookie: bool = True, form: dict | None = None) -> httpx.Response:
        headers = {}
        if cookie:
            name, value = self.state_cookie()
            headers["Cookie"] = f"{name}={value}"
        return self.http.post(self.action, data=form or self.form, headers=headers)

    def launch(self, login_hint: str = "student-1") -> httpx.Response:
        self.login(login_hint)
        page = self.authorize()
        assert page.status_code == 200, page.text
        return self.post_launch()

    def close(self) -> None:
        self.http.close()
