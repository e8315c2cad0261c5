"""A grading node's /metrics and /healthz over HTTP: the standard library's threaded server,
on its own thread, so that a scrape never waits for the event loop that takes jobs.

/healthz is for a container engine's health check: 200 `{"status": "ok"}` while at least one
judge is warm (ready or grading), 503 `{"status": "unavailable"}` while none is (all of them
restarting). The server starts once the judges are warm, so nothing answers before that."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)


class MetricsServer:
    """Serves `render()` at GET /metrics and `healthy()` at GET /healthz on 0.0.0.0:port;
    port 0 serves nothing."""

    def __init__(
        self,
        port: int,
        render: Callable[[], str],
        host: str = "0.0.0.0",
        healthy: Callable[[], bool] = lambda: True,
    ):
        self.port = port
        self.host = host
        self.render = render
        self.healthy = healthy
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        if self.port == 0:
            return
        render, healthy = self.render, self.healthy

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/metrics":
                    self._answer(200, render(), "text/plain; version=0.0.4; charset=utf-8")
                elif path == "/healthz":
                    ok = healthy()
                    body = json.dumps({"status": "ok" if ok else "unavailable"})
                    self._answer(200 if ok else 503, body, "application/json")
                else:
                    self.send_error(404, "only /metrics and /healthz are served here")

            def _answer(self, status: int, text: str, content_type: str) -> None:
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        try:
            self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        except OSError as error:
            log.warning("no /metrics: cannot listen on port %d (%s)", self.port, error)
            return
        threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True).start()
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
