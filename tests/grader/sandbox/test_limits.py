"""Limits: defaults in the range of the established judges, env overrides, validation, and
the limits the launcher sets from outside really reaching the worker."""

from __future__ import annotations

import dataclasses
import json
import resource
import signal

import pytest

from grader.sandbox import GIB, MIB, Limits, LimitsError, StudentCrash, describe_signal
from grader.sandbox.remote import open_student

pytestmark = pytest.mark.usefixtures("time_guard")


def test_defaults_sit_in_the_range_of_judge0_and_prairielearn():
    limits = Limits()
    assert limits.cpu_seconds == 30 and limits.call_wall_seconds == 10
    assert limits.grading_wall_seconds == 60
    assert limits.memory_bytes == 2 * GIB
    assert limits.processes == 64 and limits.open_files == 64
    assert limits.output_bytes == 1 * MIB
    assert limits.file_size_bytes == 16 * MIB and limits.tmpfs_bytes == 64 * MIB


def test_from_env_reads_prefixed_variables_with_size_suffixes():
    env = {
        "GSPO_GRADER_SANDBOX_MEMORY_BYTES": "512M",
        "GSPO_GRADER_SANDBOX_CALL_WALL_SECONDS": "2.5",
        "GSPO_GRADER_SANDBOX_PROCESSES": "none",
        "GSPO_GRADER_SANDBOX_OUTPUT_BYTES": "64K",
        "UNRELATED": "1",
    }
    limits = Limits.from_env(env)
    assert limits.memory_bytes == 512 * MIB
    assert limits.call_wall_seconds == 2.5
    assert limits.processes is None
    assert limits.output_bytes == 64 * 1024
    assert limits.cpu_seconds == Limits().cpu_seconds  # untouched fields keep defaults


def test_keyword_overrides_win_over_the_environment():
    env = {"GSPO_GRADER_SANDBOX_OPEN_FILES": "32"}
    assert Limits.from_env(env, open_files=16).open_files == 16


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"GSPO_GRADER_SANDBOX_MEMORY_BYTES": "lots"}, "not a number"),
        ({"GSPO_GRADER_SANDBOX_CPU_SECONDS": "-1"}, "must be positive"),
        ({"GSPO_GRADER_SANDBOX_OPEN_FILES": "0"}, "must be positive"),
        ({"GSPO_GRADER_SANDBOX_CALL_WALL_SECONDS": "90"}, "exceeds grading_wall_seconds"),
    ],
)
def test_bad_values_fail_at_configuration_time(env, words):
    with pytest.raises(LimitsError, match=words):
        Limits.from_env(env)


def test_limits_are_frozen_and_replace_validates():
    limits = Limits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.cpu_seconds = 1  # type: ignore[misc]
    with pytest.raises(LimitsError):
        limits.replace(memory_bytes=-5)
    with pytest.raises(LimitsError, match="must be a number"):
        Limits(processes=True)  # type: ignore[arg-type]


def test_to_json_carries_every_field_for_the_worker():
    decoded = json.loads(Limits().to_json())
    assert decoded == dataclasses.asdict(Limits())
    assert {"max_message_bytes", "max_tensor_elements", "tmpfs_bytes"} <= decoded.keys()


def test_describe_is_human():
    lines = Limits().describe()
    assert "memory_bytes = 2 GiB" in lines
    assert "call_wall_seconds = 10 s" in lines
    assert "processes = not set" in Limits(processes=None).describe()


_SHOW_RLIMITS = """
import json, resource
names = ["RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE"]
print(json.dumps({n: resource.getrlimit(getattr(resource, n))[0] for n in names}))
"""


@pytest.mark.sandbox
def test_outside_rlimits_reach_the_worker_before_its_own_code(tmp_path, start, kit):
    small_limits = kit.small_limits
    folder = kit.write_scripts(tmp_path / "w", **{"show.py": _SHOW_RLIMITS})
    worker = start(worker_dir=folder, script="show.py", args=[])
    text, _ = kit.read_all_output(worker, timeout=20)
    seen = json.loads(text.strip().splitlines()[-1])
    assert seen["RLIMIT_FSIZE"] == small_limits.file_size_bytes
    assert seen["RLIMIT_CORE"] == 0
    if worker.uid is not None:  # as root each worker has its own uid and NPROC budget
        assert seen["RLIMIT_NPROC"] == small_limits.processes
    else:
        assert seen["RLIMIT_NPROC"] == resource.getrlimit(resource.RLIMIT_NPROC)[0]


@pytest.mark.parametrize(
    ("signum", "cpu_used", "words"),
    [
        (signal.SIGXCPU, 1.0, "killed: CPU time limit"),
        (signal.SIGKILL, 99.0, "killed: CPU time limit"),  # RLIMIT_CPU's hard limit
        (signal.SIGKILL, 0.5, "killed by signal SIGKILL"),
        (signal.SIGXFSZ, 0.0, "killed: file size limit"),
        (signal.SIGSEGV, 0.0, "killed by signal SIGSEGV"),
    ],
)
def test_signals_are_described_in_plain_words(signum, cpu_used, words):
    assert describe_signal(signum, cpu_used, Limits(cpu_seconds=10)) == words


@pytest.mark.sandbox
def test_cpu_time_limit_stops_a_busy_call_and_says_so(kit):
    limits = kit.small_limits.replace(
        cpu_seconds=1.0, call_wall_seconds=30.0, grading_wall_seconds=60.0
    )
    source = "def f():\n    while True:\n        pass\n"
    with (
        open_student(source, functions=("f",), limits=limits) as student,
        pytest.raises(StudentCrash) as caught,
    ):
        student.f()
    assert caught.value.description == "killed: CPU time limit"


_PRINT_THEN_SIGNAL = """
import os, sys
print("before the reply")
sys.stdout.write("y" * 200_000)
os.write(3, b"!")
os.read(3, 1)
"""


@pytest.mark.sandbox
def test_output_printed_before_a_reply_is_there_and_capped(tmp_path, start, kit):
    folder = kit.write_scripts(tmp_path / "w", **{"talk.py": _PRINT_THEN_SIGNAL})
    worker = start(worker_dir=folder, script="talk.py", args=[])
    assert worker.has_spoken(timeout=30)  # the "reply" came: everything before it is in the pipe
    text, truncated = worker.take_output(settle_s=5.0)
    assert text.startswith("before the reply\n") and truncated
    assert len(text.encode()) == kit.small_limits.output_bytes
    assert worker.take_output() == ("", True)  # the flag stays set, the text is not repeated
