"""A node's Plotter (grader/node/drawing.py; the drawing is grader/plots.py): the toy's plots
drawn in a process of their own at a lower CPU priority, byte for byte what the exercise
draws in process; a drawing that fails or a process that dies is a PlotError and the next
drawing works; a node killed with SIGKILL leaves no plotting process behind. Processes are
found in /proc (procs.py), by their parent."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from procs import alive, processes

from grader.exercise import catalog
from grader.node import DRAWING_LIMIT_S, Plotter, reference_preview
from grader.plots import PLOTS_NICE, PlotError, draw_pngs
from grader.store import PREVIEW_DATA

pytestmark = pytest.mark.service

PLOTTING = "grader.plots import serve_plots"  # in a plotting process's command line


def plotting(parent: int) -> dict[int, int]:
    """The live plotting processes among the children of `parent`: pid -> niceness."""
    return {
        p.pid: p.nice
        for p in processes()
        if p.ppid == parent and p.state != "Z" and PLOTTING in p.command
    }


@pytest.fixture(scope="module")
def gspo():
    return catalog()["gspo"]


@pytest.fixture(scope="module")
def toy(gspo) -> dict:
    """The reference's toy result, as a report's artifacts keep it."""
    return json.loads(reference_preview(gspo, draw_pngs)[PREVIEW_DATA])["data"]


def test_the_plotter_draws_the_exercises_plots_in_a_process_of_lower_priority(gspo, toy):
    before = set(plotting(os.getpid()))
    plotter = Plotter()
    try:
        assert plotter(gspo, toy) == draw_pngs(gspo, toy)  # the same bytes as in process
        drawing = {pid: nice for pid, nice in plotting(os.getpid()).items() if pid not in before}
        assert list(drawing.values()) == [min(19, os.nice(0) + PLOTS_NICE)], drawing
    finally:
        plotter.close()
    assert not any(alive(pid) for pid in drawing)  # closed: the process has ended


def test_a_failed_drawing_is_a_plot_error_and_a_dead_plotting_process_is_started_again(gspo, toy):
    before = set(plotting(os.getpid()))
    plotter = Plotter()
    try:
        with pytest.raises(PlotError, match="could not be drawn"):
            plotter(gspo, {"curves": "not a curve"})
        assert set(plotter(gspo, toy)) == {plot.name for plot in gspo.plots}
        (pid,) = set(plotting(os.getpid())) - before
        os.kill(pid, signal.SIGKILL)  # as if the OOM killer took it while idle
        while alive(pid):
            time.sleep(0.05)
        try:  # seen dead, and started again at once; or still ending, and found dead now
            first = plotter(gspo, toy)
        except PlotError as error:
            assert "ended while drawing" in str(error)
            first = plotter(gspo, toy)
        assert first == draw_pngs(gspo, toy)
    finally:
        plotter.close()


PREVIEWS = """
import json, sys, time
from grader.exercise import catalog
from grader.node import Plotter, reference_preview
from grader.plots import draw_pngs
gspo = catalog()["gspo"]
plotter = Plotter()
plotter(gspo, json.loads(sys.stdin.read()))  # the plotting process started and warmed up
began = time.thread_time()
there = reference_preview(gspo, plotter)
plotter_s = time.thread_time() - began
plotter.close()
began = time.thread_time()
here = reference_preview(gspo, draw_pngs)
print(json.dumps([plotter_s, time.thread_time() - began, there == here]))
"""


def test_the_plotter_runs_a_reference_preview_in_its_own_process(toy):
    """The toy's run through the reference (its first run in a process costs seconds of
    torch) costs the node's process nothing: a fresh node's CPU while its Plotter makes the
    preview stays far below what the same preview costs it made in process afterwards, and
    the two previews are alike byte for byte."""
    done = subprocess.run(
        [sys.executable, "-c", PREVIEWS], input=json.dumps(toy), capture_output=True,
        text=True, timeout=300, check=True,
    )  # fmt: skip
    plotter_s, in_process_s, same = json.loads(done.stdout.splitlines()[-1])
    assert same
    assert plotter_s < in_process_s / 4, (plotter_s, in_process_s)


LOOPING = """
def run_toy(impl):
    return {}

def render_plots(result, out_dir):
    while True:
        pass
"""


def test_a_drawing_past_its_limit_is_killed_and_the_next_one_is_drawn(gspo, toy, tmp_path):
    (tmp_path / "experiment.py").write_text(LOOPING)
    looping = dataclasses.replace(gspo, root=tmp_path, id="looping")
    plotter = Plotter(limit_s=3.0)
    try:
        started = time.monotonic()
        with pytest.raises(PlotError, match="more than 3 s"):
            plotter(looping, toy)
        assert time.monotonic() - started < 3.0 + 10.0  # killed, not waited for
        plotter.limit_s = DRAWING_LIMIT_S  # a new process's start and imports fit in this
        assert plotter(gspo, toy) == draw_pngs(gspo, toy)
    finally:
        plotter.close()


NODE = """
import sys
import threading
from grader.exercise import catalog
from grader.node import Plotter, reference_preview
plotter = Plotter()
reference_preview(catalog()["gspo"], plotter)
print("drawn", flush=True)
sys.stdin.read()
"""


def test_a_node_killed_leaves_no_plotting_process_behind():
    with subprocess.Popen(
        [sys.executable, "-c", NODE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the killed node's resource tracker reports its leftovers
        text=True,
    ) as node:
        try:
            assert node.stdout.readline().strip() == "drawn"
            drawing = list(plotting(node.pid))
            assert len(drawing) == 1, drawing
            node.kill()
            node.wait(timeout=10)
            deadline = time.monotonic() + 10
            while alive(drawing[0]) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not alive(drawing[0]), "the plotting process outlived its node"
        finally:
            node.kill()


def mapped(pid: int) -> str:
    """The files a process has mapped (its loaded shared libraries among them)."""
    return (Path("/proc") / str(pid) / "maps").read_text()


def started_child(plotter: Plotter) -> int:
    """Start the plotter's process; its pid."""
    before = set(plotting(os.getpid()))
    plotter.start()
    (pid,) = set(plotting(os.getpid())) - before
    return pid


def test_a_started_plotter_imports_matplotlib_and_its_experiments_before_any_drawing(gspo, toy):
    """What a node's first plot would otherwise wait for: a new interpreter's matplotlib and
    torch (the experiment imports it), loaded while the node starts; a plotting process loads
    nothing of the node's database layers."""
    bare, warm = Plotter(), Plotter(preload=[gspo.experiment])
    try:
        bare_pid, warm_pid = started_child(bare), started_child(warm)
        deadline = time.monotonic() + 120
        while not all("ft2font" in mapped(pid) for pid in (bare_pid, warm_pid)) or (
            "libtorch" not in mapped(warm_pid)
        ):
            assert time.monotonic() < deadline, "the preloads were not imported"
            time.sleep(0.2)
        for pid in (bare_pid, warm_pid):
            assert "psycopg" not in mapped(pid) and "sqlalchemy" not in mapped(pid)
        assert "libtorch" not in mapped(bare_pid)  # no experiment to preload
        assert warm(gspo, toy) == draw_pngs(gspo, toy)  # the first drawing, in that process
        assert set(plotting(os.getpid())) == {bare_pid, warm_pid}  # it drew in its own
    finally:
        bare.close()
        warm.close()


def test_closing_a_plotter_still_importing_its_preloads_ends_it_at_once(tmp_path):
    """A node stopped right after it started does not wait for its plotting process to
    finish importing (here an experiment whose import takes a minute)."""
    slow = tmp_path / "experiment.py"
    slow.write_text("import time\ntime.sleep(60)\n")
    plotter = Plotter(preload=[slow])
    pid = started_child(plotter)
    started = time.monotonic()
    plotter.close()
    assert time.monotonic() - started < 5.0  # not the minute it imports for
    assert not alive(pid)


SLOW = """
import time

def run_toy(impl):
    return {}

def render_plots(result, out_dir):
    time.sleep(60)
"""


def test_an_interrupted_plotter_ends_its_drawing_at_once_and_draws_no_more(gspo, toy, tmp_path):
    """A stopping node does not wait for a drawing under way: its plots are drawn later."""
    (tmp_path / "experiment.py").write_text(SLOW)
    slow = dataclasses.replace(gspo, root=tmp_path, id="slow")
    plotter = Plotter()
    failed = []

    def draw():
        try:
            plotter(slow, toy)
        except PlotError as error:
            failed.append(error)

    drawing = threading.Thread(target=draw)
    try:
        pid = started_child(plotter)
        drawing.start()
        time.sleep(1.0)  # the drawing has begun: it sleeps for a minute
        started = time.monotonic()
        plotter.interrupt()
        drawing.join(30)
        assert time.monotonic() - started < 5.0 and len(failed) == 1
        assert not alive(pid)
        with pytest.raises(PlotError, match="stopped"):
            plotter(gspo, toy)
        before = set(plotting(os.getpid()))
        plotter.start()
        assert set(plotting(os.getpid())) == before  # no process started again
    finally:
        plotter.close()
