"""A grading node's drawings (grader/node/drawing.py `Drawings`): a graded result's plots are
drawn once per key, and plots that a node never drew (it stopped or died first) are drawn
by a node that starts later, or by a running node's next look; a drawing that failed is not
tried again by the same node."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
from service_fakes import FakeDrawer, FakeGrader
from service_kit import wait_until

from grader.node import GradingNode, Metrics
from grader.plots import PlotError
from grader.store import Admission, Submission

pytestmark = pytest.mark.service

ROOMY = Admission(capacity=100, run_capacity=100, submits_per_student=100, runs_per_client=100)


def submit(store, n: int) -> str:
    """A Submit of the root exercise, queued; its grading id."""
    submission = Submission(
        submission_id=f"{n:032x}",
        kind="submit",
        student="ada",
        client="ada",
        exercise="gspo",
        code=f"# code {n}" + "!" * n,  # each its own toy result, so its own plots
        accepted_at=f"2026-01-01T00:00:{n:02d}+00:00",
    )
    store.admit(submission, f"{n + 1000:032x}", ROOMY)
    return f"{n + 1000:032x}"


class StuckDrawer(FakeDrawer):
    """Never finishes a drawing until released (or closed): a node that dies while drawing."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def __call__(self, exercise, result: dict) -> dict[str, bytes]:
        self.release.wait(30)
        return super().__call__(exercise, result)

    def close(self) -> None:
        self.release.set()


class FailingDrawer(FakeDrawer):
    def __call__(self, exercise, result: dict) -> dict[str, bytes]:
        self.results.append(result)
        raise PlotError("render_plots raised ValueError: no")


@contextlib.contextmanager
def node_with(store, draw, name: str = "node-new") -> Iterator[GradingNode]:
    """A grading node drawing with `draw`, its grader started; closed on exit."""
    node = GradingNode(store, FakeGrader(), Metrics(), name, 1, draw=draw)
    node.grader.start()
    try:
        yield node
    finally:
        node.close()


@pytest.fixture
def undrawn(store):
    """The plots key of a grading finished by a node that never stored its plots."""
    drawer = StuckDrawer()
    with node_with(store, drawer, "node-gone") as node, contextlib.closing(drawer):
        grading_id = submit(store, 1)
        node.run(store.claim(node.name))
        yield store.by_grading(grading_id).grading.plots_key


def test_a_starting_node_draws_the_plots_another_node_never_drew(store, undrawn):
    key = undrawn
    assert key is not None and not store.has_plots(key)
    drawer = FakeDrawer()
    with node_with(store, drawer) as node:
        node.start()
        wait_until(lambda: store.has_plots(key))
    assert {"ratios": [1.0, 1.5, 0.5], "loss": -0.11} in drawer.results  # beside the previews
    assert store.plot_png(key, "curves") is not None


def test_a_running_node_looks_only_at_results_finished_a_while_ago(store, undrawn):
    key = undrawn
    with node_with(store, FakeDrawer()) as node:
        assert node.drawings.draw_missing(after_s=3600) == 0  # it may still be drawn
        assert not store.has_plots(key)
        assert node.drawings.draw_missing(after_s=0) == 1
        assert store.has_plots(key) and node.drawings.draw_missing(after_s=0) == 0


def test_plots_that_failed_to_draw_are_not_tried_again_by_the_same_node(store, undrawn):
    key = undrawn
    drawer = FailingDrawer()
    with node_with(store, drawer) as node:
        assert node.drawings.draw_missing(after_s=0) == 0
        assert node.drawings.draw_missing(after_s=0) == 0
        assert len(drawer.results) == 1 and not store.has_plots(key)
    with node_with(store, FakeDrawer(), name="node-other") as other:  # it tries once more
        assert other.drawings.draw_missing(after_s=0) == 1


def test_a_graded_result_is_drawn_before_a_look_goes_on(store, undrawn):
    key = undrawn
    drawer = StuckDrawer()
    with node_with(store, drawer) as node, contextlib.closing(drawer):
        fresh = submit(store, 2)
        node.run(store.claim(node.name))  # its plots wait for the drawer
        assert node.drawings.draw_missing(after_s=0) == 0  # so the look stops at once
        assert not store.has_plots(key)
        drawer.release.set()
        wait_until(lambda: store.has_plots(store.by_grading(fresh).grading.plots_key))
        wait_until(lambda: node.drawings.draw_missing(after_s=0) == 1)
        assert store.has_plots(key)
