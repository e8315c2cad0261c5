"""Which work a grading node's judges take, and at what CPU priority: the one rule that
keeps live gradings fast while regradings run.

    lanes = lanes_of(concurrency=2, live_judges=1, regrade_nice=10)
    # Lanes(live_only=1, shared=1, nice=10)

A node runs one claim loop per judge. `live_only` of them are reserved for live work
(priority 0: a Submit or Run someone waits for): they never claim a regrading, so a live
Submit never waits for a regrading to end. The `shared` loops claim live work first, then
regradings; their judges (and the sandboxed workers those start) run at CPU niceness
`nice`, so when live and regrade gradings compete for the cores, the live ones get them
first. An unprivileged process may lower its priority but never raise it again, so the
niceness is a property of a judge, not of a grading: a live grading that finds every
reserved judge busy runs on a shared judge, at its niceness.

A node of one judge reserves none (else its regradings would never be graded); a node
with `live_judges` at or above its judges keeps one shared loop for the same reason.
Beside these lanes, a node starts a regrading only after a lull in its live work
(`GradingNode(regrade_lull_s=)`, runner.py): priority alone leaves a live grading slower
while another core is busy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lanes:
    """A node's claim loops: `live_only` take live work only, `shared` take any (live
    first), and the shared loops' judges run at niceness `nice` (0: the same as the rest)."""

    live_only: int
    shared: int
    nice: int

    @property
    def loops(self) -> list[bool]:
        """One entry per claim loop: True where it takes live work only."""
        return [True] * self.live_only + [False] * self.shared


def lanes_of(concurrency: int, live_judges: int, regrade_nice: int) -> Lanes:
    """The lanes of a node of `concurrency` judges (see the module docstring)."""
    if concurrency < 1:
        raise ValueError(f"a node needs at least one judge; got {concurrency}")
    reserved = min(live_judges, concurrency - 1)
    return Lanes(live_only=reserved, shared=concurrency - reserved, nice=regrade_nice)


def pool_sizes(lanes: Lanes, pool_size: int) -> tuple[int, int]:
    """How many judges the live-work grader and the shared loops' grader keep, of a node's
    `pool_size` (at least one per claim loop): the shared grader one judge per shared
    loop, the live one the rest (spares included). (pool_size, 0) when the shared judges
    run at the normal priority: then one grader serves every loop."""
    total = max(pool_size, lanes.live_only + lanes.shared)
    if lanes.nice == 0 or lanes.live_only == 0:
        return total, 0
    return total - lanes.shared, lanes.shared
