"""Checks for tier tests: failures that say what was expected, what came, and by how much.

Tier files of any exercise import these (`from grader.checks import expect_close, fail`).
Every check fails through `fail()`, which calls `pytest.fail(..., pytrace=False)`: the report
then carries exactly the sentence written for the student, never pytest's assertion
introspection (which would print the tensors of hidden cases).

A message part may be a function (`Text`): hints and input listings cost real work, so a
check calls it only when it fails. docs/instructors.md has a reference of every function.

Device checks: `device_note(check, "meta")` runs a check on a device where code that reads
tensor values cannot run; it tells a failure caused by that device alone (inconclusive: the
caller reports a note) from a real one (the test fails).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from grader.sandbox import StudentError

Text = str | Callable[[], str]

# (rtol, atol) for comparing a result computed in `dtype` with a float64 reference. Half types
# carry ~3 (bfloat16) or ~4 (float16) significant digits, so the final rounding alone costs
# about 4e-3 and 5e-4; the bounds leave room for summing in the half type.
TOLERANCE = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-6),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}
MIN_DIGITS, MAX_DIGITS = 6, 17  # significant digits shown; 17 tells any two float64 apart


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for a result in `dtype` against a float64 reference."""
    return TOLERANCE[dtype]


def text(part: Text) -> str:
    """A message part as a string (a function is called now, on failure)."""
    return part() if callable(part) else part


def fail(message: str) -> None:
    """Fail the test with exactly this message (no traceback, no tensor introspection)."""
    pytest.fail(message, pytrace=False)


def expect(condition: bool, message: Text) -> None:
    if not condition:
        fail(text(message))


def shape_text(shape) -> str:
    return "[" + ", ".join(str(int(n)) for n in shape) + "]"


def kind_of(value) -> str:
    """How a returned value looks, in the words of a failure message."""
    if isinstance(value, Tensor):
        return f"a Tensor of shape {shape_text(value.shape)} and dtype {value.dtype}"
    return f"a {type(value).__name__} ({value!r:.60})"


def expect_tensor(
    value, name: str, shape, dtype=None, device=None, why: str = "", like: str = ""
) -> Tensor:
    """A student's result is a Tensor of this shape (and dtype and device, when given).

    `why` ends the shape message (", one ratio per response"); `like` names the input whose
    dtype and device the result must keep ("logp")."""
    of = f", the {{}} of {like}" if like else ""
    if not isinstance(value, Tensor):
        fail(f"{name} returned {kind_of(value)}; expected a torch.Tensor{why}")
    if tuple(value.shape) != tuple(shape):
        fail(f"{name} returned shape {shape_text(value.shape)}; expected {shape_text(shape)}{why}")
    if dtype is not None and value.dtype != dtype:
        fail(f"{name} returned dtype {value.dtype}; expected {dtype}{of.format('dtype')}")
    if device is not None and value.device.type != torch.device(device).type:
        wanted = torch.device(device).type
        fail(f"{name} returned a tensor on {value.device}; expected {wanted}{of.format('device')}")
    return value


def show(t: Tensor, digits: int = 4, limit: int = 120) -> str:
    """A compact, truncated text of a small tensor for visible failure messages."""
    values = t.detach().to("cpu", torch.float64) if t.is_floating_point() else t.detach().cpu()
    shown = str(torch.round(values, decimals=digits).tolist()) if values.is_floating_point() else ""
    shown = shown or str(values.tolist())
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def leaf(t: Tensor) -> Tensor:
    """A fresh copy that collects its own gradient."""
    return t.detach().clone().requires_grad_(True)


# ---- comparing numbers ----------------------------------------------------------------------
def distinct(got: float, want: float) -> tuple[str, str]:
    """Both values with the fewest significant digits (at least 6) that tell them apart."""
    for digits in range(MIN_DIGITS, MAX_DIGITS + 1):
        a, b = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if a != b:
            return a, b
    return f"{got!r}", f"{want!r}"


def difference(got: float, want: float, rtol: float, atol: float) -> str:
    """`came out X; expected Y (differs by D, R relative; tolerance rtol r, atol a)`."""
    if not math.isfinite(want):  # a comparison with a result that is itself nan or inf
        return f"came out {got:.10g}; expected {want} (not a finite number: nothing matches it)"
    if math.isnan(got) or math.isinf(got):
        return f"came out {got}; expected {want:.10g} (a finite number)"
    shown_got, shown_want = distinct(got, want)
    gap = abs(got - want)
    relative = f", {gap / abs(want):.1e} relative" if want != 0 and math.isfinite(want) else ""
    bounds = [f"rtol {rtol:g}"] * bool(rtol) + [f"atol {atol:g}"] * bool(atol)
    allowed = f"; tolerance {', '.join(bounds)}" if bounds else "; they must be equal"
    return f"came out {shown_got}; expected {shown_want} (differs by {gap:.1e}{relative}{allowed})"


def worst_entry(actual: Tensor, expected: Tensor) -> tuple[tuple[int, ...], float, float]:
    """Index, actual and expected value of the entry farthest from expected (NaN counts most)."""
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    error = (a - e).abs()
    error = torch.where(torch.isnan(error), torch.full_like(error, float("inf")), error)
    error = torch.where(a == e, torch.zeros_like(error), error)  # equal infinities are fine
    flat = int(error.reshape(-1).argmax()) if error.numel() else 0
    index = (
        tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)) if a.dim() else ()
    )
    return index, float(a.reshape(-1)[flat]), float(e.reshape(-1)[flat])


def is_close(actual: Tensor, expected: Tensor, rtol: float, atol: float) -> bool:
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    return bool(torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=False))


def expect_close(
    actual: Tensor,
    expected: Tensor,
    what: str,
    rtol: float,
    atol: float,
    context: Text = "",
    hint: Text = "",
    hidden: bool = False,
) -> None:
    """Fail when `actual` is not close to `expected`.

    A visible case names the worst entry with both values, their difference and the
    tolerance; a hidden one says only how many entries are off, never a value. `hint` should
    name a mistake only after checking the submission's own values against it."""
    if tuple(actual.shape) != tuple(expected.shape):
        fail(f"{what} has shape {shape_text(actual.shape)}; expected {shape_text(expected.shape)}")
    if is_close(actual, expected, rtol, atol):
        return
    if hidden:
        a, e = actual.detach().double().cpu(), expected.detach().double().cpu()
        off = ~torch.isclose(a, e, rtol=rtol, atol=atol)
        message = f"{what} is off in {int(off.sum())} of {off.numel()} entries"
    else:
        index, got, want = worst_entry(actual, expected)
        where = f" at index {list(index)}" if index else ""
        message = f"{what}{where} {difference(got, want, rtol, atol)}"
    hint, context = text(hint), text(context)
    message += f". {hint[:1].upper()}{hint[1:]}" if hint else ""
    fail(message + (f"; {context}" if context else ""))


# ---- devices --------------------------------------------------------------------------------
MIXED_DEVICES = ("expected device", "same device", "two devices")  # torch's words for mixing


def mixes_devices(error: BaseException) -> bool:
    """The error says that tensors on two devices met in one operation."""
    message = str(error).lower()
    return any(words in message for words in MIXED_DEVICES)


def device_note(check: Callable[[str], object], device: str, proof: str = "cpu") -> str:
    """Run `check(device)`; "" when it passes, else a note that the check was inconclusive.

    On `meta` (shapes without data) code that reads values (`.item()`, `if` on a tensor,
    boolean indexing) cannot run, although it is right on every real device. So when the
    submission raises on `device` but `check(proof)` passes on real data, the failure is the
    device's own and the note says so. Everything else stays a failure: a timeout or crash,
    an error that mixes devices (a tensor created without `device=` breaks on a GPU too),
    a failed check, or an error on `proof` as well (raised from `check(proof)`).
    """
    try:
        check(device)
        return ""
    except StudentError as error:
        if error.kind != "exception":
            raise  # timeout, crash, not loaded: never the device's fault
        if mixes_devices(error):
            fail(
                f"on {device} tensors your code raised {error}: it combines the inputs with a "
                "tensor made on another device; create new tensors on the inputs' device "
                "(torch.zeros_like(x), x.new_zeros(...), device=x.device)"
            )
        check(proof)  # fails or raises if the code is wrong on real data too
        return (
            f"inconclusive on the {device} device: your code raised {error} there, which "
            f"happens when code reads tensor values; it ran correctly on {proof}, so this "
            "costs no points"
        )
