"""T2 Math and gradient properties, part 1: the ratio, empty responses, frozen inputs.

These tests check properties the paper states, mostly by comparing the submission with
itself or with a formula written out here, so a failure names the property, not a number.
"""

from __future__ import annotations

import math

import pytest
import torch
from _checks import (
    Batch,
    call_loss,
    call_ratio,
    expect,
    expect_close,
    expect_tensor,
    leaf,
    make_batch,
    reference_loss,
    tolerance,
)
from _hints import loss_hint, overflow_hint, ratio_hint

pytestmark = pytest.mark.tier("T2")


def test_geometric_mean_identity(student):
    """The ratio is the geometric mean of the valid token ratios: (prod r_t)^(1/T)."""
    token_ratios = ([2.0, 0.5], [1.2, 1.2, 1.2], [4.0, 1.0, 0.25, 2.0], [2.718281828459045])
    L = 4
    old_logp = torch.full((4, L), -1.5, dtype=torch.float64)  # [4, L]
    mask = torch.zeros(4, L, dtype=torch.bool)
    logp = old_logp.clone()
    for i, row in enumerate(token_ratios):
        mask[i, : len(row)] = True
        logp[i, : len(row)] += torch.log(torch.tensor(row, dtype=torch.float64))
    logp[~mask] = -0.7  # padding holds an ordinary, different value
    want = torch.tensor(
        [math.prod(r) ** (1 / len(r)) for r in token_ratios], dtype=torch.float64
    )  # [4]
    batch = Batch(
        logp,
        old_logp,
        mask,
        torch.ones(4, dtype=torch.float64),
        0.2,
        "token ratios [2, 0.5], [1.2]*3, [4, 1, 0.25, 2], [e]",
    )
    ratio, _ = call_ratio(student, batch)
    expect_close(
        ratio,
        want,
        "sequence_ratio",
        1e-9,
        1e-12,
        f"on token ratios {token_ratios}",
        lambda: ratio_hint(ratio, want, batch),
    )


def test_empty_response_has_ratio_one(student):
    """A response with no valid token has ratio 1, and no gradient flows to its positions."""
    batch = make_batch(51, B=3, L=5, lengths=[5, 0, 2], spread=0.3, name="middle row empty")
    ratio, grad = call_ratio(student, batch)
    expect_close(
        ratio[1],
        torch.tensor(1.0, dtype=torch.float64),
        "sequence_ratio of the empty response (row 1)",
        0,
        1e-12,
        batch.describe,
        lambda: (
            "an empty response has no log-ratios to average; its mean log-ratio is 0 "
            "and its ratio exp(0) = 1"
            + ("; yours is nan: guard the division by a zero length" if ratio[1].isnan() else "")
        ),
    )
    expect_close(
        grad[1],
        torch.zeros_like(grad[1]),
        "d ratio / d logp on the empty response (row 1)",
        0,
        0,
        batch.describe,
    )


def test_empty_response_contributes_zero_but_counts(student):
    """An empty response adds 0 to the objective but still counts in the mean over B."""
    batch = make_batch(52, B=4, L=5, lengths=[5, 3, 0, 4], spread=0.05, name="row 2 empty")
    batch = Batch(
        batch.logp,
        batch.old_logp,
        batch.mask,
        torch.tensor([0.5, -1.0, 3.0, 1.5], dtype=torch.float64),
        0.2,
        batch.name,
    )
    keep = torch.tensor([0, 1, 3])
    part = Batch(
        batch.logp[keep],
        batch.old_logp[keep],
        batch.mask[keep],
        batch.advantages[keep],
        0.2,
        "the same batch without row 2",
    )
    loss, grad = call_loss(student, batch)
    part_loss, part_grad = call_loss(student, part)
    expect_close(
        loss,
        part_loss * 3 / 4,
        "gspo_loss with an empty row 2 (A=3)",
        1e-9,
        1e-12,
        batch.describe,
        "expected 3/4 of the loss without that row: the empty response contributes 0 "
        "to the sum yet the mean divides by all B = 4 responses",
    )
    expect_close(
        grad[2],
        torch.zeros_like(grad[2]),
        "d loss / d logp on the empty response (row 2)",
        0,
        0,
        batch.describe,
    )
    expect_close(
        grad[keep],
        part_grad * 3 / 4,
        "d loss / d logp with an empty row",
        1e-9,
        1e-12,
        batch.describe,
        "expected 3/4 of the gradient without the empty row",
    )


def test_old_logp_and_advantages_frozen(student):
    """old_logp and advantages are constants: their .grad stays None even with requires_grad."""
    batch = make_batch(56, B=3, L=4, lengths=[4, 2, 3], spread=0.05)
    logp, old_logp, advantages = leaf(batch.logp), leaf(batch.old_logp), leaf(batch.advantages)
    ratio = student.sequence_ratio(logp, old_logp, batch.mask)
    expect_tensor(ratio, "sequence_ratio", (3,))
    if ratio.requires_grad:
        ratio.sum().backward()
    expect(
        old_logp.grad is None,
        "after backward through sequence_ratio, old_logp.grad is not None; the old policy is "
        "frozen: detach old_logp (old_logp.detach()) before using it",
    )
    logp, old_logp = leaf(batch.logp), leaf(batch.old_logp)
    loss = student.gspo_loss(logp, old_logp, advantages, batch.mask)
    expect_tensor(loss, "gspo_loss", ())
    if loss.requires_grad:
        loss.backward()
    for name, value in (("old_logp", old_logp), ("advantages", advantages)):
        expect(
            value.grad is None,
            f"after backward through gspo_loss, {name}.grad is not None; {name} is a "
            f"constant of the update: use {name}.detach() inside your code",
        )


def test_all_empty_mask_gives_differentiable_zero(student):
    """With every response empty, ratios are 1 and the loss is a zero Tensor with zero grads."""
    base = make_batch(57, B=3, L=4, lengths=[0, 0, 0])
    logp, old_logp = base.logp.clone(), base.old_logp.clone()
    logp[0, :2], logp[1, 1], old_logp[2, 0] = float("-inf"), float("nan"), float("inf")
    batch = Batch(logp, old_logp, base.mask, base.advantages, 0.2, "all empty, extreme padding")
    ratio = student.sequence_ratio(batch.logp, batch.old_logp, batch.mask)
    expect_tensor(ratio, "sequence_ratio on an all-empty mask", (3,))  # a constant is fine here
    expect_close(
        ratio,
        torch.ones(3, dtype=torch.float64),
        "sequence_ratio of all-empty rows",
        0,
        1e-12,
        batch.describe,
    )
    logp = leaf(batch.logp)
    loss = student.gspo_loss(logp, batch.old_logp, batch.advantages, batch.mask)
    expect_tensor(
        loss,
        "gspo_loss on an all-empty mask",
        (),
        batch.logp.dtype,
        why=", a zero Tensor of shape [] (not a Python number)",
        like="logp",
    )
    expect(
        loss.requires_grad,
        "gspo_loss on an all-empty mask returned a tensor without a gradient path to logp; "
        "a training loop calls loss.backward() on every batch, so build the zero from logp "
        "(the masked mean of the objectives is one), not torch.tensor(0.)",
    )
    expect_close(
        loss,
        torch.zeros((), dtype=batch.logp.dtype),
        "gspo_loss on an all-empty mask",
        0,
        0,
        batch.describe,
        lambda: (
            "the padding holds inf and NaN, and 0 * inf is nan: (logp * 0).sum() is not a "
            "safe zero; build it from values that torch.where has already cleaned"
            if not bool(loss.detach().isfinite())
            else ""
        ),
    )
    loss.backward()
    grad = logp.grad
    expect(grad is not None, "after backward on an all-empty mask, logp.grad is None")
    expect_close(
        grad, torch.zeros_like(grad), "d loss / d logp on an all-empty mask", 0, 0, batch.describe
    )


DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def test_empty_rows_in_every_dtype(student, reference):
    """Empty responses whose padding holds -inf and NaN, in float16, bfloat16, float32 and
    float64: their ratio is exactly 1, they get no gradient, and the loss is the reference's."""
    base = make_batch(58, B=4, L=6, lengths=[6, 0, 3, 0], spread=0.2)
    logp, old_logp = base.logp.clone(), base.old_logp.clone()
    logp[1], old_logp[3] = float("-inf"), float("nan")
    empty = torch.tensor([1, 3])
    for dtype in DTYPES:
        name = f"rows 1 and 3 empty, padding -inf and NaN, {dtype}"
        batch = Batch(logp, old_logp, base.mask, base.advantages, 0.2, name).to(dtype)
        ratio, _ = call_ratio(student, batch)
        ones = torch.ones(2, dtype=dtype)
        expect_close(ratio[empty], ones, f"sequence_ratio of the empty rows ({dtype})", 0, 0)
        loss, grad = call_loss(student, batch)
        zeros = torch.zeros(2, batch.logp.shape[-1], dtype=dtype)
        expect_close(grad[empty], zeros, f"d loss / d logp on the empty rows ({dtype})", 0, 0)
        want, _ = reference_loss(reference, batch)
        rtol, atol = tolerance(dtype)
        hint = lambda: overflow_hint(loss, want, batch) or loss_hint(loss, want, batch)  # noqa: E731, B023
        expect_close(loss, want, f"gspo_loss ({dtype})", rtol, atol, batch.describe, hint)
