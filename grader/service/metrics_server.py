"""A grading node's /metrics over HTTP: the standard library's threaded server, on its own
thread, so that a scrape never waits for the event loop that takes jobs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)


class MetricsServer:
    """Serves `render()` at GET /metrics on 0.0.0.0:port; port 0 serves nothing."""

    def __init__(self, port: int, render: Callable[[], str], host: str = "0.0.0.0"):
        self.port = port
        self.host = host
        self.render = render
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        if self.port == 0:
            return
        render = self.render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404, "only /metrics is served here")
                    return
                body = render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
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
