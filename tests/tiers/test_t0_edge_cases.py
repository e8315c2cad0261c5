"""T0 Contract, edge cases: devices, advantages in another dtype, and an empty batch.

The device check runs on `meta` (tensors with a shape and no data) and, where a GPU is
present, on `cuda`. Code that reads values (a Python loop with `if`, `.item()`, boolean
indexing) is right on every real device but cannot run on `meta`: such a failure is
inconclusive, reported as a note that costs no points (`device_note`).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from _checks import (
    LOSS_WHY,
    RATIO_WHY,
    Batch,
    call_loss,
    device_note,
    expect,
    expect_close,
    expect_tensor,
    make_batch,
    reference_loss,
    tolerance,
)

pytestmark = pytest.mark.tier("T0")


def check_device(student, batch: Batch, device: str) -> None:
    """Both results come back on `device`, with the shape and dtype of the contract."""
    moved = batch.on(device)
    dtype = batch.logp.dtype
    ratio = student.sequence_ratio(moved.logp, moved.old_logp, moved.mask)
    expect_tensor(
        ratio, f"sequence_ratio on {device} tensors", (batch.B,), dtype, device, RATIO_WHY, "logp"
    )
    loss = student.gspo_loss(moved.logp, moved.old_logp, moved.advantages, moved.mask)
    expect_tensor(loss, f"gspo_loss on {device} tensors", (), dtype, device, LOSS_WHY, "logp")


def test_device_kept(student):
    """Both results stay on the device of logp: `meta` always, `cuda` where there is a GPU."""
    batch = make_batch(71, B=3, L=5, dtype=torch.float32, name="device")
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        check_device(student, batch, "cuda")  # a real device: its verdict is final
    note = device_note(lambda device: check_device(student, batch, device), "meta")
    if note and not on_gpu:
        pytest.skip(note)


MIXED = (
    (torch.float32, torch.float64),
    (torch.float64, torch.float32),
    (torch.bfloat16, torch.float32),
)


def test_advantages_dtype_does_not_change_result_dtype(student, reference):
    """Advantages in another dtype than logp (float64 beside float32, ...): the loss keeps
    the dtype of logp and its value."""
    base = make_batch(72, B=4, L=6, lengths=[6, 2, 0, 5], spread=0.3, name="mixed dtypes")
    for logp_dtype, adv_dtype in MIXED:
        batch = replace(base.to(logp_dtype), advantages=base.advantages.to(adv_dtype))
        what = f"gspo_loss with {logp_dtype} logp and {adv_dtype} advantages"
        loss, _ = call_loss(student, batch)
        expect_tensor(loss, what, (), logp_dtype, why=LOSS_WHY, like="logp")
        want, _ = reference_loss(reference, batch)
        rtol, atol = tolerance(logp_dtype)
        expect_close(loss, want, what, rtol, atol, batch.describe)


def empty_batch(L: int = 5) -> Batch:
    """B = 0: no response at all (a data-parallel rank can receive an empty shard)."""
    nothing = torch.empty(0, L, dtype=torch.float64)
    mask = torch.empty(0, L, dtype=torch.bool)
    return Batch(nothing, nothing.clone(), mask, torch.empty(0, dtype=torch.float64), 0.2, "B=0")


def test_empty_batch(student):
    """B = 0: sequence_ratio returns shape [0]; gspo_loss a zero Tensor that backward accepts."""
    batch = empty_batch()
    ratio = student.sequence_ratio(batch.logp, batch.old_logp, batch.mask)
    expect_tensor(
        ratio, "sequence_ratio on an empty batch (B=0)", (0,), torch.float64, why=RATIO_WHY
    )
    loss, grad = call_loss(student, batch)
    expect_tensor(loss, "gspo_loss on an empty batch (B=0)", (), torch.float64, why=LOSS_WHY)
    expect_close(
        loss,
        torch.zeros((), dtype=torch.float64),
        "gspo_loss on an empty batch (B=0)",
        0,
        0,
        hint=lambda: (
            "The mean over no responses is 0/0 = nan; return a zero for B = 0"
            if bool(loss.isnan())
            else ""
        ),
    )
    expect(tuple(grad.shape) == (0, 5), f"d loss / d logp has shape {list(grad.shape)}")
