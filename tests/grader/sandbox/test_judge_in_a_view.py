"""The judge itself in a read-only view of the host, as root and as an unprivileged user.

The interpreter of this machine lies below a 0700 /root, which a worker's unprivileged uid
cannot traverse; in a view whose parents are world-traversable, every level can really run:
bubblewrap and the rlimits fallback, spawned and forked, for a root judge (workers on uids
60000+) and for a judge running as uid 65534 (workers keep its uid, in user namespaces of
their own). The whole adversarial suite then runs once more with that unprivileged judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from grader.sandbox import running_as_root

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.usefixtures("bwrap_level")]

NOBODY = 65534
OTHER_GID = 10001  # a gid unlike the uid, as an image's user may have

LEVELS = textwrap.dedent(
    """
    import json, os, sys, time
    from grader.sandbox import Level, Limits, WorkerPool, detect_isolation, spawn_worker
    from grader.sandbox.remote import open_student
    limits = Limits(call_wall_seconds=5, grading_wall_seconds=20)
    out = {"level": detect_isolation().level.name, "workers": {}}
    for level in (Level.BWRAP, Level.RLIMITS):
        w = spawn_worker(limits, level=level, worker_dir=sys.argv[1], script="id.py", args=[])
        deadline = time.monotonic() + 20
        while w.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        text, _ = w.take_output()
        out["workers"][level.name] = [w.isolation, text.split(), w.exit_description(), w.uid]
        w.kill()
    source = "import os\\ndef f():\\n    return [os.getuid(), open('/proc/self/status').read()]\\n"
    with WorkerPool(0, limits, zygote=True) as pool:
        with open_student(source, functions=("f",), pool=pool) as student:
            out["forked"] = [student.isolation, student.f(), student.worker.forked]
    print(json.dumps(out))
    """
)
# what a worker script prints: its uids, whether it sees the repository, its environment
ID_SCRIPT = (
    "import os\nprint(os.getuid(), os.path.exists({repo!r}), ','.join(sorted(os.environ)))\n"
)
MINIMAL_ENV = {"PATH", "HOME", "LANG", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PWD"}


def _run_in_view(kit, uid, binds, command, timeout, gid=None):
    argv = [*kit.view_argv(uid, binds, gid), *command]
    env = {"PATH": os.environ["PATH"], "HOME": "/tmp", "LANG": "C.UTF-8"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize(
    ("uid", "gid"),
    [(None, None), (NOBODY, None), (NOBODY, OTHER_GID)],
    ids=["root-judge", "unprivileged-judge", "unprivileged-judge-gid-unlike-uid"],
)
def test_every_level_runs_and_says_what_it_is(kit, tmp_path, uid, gid):
    """gid unlike uid: a forked worker maps each into its user namespace on its own."""
    if not running_as_root():
        pytest.skip("a view with another uid needs root to set it up")
    reference = str(kit.repo / "reference" / "gspo.py")
    folder = kit.write_scripts(tmp_path / "w", **{"id.py": ID_SCRIPT.format(repo=reference)})
    command = [sys.executable, "-c", LEVELS, str(folder)]
    done = _run_in_view(kit, uid, [folder], command, timeout=180, gid=gid)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["level"] == "BWRAP", done.stderr[-2000:]
    bwrap, rlimits = out["workers"]["BWRAP"], out["workers"]["RLIMITS"]
    assert bwrap[1][:2] == [str(NOBODY), "False"] and bwrap[2] == "exited with status 0"
    assert rlimits[0].startswith("RLIMITS ONLY") and rlimits[2] == "exited with status 0"
    assert rlimits[1][1] == "True"  # no namespaces at this level: the file system is visible
    for seen in (bwrap[1], rlimits[1]):  # no secret of the judge's environment at any level
        assert set(seen[2].split(",")) <= MINIMAL_ENV
    if uid is None:  # a root judge gives each worker a host uid of its own
        assert 60000 <= bwrap[3] < 61000 and rlimits[1][0] == str(rlimits[3]) != "0"
    else:  # an unprivileged judge's workers keep its uid
        assert bwrap[3] is None and rlimits[1][0] == str(NOBODY) and "judge's" in bwrap[0]
    isolation_text, (inside_uid, status), forks = out["forked"]
    assert forks and isolation_text.startswith("bwrap (zygote fork)"), done.stderr[-2000:]
    assert inside_uid == NOBODY and "\nCapEff:\t0000000000000000\n" in status
    assert "\nNoNewPrivs:\t1\n" in status


def test_the_adversarial_suite_holds_for_an_unprivileged_judge(kit):
    """Every attack, against forked and spawned workers of a judge running as uid 65534; no
    test may skip (a skip would hide an attack that was never tried)."""
    if not running_as_root():
        pytest.skip("already unprivileged: the suite itself runs as this user")
    suite = "tests/grader/sandbox/test_adversarial.py"
    command = [sys.executable, "-m", "pytest", suite, "-q", "-p", "no:cacheprovider", "-rs"]
    done = _run_in_view(kit, NOBODY, [], command, timeout=1200)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary, summary
