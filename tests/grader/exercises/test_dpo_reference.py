"""The DPO reference against the statement's worked numbers and every clause of its contract.

If one of these fails, the grader would be comparing students against a wrong answer.
"""

from __future__ import annotations

import math

import pytest
import torch

F64 = torch.float64
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def one_pair(chosen_ratio: float, rejected_ratio: float, dtype=F64):
    """pc, pr, rc, rr [1] with the given log-ratios pc - rc and pr - rr; pc, pr are leaves."""
    rc, rr = torch.tensor([-6.0], dtype=dtype), torch.tensor([-11.0], dtype=dtype)
    pc = (rc + chosen_ratio).requires_grad_(True)
    pr = (rr + rejected_ratio).requires_grad_(True)
    return pc, pr, rc, rr


def loss_and_grads(reference, pc, pr, rc, rr, beta):
    loss = reference.dpo_loss(pc, pr, rc, rr, beta=beta)
    loss.backward()
    return loss.item(), pc.grad.item(), pr.grad.item()


# ----------------------------------------------------------------------------- worked numbers


def test_worked_example(dpo_reference):
    loss, chosen, rejected = loss_and_grads(dpo_reference, *one_pair(1.0, -1.0), beta=0.5)
    assert loss == pytest.approx(math.log1p(math.exp(-1.0)), abs=1e-12)
    assert loss == pytest.approx(0.313262, abs=5e-7)
    assert chosen == pytest.approx(-0.134471, abs=5e-7)
    assert rejected == pytest.approx(0.134471, abs=5e-7)


def test_swapped_preference_weighs_e_times_more(dpo_reference):
    loss, chosen, rejected = loss_and_grads(dpo_reference, *one_pair(-1.0, 1.0), beta=0.5)
    assert loss == pytest.approx(1.313262, abs=5e-7)
    assert chosen == pytest.approx(-0.365529, abs=5e-7)
    assert rejected == pytest.approx(0.365529, abs=5e-7)
    assert chosen / -0.5 / (1 / (1 + math.e)) == pytest.approx(math.e)  # sigma(1) / sigma(-1)


def test_policy_equal_to_reference_gives_log_2(dpo_reference):
    rc = torch.tensor([-3.0, -40.0, -7.5], dtype=F64)
    rr = torch.tensor([-9.0, -2.0, -7.5], dtype=F64)
    pc, pr = rc.clone().requires_grad_(True), rr.clone().requires_grad_(True)
    loss = dpo_reference.dpo_loss(pc, pr, rc, rr, beta=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(math.log(2))
    assert pc.grad.tolist() == pytest.approx([-0.2 / 6] * 3)
    assert pr.grad.tolist() == pytest.approx([0.2 / 6] * 3)


def test_statement_shows_the_reference_numbers(dpo, dpo_reference):
    text = dpo.statement.read_text(encoding="utf-8")
    loss, chosen, _ = loss_and_grads(dpo_reference, *one_pair(1.0, -1.0), beta=0.5)
    swapped, _, rejected = loss_and_grads(dpo_reference, *one_pair(-1.0, 1.0), beta=0.5)
    for value in (loss, chosen, swapped, rejected, math.log(2)):
        assert f"{abs(value):.6f}" in text, f"statement lacks {value:.6f}"


# ----------------------------------------------------------------------------- sequence_logp


def test_sequence_logp_sums_the_valid_tokens(dpo_reference):
    token_logp = torch.tensor([[-1.0, -2.0, -4.0], [-0.5, -0.25, -8.0], [-3.0, -3.0, -3.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [0, 0, 0]])
    assert dpo_reference.sequence_logp(token_logp, mask).tolist() == [-7.0, -0.75, 0.0]


@pytest.mark.parametrize("value", [-math.inf, math.inf, 1e30, math.nan])
@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.int64, torch.float32])
def test_padding_reaches_neither_value_nor_gradient(dpo_reference, value, mask_dtype):
    token_logp = torch.tensor([[-1.0, -2.0, value], [value, value, value]], dtype=F64)
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]]).to(mask_dtype)
    leaf = token_logp.clone().requires_grad_(True)
    result = dpo_reference.sequence_logp(leaf, mask)
    assert result.tolist() == [-3.0, 0.0] and result.dtype == F64
    (result * torch.tensor([2.0, 5.0], dtype=F64)).sum().backward()
    assert leaf.grad.tolist() == [[2.0, 2.0, 0.0], [0.0, 0.0, 0.0]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_results_keep_the_input_dtype(dpo_reference, dtype):
    token_logp = torch.full((2, 3), -0.5, dtype=dtype)
    assert dpo_reference.sequence_logp(token_logp, torch.ones(2, 3)).dtype == dtype
    pc, pr, rc, rr = (torch.full((2,), v, dtype=dtype) for v in (-1.0, -2.0, -1.5, -1.5))
    loss = dpo_reference.dpo_loss(pc, pr, rc, rr)
    assert loss.dtype == dtype and loss.shape == ()


# ----------------------------------------------------------------------------- dpo_loss


def test_reference_log_probs_get_no_gradient_and_stay_unchanged(dpo_reference):
    pc, pr, rc, rr = (torch.tensor([-1.0, -7.0], dtype=F64, requires_grad=True) for _ in range(4))
    before = [t.detach().clone() for t in (pc, pr, rc, rr)]
    dpo_reference.dpo_loss(pc, pr, rc, rr).backward()
    assert rc.grad is None and rr.grad is None
    assert pc.grad is not None and pr.grad is not None
    for tensor, old in zip((pc, pr, rc, rr), before, strict=True):
        assert torch.equal(tensor.detach(), old)


def test_huge_margins_stay_finite_and_exact_in_float32(dpo_reference):
    margins = torch.tensor([-1e4, -200.0, 0.0, 200.0, 1e4])
    rr = torch.full((5,), -30.0)
    pc, pr = (-20.0 + margins / 2).requires_grad_(True), (rr - margins / 2).requires_grad_(True)
    loss = dpo_reference.dpo_loss(pc, pr, torch.full((5,), -20.0), rr, beta=1.0)
    loss.backward()
    assert loss.item() == pytest.approx((1e4 + 200.0 + math.log(2)) / 5, rel=1e-6)
    weights = [1.0, 1.0, 0.5, 0.0, 0.0]
    assert pc.grad.tolist() == pytest.approx([-w / 5 for w in weights], abs=1e-7)
    assert pr.grad.tolist() == pytest.approx([w / 5 for w in weights], abs=1e-7)


def test_empty_batch_gives_a_differentiable_zero(dpo_reference):
    pc, pr = torch.zeros(0, requires_grad=True), torch.zeros(0, requires_grad=True)
    loss = dpo_reference.dpo_loss(pc, pr, torch.zeros(0), torch.zeros(0))
    assert loss.shape == () and loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert pc.grad is not None and pc.grad.shape == (0,)


@pytest.mark.parametrize("beta", [0.0, -0.1, math.inf, math.nan])
def test_beta_outside_the_positive_reals_raises_value_error(dpo_reference, beta):
    pair = [torch.tensor([-1.0]) for _ in range(4)]
    with pytest.raises(ValueError, match="beta must be a positive"):
        dpo_reference.dpo_loss(*pair, beta=beta)


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        ((torch.zeros(2), torch.zeros(3), torch.zeros(2), torch.zeros(2)), ValueError, "shape"),
        ((torch.zeros(2, 1),) * 4, ValueError, "shape [B]"),
        ((torch.zeros(2, dtype=torch.long),) * 4, TypeError, "floating"),
    ],
)
def test_bad_pairs_get_a_message(dpo_reference, args, error, words):
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        dpo_reference.dpo_loss(*args)


def test_bad_tokens_get_a_message(dpo_reference):
    with pytest.raises(ValueError, match="mask must have the shape"):
        dpo_reference.sequence_logp(torch.zeros(2, 3), torch.ones(2, 4))
    with pytest.raises(TypeError, match="floating"):
        dpo_reference.sequence_logp(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3))


def test_manifest_names_the_reference_functions(dpo, dpo_reference, dpo_starter):
    assert set(dpo.function_names) == set(dpo_reference.__all__)
    for name in dpo.function_names:
        assert callable(getattr(dpo_starter, name)) and callable(getattr(dpo_reference, name))
    assert dpo.id == "dpo" and [p.name for p in dpo.plots] == ["gradient_weight"]
