"""T0 Contract: the two functions can be called the documented way and return what they promise.

Nothing here checks the mathematics in depth (T1 and T2 do); a submission that passes T0 has
the right names, arguments, return types, shapes, dtypes and devices, accepts every mask type,
leaves its inputs alone and lets the gradient reach logp.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from _checks import (
    LOSS_WHY,
    RATIO_WHY,
    Batch,
    call_loss,
    call_ratio,
    expect,
    expect_close,
    expect_tensor,
    make_batch,
    show,
)

pytestmark = pytest.mark.tier("T0")

PARAMETERS = {
    "sequence_ratio": ("logp", "old_logp", "mask"),
    "gspo_loss": ("logp", "old_logp", "advantages", "mask", "clip_eps"),
}
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def clip_batch() -> Batch:
    """Three responses whose loss differs between clip widths 0.1, 0.2 and 0.3.

    Ratios 1.25 (A=+1), 0.85 (A=-1) and 1.1 (A=+0.5): clip 0.2 cuts the first only.
    """
    log_ratio = torch.log(torch.tensor([1.25, 0.85, 1.1], dtype=torch.float64))  # [3]
    old_logp = torch.full((3, 4), -1.0, dtype=torch.float64)  # [3, 4]
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    logp = old_logp + log_ratio.unsqueeze(-1)  # [3, 4]: every token has the response's ratio
    advantages = torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
    return Batch(logp, old_logp, mask, advantages, 0.2, "clip widths")


def student_signature(student, name: str):
    """The submission's signature when the judge can report it, else None.

    Through the sandbox the functions are proxies whose own signature says nothing, so the
    judge's `student.signature(name)` is asked first; in-process, `inspect` sees the function.
    """
    probe = getattr(student, "signature", None)
    if callable(probe):
        found = probe(name)
        return inspect.signature(found) if callable(found) else found
    function = getattr(student, name, None)
    return inspect.signature(function) if inspect.isfunction(function) else None


def check_signature(signature, name: str) -> None:
    """The documented parameters come first, in order; anything extra must be optional."""
    parameters = getattr(signature, "parameters", None)
    if parameters is None:
        return  # not observable here: the calls by keyword below decide
    wanted = PARAMETERS[name]
    names = tuple(parameters)[: len(wanted)]
    expect(
        names == wanted,
        f"{name} takes parameters {list(parameters)}; expected {list(wanted)}",
    )
    extra = [p for p in list(parameters.values())[len(wanted) :] if is_required(p)]
    expect(not extra, f"{name} has extra required parameters {[p.name for p in extra]}")
    if name == "gspo_loss":
        default = parameters["clip_eps"].default
        expect(default == 0.2, f"gspo_loss has clip_eps default {default!r}; expected 0.2")


def is_required(parameter: inspect.Parameter) -> bool:
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return parameter.kind not in variadic and parameter.default is inspect.Parameter.empty


def test_signatures(student):
    """Both functions take the documented parameter names, and clip_eps defaults to 0.2."""
    for name in PARAMETERS:
        check_signature(student_signature(student, name), name)
    batch = clip_batch()
    ratio = student.sequence_ratio(logp=batch.logp, old_logp=batch.old_logp, mask=batch.mask)
    expect_tensor(ratio, "sequence_ratio (called by keyword)", (3,), why=RATIO_WHY)
    explicit = student.gspo_loss(
        logp=batch.logp,
        old_logp=batch.old_logp,
        advantages=batch.advantages,
        mask=batch.mask,
        clip_eps=0.2,
    )
    expect_tensor(explicit, "gspo_loss (called by keyword)", (), why=LOSS_WHY)
    default = student.gspo_loss(batch.logp, batch.old_logp, batch.advantages, batch.mask)
    expect_tensor(default, "gspo_loss (without clip_eps)", (), why=LOSS_WHY)
    expect_close(
        default,
        explicit,
        "gspo_loss called without clip_eps",
        0,
        0,
        hint="expected the value it has with clip_eps=0.2: the default clip width is 0.2",
    )


def test_sequence_ratio_returns_one_ratio_per_response(student):
    """sequence_ratio returns a Tensor of shape [B]: one ratio per response, also when B = 1."""
    for B in (4, 1):
        batch = make_batch(seed=B, B=B, L=5)
        ratio = student.sequence_ratio(batch.logp, batch.old_logp, batch.mask)
        expect_tensor(ratio, f"sequence_ratio (B={B}, L=5)", (B,), why=RATIO_WHY)
        expect(ratio.is_floating_point(), f"sequence_ratio returned dtype {ratio.dtype}")


def test_gspo_loss_returns_scalar_tensor(student):
    """gspo_loss returns a 0-dimensional Tensor, not a Python number and not shape [1]."""
    batch = make_batch(seed=7, B=4, L=5)
    loss = student.gspo_loss(batch.logp, batch.old_logp, batch.advantages, batch.mask)
    expect_tensor(loss, "gspo_loss", (), why=LOSS_WHY)
    expect(loss.is_floating_point(), f"gspo_loss returned dtype {loss.dtype}")


def test_dtype_kept(student):
    """Both results keep the dtype of logp: float16, bfloat16, float32 and float64."""
    base = make_batch(seed=11, B=3, L=6)
    for dtype in FLOAT_DTYPES:
        batch = base.to(dtype)
        ratio = student.sequence_ratio(batch.logp, batch.old_logp, batch.mask)
        expect_tensor(
            ratio, f"sequence_ratio on {dtype} inputs", (3,), dtype, "cpu", RATIO_WHY, "logp"
        )
        loss = student.gspo_loss(batch.logp, batch.old_logp, batch.advantages, batch.mask)
        expect_tensor(loss, f"gspo_loss on {dtype} inputs", (), dtype, "cpu", LOSS_WHY, "logp")


def test_mask_types(student):
    """A mask given as bool, integer or float gives the same results, in the dtype of logp."""
    base = make_batch(seed=21, B=4, L=6).to(torch.float32)
    results = {}
    for mask_dtype in (torch.bool, torch.int64, torch.float32):
        mask = base.mask.to(mask_dtype)
        ratio = student.sequence_ratio(base.logp, base.old_logp, mask)
        what = f"sequence_ratio with a {mask_dtype} mask"
        expect_tensor(ratio, what, (4,), torch.float32, why=RATIO_WHY, like="logp")
        loss = student.gspo_loss(base.logp, base.old_logp, base.advantages, mask)
        expect_tensor(
            loss,
            f"gspo_loss with a {mask_dtype} mask",
            (),
            torch.float32,
            why=LOSS_WHY,
            like="logp",
        )
        results[mask_dtype] = (ratio, loss)
    bool_ratio, bool_loss = results[torch.bool]
    for mask_dtype in (torch.int64, torch.float32):
        ratio, loss = results[mask_dtype]
        context = f"(mask {show(base.mask.to(mask_dtype))})"
        advice = "compare the mask with 0 (mask != 0) to get the valid tokens of any mask type"
        for name, got, want in (
            ("sequence_ratio", ratio, bool_ratio),
            ("gspo_loss", loss, bool_loss),
        ):
            expect_close(
                got,
                want,
                f"{name} with a {mask_dtype} mask",
                1e-6,
                1e-7,
                context,
                f"expected the value it has with the same mask as bool; {advice}",
            )


def test_inputs_not_modified(student):
    """Neither function changes its inputs (no in-place masked_fill_, mul_ or clamp_)."""
    batch = make_batch(seed=31, B=3, L=5)
    inputs = {
        "logp": batch.logp,
        "old_logp": batch.old_logp,
        "mask": batch.mask,
        "advantages": batch.advantages,
    }
    before = {name: value.clone() for name, value in inputs.items()}
    student.sequence_ratio(inputs["logp"], inputs["old_logp"], inputs["mask"])
    student.gspo_loss(inputs["logp"], inputs["old_logp"], inputs["advantages"], inputs["mask"])
    for name, value in inputs.items():
        if not torch.equal(value, before[name]):
            expect_close(
                value,
                before[name],
                f"{name} after your call",
                0,
                0,
                f"your code changed {name}, which held {show(before[name])}",
                "work on new tensors (torch.where, masked_fill without the trailing "
                "underscore) and leave the caller's tensors unchanged",
            )


def test_gradient_reaches_logp(student):
    """Backward through either function gives logp a finite, non-zero gradient on valid tokens."""
    batch = make_batch(seed=41, B=3, L=5, lengths=[5, 3, 1], spread=0.01)
    batch = Batch(
        batch.logp,
        batch.old_logp,
        batch.mask,
        torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64),
        0.2,
        "small ratios",
    )
    for name, call in (("sequence_ratio", call_ratio), ("gspo_loss", call_loss)):
        _, grad = call(student, batch)
        valid = grad[batch.valid]
        expect(bool(torch.isfinite(grad).all()), f"d {name} / d logp is not finite: {show(grad)}")
        expect(
            bool((valid != 0).all()),
            f"d {name} / d logp is zero on some valid tokens: {show(grad)} {batch.describe()}",
        )
