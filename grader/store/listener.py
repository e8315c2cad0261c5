"""PostgreSQL LISTEN on a thread: `Listener(url, channel, on_note).start()` calls
`on_note(payload)` for every NOTIFY on the channel, and reconnects when the database goes
away (a notification lost meanwhile costs its listener one poll period)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

log = logging.getLogger(__name__)


def libpq_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


class Listener:
    def __init__(self, url: str, channel: str, on_note: Callable[[str], None]):
        self.url, self.channel, self.on_note = libpq_url(url), channel, on_note
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name=f"listen-{channel}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self.on_note(note.payload)
            except (psycopg.Error, OSError) as error:
                log.warning("lost the database while listening (%s); reconnecting", error)
                self._stop.wait(1.0)
