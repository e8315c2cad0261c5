"""Ending the service's background tasks (the Runs pruner, grade passback, line-item reads)
before the store closes.

A task cancelled at once may be inside a database call on a worker thread: the call goes on,
and its connection comes back after the store has closed, never to be closed. So a task under
way gets a bounded moment to end first; what is left then is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def end_tasks(tasks: Iterable[asyncio.Task], wait_s: float) -> None:
    """Wait up to `wait_s` for `tasks` to end (each told to stop by its owner before), then
    cancel those left, and return once all have ended."""
    tasks = list(tasks)
    if not tasks:
        return
    await asyncio.wait(tasks, timeout=wait_s)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
