"""The proxy: calls through the sandbox behave, to test code, like calls of a local module.

The submission is the reference solution plus a few helpers that return other shapes of
result, mutate inputs, fail, hang or kill their own process. One proxy serves most tests
(each worker start imports torch, which takes seconds on a loaded machine).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
import torch

from grader.sandbox import (
    Limits,
    StudentCrash,
    StudentError,
    StudentLoadError,
    StudentTimeout,
    WorkerPool,
)
from grader.sandbox.remote import CRASHES_BEFORE_NOT_RUN, open_student

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("time_guard")]
GUARD_S = 90  # per test: a worker start can take 20 s on a busy machine, a call 4 s

REPO = Path(__file__).resolve().parents[3]
REFERENCE = (REPO / "reference" / "gspo.py").read_text()
HELPERS = """

def detached_ratio(logp, old_logp, mask):
    return sequence_ratio(logp, old_logp, mask).detach()


def float_loss(logp, old_logp, advantages, mask):
    return float(gspo_loss(logp, old_logp, advantages, mask))


def ratio_and_loss(logp, old_logp, advantages, mask):
    return sequence_ratio(logp, old_logp, mask), gspo_loss(logp, old_logp, advantages, mask), None


def scale_in_place(x, factor=2.0):
    x.mul_(factor)


def shout(x):
    print("shouting", x)
    return x


def _divide(x):
    return x // 0  # BOOM-LINE


def picky(x):
    if x == 2:
        raise ValueError("not two")
    return x * 10


class _Fragile(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.sum()

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("no gradient here")


def fragile_sum(x):
    return _Fragile.apply(x)


def boom(x):
    return _divide(x)


def spin():
    while True:
        pass


def die(status):
    import os
    os._exit(status)


def forge(valid):
    import json, os, struct
    if valid:  # a well-formed frame that claims to be the reply
        header = json.dumps({"v": {"dict": {"ok": True, "result": 42}}, "t": []}).encode()
    else:
        header = b"not json at all"
    os.write(3, struct.pack(">I", len(header)) + header)
    return 0
"""
SOURCE = REFERENCE + HELPERS
BOOM_LINE = next(i for i, line in enumerate(SOURCE.splitlines(), 1) if "BOOM-LINE" in line)
FUNCTIONS = (
    "sequence_ratio",
    "gspo_loss",
    "detached_ratio",
    "float_loss",
    "ratio_and_loss",
    "scale_in_place",
    "shout",
    "boom",
    "spin",
    "die",
    "forge",
    "picky",
    "fragile_sum",
)
# one worker serves the whole module, so its "grading" lasts as long as the module; each
# test's own time is bounded by GUARD_S
LIMITS = Limits(cpu_seconds=120, call_wall_seconds=4, grading_wall_seconds=900)


@pytest.fixture(scope="module")
def student():
    with open_student(SOURCE, functions=FUNCTIONS, limits=LIMITS) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def reference():
    path = REPO / "reference" / "gspo.py"
    spec = importlib.util.spec_from_file_location("gspo_reference_for_proxy_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(B: int = 4, L: int = 8, dtype=torch.float32, device="cpu"):
    """Two copies of the same inputs (logp requiring grad, old_logp too), remote and local."""
    gen = torch.Generator().manual_seed(B * 100 + L)
    logp = -torch.rand(B, L, generator=gen) * 2  # [B, L]
    old = logp + 0.2 * torch.randn(B, L, generator=gen)  # [B, L]
    adv = torch.randn(B, generator=gen)  # [B]
    mask = torch.ones(B, L)  # [B, L]
    mask[0, L // 2 :] = 0
    mask[-1] = 0  # an empty response

    def copy():
        lp = logp.to(dtype=dtype, device=device).requires_grad_()
        return lp, old.to(dtype=dtype, device=device).requires_grad_(), adv.to(device), mask

    return copy(), copy()


def test_loss_and_gradients_equal_a_local_call(student, reference):
    (lp, old, adv, mask), (lp_ref, old_ref, adv_ref, mask_ref) = inputs()
    loss = student.gspo_loss(lp, old, adv, mask)
    expected = reference.gspo_loss(lp_ref, old_ref, adv_ref, mask_ref)
    assert type(loss) is torch.Tensor and loss.shape == () and loss.dtype == torch.float32
    assert loss.requires_grad and loss.grad_fn is not None
    assert torch.equal(loss.detach(), expected.detach())
    loss.backward()
    expected.backward()
    assert torch.equal(lp.grad, lp_ref.grad)
    assert old.grad is None and old_ref.grad is None  # the reference froze old_logp


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_dtype_and_ratio_values_match(student, reference, dtype):
    (lp, old, _, mask), (lp_ref, old_ref, _, mask_ref) = inputs(B=3, L=5, dtype=dtype)
    ratio = student.sequence_ratio(lp, old, mask)
    expected = reference.sequence_ratio(lp_ref, old_ref, mask_ref)
    assert ratio.dtype == dtype and ratio.shape == (3,)
    assert torch.equal(ratio.detach(), expected.detach())
    grad = torch.arange(1.0, 4.0, dtype=dtype)
    ratio.backward(grad)
    expected.backward(grad)
    assert torch.equal(lp.grad, lp_ref.grad)


def test_meta_tensors_come_back_as_meta(student):
    lp = torch.empty(4, 6, device="meta", requires_grad=True)
    ratio = student.sequence_ratio(
        lp, torch.empty(4, 6, device="meta"), torch.empty(4, 6, device="meta")
    )
    assert ratio.device.type == "meta" and ratio.shape == (4,) and ratio.requires_grad


def test_detached_float_and_tuple_results(student, reference):
    (lp, old, adv, mask), (lp_ref, old_ref, adv_ref, mask_ref) = inputs()
    detached = student.detached_ratio(lp, old, mask)
    assert not detached.requires_grad and detached.grad_fn is None
    value = student.float_loss(lp, old, adv, mask)
    assert type(value) is float
    assert value == reference.gspo_loss(lp_ref, old_ref, adv_ref, mask_ref).item()
    ratio, loss, nothing = student.ratio_and_loss(lp, old, adv, mask)
    assert nothing is None and ratio.requires_grad and loss.requires_grad
    (ratio.sum() + loss).backward()
    (reference.sequence_ratio(lp_ref, old_ref, mask_ref).sum() + reference.gspo_loss(
        lp_ref, old_ref, adv_ref, mask_ref
    )).backward()  # fmt: skip
    assert torch.equal(lp.grad, lp_ref.grad)


def test_no_grad_mode_is_mirrored(student):
    (lp, old, adv, mask), _ = inputs()
    with torch.no_grad():
        loss = student.gspo_loss(lp, old, adv, mask)
    assert not loss.requires_grad


def test_double_backward_says_it_is_not_supported(student):
    (lp, old, adv, mask), _ = inputs()
    loss = student.gspo_loss(lp, old, adv, mask)
    (grad,) = torch.autograd.grad(loss, lp, create_graph=True)
    assert grad.requires_grad  # as it would locally: it depends on lp
    with pytest.raises(RuntimeError, match=r"double backward .* is not supported"):
        grad.sum().backward()


def test_in_place_mutation_is_mirrored(student):
    x = torch.ones(2, 3)
    version = x._version
    assert student.scale_in_place(x, factor=3.0) is None
    assert torch.equal(x, torch.full((2, 3), 3.0)) and x._version > version


def test_the_gradient_of_a_loss_comes_with_the_call(student, reference):
    """loss.backward() sends output gradient 1: the worker answered it with the call."""
    (lp, old, adv, mask), (lp_ref, old_ref, adv_ref, mask_ref) = inputs()
    loss = student.gspo_loss(lp, old, adv, mask)
    requests = student.requests
    loss.backward()
    assert student.requests == requests
    reference.gspo_loss(lp_ref, old_ref, adv_ref, mask_ref).backward()
    assert torch.equal(lp.grad, lp_ref.grad) and old.grad is None


def test_the_gradient_of_a_sum_comes_with_the_call_too(student, reference):
    (lp, old, _, mask), (lp_ref, old_ref, _, mask_ref) = inputs(B=3, L=5)
    ratio = student.sequence_ratio(lp, old, mask)
    requests = student.requests
    ratio.sum().backward()
    assert student.requests == requests
    reference.sequence_ratio(lp_ref, old_ref, mask_ref).sum().backward()
    assert torch.equal(lp.grad, lp_ref.grad)


def test_other_output_gradients_ask_the_worker(student, reference):
    (lp, old, _, mask), (lp_ref, old_ref, _, mask_ref) = inputs(B=3, L=5)
    ratio = student.sequence_ratio(lp, old, mask)
    requests = student.requests
    weights = torch.tensor([1.0, -2.0, 0.5])
    ratio.backward(weights)
    assert student.requests == requests + 1
    reference.sequence_ratio(lp_ref, old_ref, mask_ref).backward(weights)
    assert torch.equal(lp.grad, lp_ref.grad)


def test_a_failing_backward_fails_where_backward_runs(student):
    x = torch.ones(3, requires_grad=True)
    total = student.fragile_sum(x)  # the call itself succeeds
    with pytest.raises(StudentError, match="no gradient here"):
        total.backward()
    assert student.shout("still here") == "still here"


def test_a_function_that_timed_out_twice_is_not_run_again():
    """The first call waits call_wall_seconds, the next retry_wall_seconds, then no more:
    code that never returns gets its verdict in seconds. Other functions still run."""
    limits = LIMITS.replace(call_wall_seconds=2, retry_wall_seconds=1)
    with open_student(SOURCE, functions=FUNCTIONS, limits=limits) as proxy:
        errors, waits = [], []
        for _ in range(3):
            began = time.monotonic()
            with pytest.raises(StudentTimeout) as info:
                proxy.spin()
            errors.append(str(info.value))
            waits.append(time.monotonic() - began)
        assert "within 2 s" in errors[0] and "within 1 s" in errors[1], errors
        assert "not run: spin timed out earlier in this grading" in errors[2]
        assert waits[2] < 0.5 and proxy.restarts == 1, waits  # no worker started for it
        assert proxy.shout(3) == 3 and proxy.restarts == 2


def test_a_function_that_keeps_killing_its_worker_is_not_run_again():
    """A crash costs a restart, not a limit's wait, so a function may crash its worker
    CRASHES_BEFORE_NOT_RUN times; then its calls fail at once, and the restarts that the
    other functions' calls need (MAX_RESTARTS in all) are not used up by it."""
    pool = WorkerPool(1, LIMITS)
    with pool, open_student(SOURCE, functions=FUNCTIONS, pool=pool) as proxy:
        for _ in range(CRASHES_BEFORE_NOT_RUN):
            with pytest.raises(StudentCrash, match="exited with status 3"):
                proxy.die(3)
        restarts = proxy.restarts
        with pytest.raises(StudentCrash) as info:
            proxy.die(3)
        times = f"{CRASHES_BEFORE_NOT_RUN} times"
        assert f"not run: die crashed {times} earlier in this grading" in str(info.value)
        assert info.value.kind == "crash" and proxy.restarts == restarts  # none started
        assert proxy.shout(3) == 3 and proxy.restarts == restarts + 1


def test_student_exception_has_student_lines_only(student):
    with pytest.raises(StudentError) as info:
        student.boom(7)
    error = info.value
    assert type(error) is StudentError and error.type_name == "ZeroDivisionError"
    assert error.line == BOOM_LINE
    where = f"(submission.py, line {BOOM_LINE})"
    assert str(error) == f"ZeroDivisionError: integer division or modulo by zero {where}"
    assert f'File "submission.py", line {BOOM_LINE}, in _divide' in error.student_traceback
    assert "in boom" in error.student_traceback
    for leak in ("grader", "serve.py", "calls.py", "proxy.py", "site-packages"):
        assert leak not in error.student_traceback


def test_printed_output_is_captured(student):
    assert student.shout(5) == 5
    seen = ""
    deadline = time.monotonic() + 10  # the launcher drains the pipes on its own threads
    while "shouting 5" not in seen and time.monotonic() < deadline:
        time.sleep(0.02)
        text, truncated = student.output()
        seen = text
    assert "shouting 5" in seen and not truncated


def test_timeout_kills_the_worker_and_the_next_call_recovers(student):
    restarts = student.restarts
    (lp, old, adv, mask), _ = inputs()
    loss = student.gspo_loss(lp, old, adv, mask)  # its graph lives in the worker about to die
    with pytest.raises(StudentTimeout) as info:
        student.spin()
    first_limit = LIMITS.call_limit_seconds(0, after_timeout=False)  # spin() has no tensors
    assert info.value.kind == "timeout" and f"within {first_limit:g} s" in str(info.value)
    with pytest.raises(StudentCrash, match="graph is gone"):
        loss.backward(torch.tensor(2.0))  # not the gradient that came with the call
    assert torch.equal(student.ratio_and_loss(lp, old, adv, mask)[1], loss.detach())
    assert student.restarts == restarts + 1


def test_os_exit_is_a_crash_and_the_next_call_recovers(student):
    restarts = student.restarts
    with pytest.raises(StudentCrash) as info:
        student.die(3)
    assert "exited with status 3" in str(info.value) and info.value.kind == "crash"
    assert student.shout("again") == "again"
    assert student.restarts == restarts + 1


def test_syntax_error_reported_with_line_and_caret_through_a_pool():
    source = "import torch\n\ndef sequence_ratio(logp, old_logp, mask):\n    return (logp\n"
    functions = ("sequence_ratio", "gspo_loss")
    with WorkerPool(0, LIMITS) as pool, open_student(source, functions=functions, pool=pool) as bad:
        error = bad.load_error
        assert error is not None and error.kind == "syntax_error" and error.line == 4
        assert "^" in error.detail and "submission.py" in error.message
        with pytest.raises(StudentLoadError) as info:
            bad.sequence_ratio(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1))
        assert info.value.kind == "syntax_error" and error.message in str(info.value)
        assert bad.isolation


def test_missing_function_is_named():
    source = "def sequence_ratio(logp, old_logp, mask):\n    return logp\n"
    functions = ("sequence_ratio", "gspo_loss")
    with open_student(source, functions=functions, limits=LIMITS) as partial:
        error = partial.load_error
        assert error is not None and error.kind == "missing_function"
        assert "gspo_loss" in error.message and "sequence_ratio" not in error.message


@pytest.mark.parametrize("valid", [False, True], ids=["garbage", "forged-reply"])
def test_frames_written_by_student_code_are_a_crash(student, valid):
    restarts = student.restarts
    expected = "answers another request" if valid else "malformed message"
    with pytest.raises(StudentCrash, match=expected):
        student.forge(valid)
    assert student.shout(1) == 1 and student.restarts == restarts + 1


def test_once_any_function_timed_out_every_call_gets_the_short_limit():
    """Two functions that never return: the first waits the grading's first limit, every
    later call retry_wall_seconds; each stops being run after its second timeout."""
    source = SOURCE + "\n\ndef spin_too():\n    while True:\n        pass\n"
    limits = LIMITS.replace(call_wall_seconds=10, call_wall_min_seconds=2, retry_wall_seconds=1)
    with open_student(source, functions=(*FUNCTIONS, "spin_too"), limits=limits) as proxy:
        errors = []
        for function in (proxy.spin, proxy.spin_too, proxy.spin, proxy.spin_too):
            with pytest.raises(StudentTimeout) as info:
                function()
            errors.append(str(info.value))
        assert "within 2 s" in errors[0] and "within 1 s" in errors[1], errors
        assert "within 1 s" in errors[2] and "within 1 s" in errors[3], errors
        with pytest.raises(StudentTimeout, match="not run: spin_too timed out earlier"):
            proxy.spin_too()
        assert proxy.shout(4) == 4  # the rest of the grading goes on


def test_a_calls_limit_grows_with_its_inputs():
    limits = Limits(call_wall_seconds=10, call_wall_min_seconds=3, retry_wall_seconds=1)
    assert limits.call_limit_seconds(60, after_timeout=False) == 3.1
    assert limits.call_limit_seconds(6144, after_timeout=False) == 9.1
    assert limits.call_limit_seconds(6144, after_timeout=True) == 7.1
    assert limits.call_limit_seconds(10**6, after_timeout=False) == 10


STUB = """
def unwritten(x):
    raise NotImplementedError("unwritten is not written yet")


def half_written(x):
    if x < 0:
        raise NotImplementedError("negative x is not handled yet")
    return x


def mixed(x):
    if x == 0:
        raise ValueError("zero")
    raise NotImplementedError("mixed is not written yet")
"""


def test_a_function_that_only_raised_not_implemented_is_answered_in_the_judge():
    functions = ("unwritten", "half_written", "mixed")
    with open_student(STUB, functions=functions, limits=LIMITS) as proxy:
        errors = []
        for _ in range(5):
            with pytest.raises(StudentError) as info:
                proxy.unwritten(1)
            errors.append(info.value)
        # the first 3 went to the worker, the rest were answered here, with the same error
        assert proxy.round_trips == 1 + 3
        assert {(e.type_name, e.message, e.line) for e in errors} == {
            ("NotImplementedError", "unwritten is not written yet", 3)
        }
        assert len({e.student_traceback for e in errors}) == 1
        # a function that returned once is always called
        assert proxy.half_written(1) == 1
        for _ in range(4):
            with pytest.raises(StudentError, match="negative x"):
                proxy.half_written(-1)
        assert proxy.round_trips == 1 + 3 + 5
        # one that raised anything else too
        with pytest.raises(StudentError, match="zero"):
            proxy.mixed(0)
        for _ in range(4):
            with pytest.raises(StudentError, match="mixed is not written"):
                proxy.mixed(1)
        assert proxy.round_trips == 1 + 3 + 5 + 5
