"""The reference solution against the seeds' worked numbers and every clause of its contract.

If one of these fails, the grader would be comparing students against a wrong answer.
"""

from __future__ import annotations

import math

import pytest
import torch

F64 = torch.float64


def batch_from_ratios(rows, length, dtype=F64):
    """logp, old_logp, mask for responses given by their valid token ratios (right-padded)."""
    old = -1.0 - 0.1 * torch.arange(len(rows) * length, dtype=F64).reshape(len(rows), length)
    logp, mask = old.clone(), torch.zeros(len(rows), length, dtype=torch.bool)
    for i, ratios in enumerate(rows):
        logp[i, : len(ratios)] += torch.tensor(ratios, dtype=F64).log()
        mask[i, : len(ratios)] = True
    return logp.to(dtype), old.to(dtype), mask


def random_batch(batch=3, length=5, seed=0, dtype=F64):
    """A random batch with one empty response and padding elsewhere."""
    gen = torch.Generator().manual_seed(seed)
    old = -2.0 + torch.randn(batch, length, generator=gen, dtype=F64)
    logp = old + 0.1 * torch.randn(batch, length, generator=gen, dtype=F64)
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[0, 3:] = False
    mask[-1, :] = False  # an empty response
    adv = torch.linspace(-1.0, 1.0, batch, dtype=F64)
    return logp.to(dtype), old.to(dtype), adv.to(dtype), mask


# ----------------------------------------------------------------------------- seeds' numbers


def test_two_token_example_ratio_objective_and_shared_coefficient(ref_impl):
    logp, old, mask = batch_from_ratios([[1.5, 0.8]], 2)
    assert ref_impl.sequence_ratio(logp, old, mask).item() == pytest.approx(math.sqrt(1.2))
    assert math.sqrt(1.2) == pytest.approx(1.0954, abs=1e-4)
    leaf = logp.clone().requires_grad_(True)
    loss = ref_impl.gspo_loss(leaf, old, torch.ones(1, dtype=F64), mask)
    assert loss.item() == pytest.approx(-1.0954, abs=1e-4)  # inside [0.8, 1.2]: objective = s
    loss.backward()
    coefficient = -leaf.grad[0]  # d objective / d logp_t
    assert coefficient.tolist() == pytest.approx([0.5477, 0.5477], abs=1e-4)


def test_ratios_1_5_and_1_2_clip_the_whole_response(ref_impl):
    logp, old, mask = batch_from_ratios([[1.5, 1.2]], 2)
    s = ref_impl.sequence_ratio(logp, old, mask).item()
    assert s == pytest.approx(1.3416, abs=1e-4) and s > 1.2
    leaf = logp.clone().requires_grad_(True)
    loss = ref_impl.gspo_loss(leaf, old, torch.ones(1, dtype=F64), mask)
    loss.backward()
    assert loss.item() == pytest.approx(-1.2)
    assert leaf.grad.abs().max().item() == 0.0


def test_ratios_2_and_0_5_give_ratio_one_and_equal_gradients(ref_impl):
    logp, old, mask = batch_from_ratios([[2.0, 0.5]], 2)
    assert ref_impl.sequence_ratio(logp, old, mask).item() == pytest.approx(1.0)
    leaf = logp.clone().requires_grad_(True)
    ref_impl.gspo_loss(leaf, old, torch.ones(1, dtype=F64), mask).backward()
    assert leaf.grad[0].tolist() == pytest.approx([-0.5, -0.5])  # -s*A/(B*T) = -1/2


# ----------------------------------------------------------------------------- shapes, empties


def test_sequence_ratio_has_shape_b_and_loss_is_a_0d_tensor(ref_impl):
    logp, old, adv, mask = random_batch(batch=4, length=6)
    assert ref_impl.sequence_ratio(logp, old, mask).shape == (4,)
    loss = ref_impl.gspo_loss(logp, old, adv, mask)
    assert isinstance(loss, torch.Tensor) and loss.shape == ()


def test_empty_response_has_ratio_one_contributes_zero_and_counts_in_the_mean(ref_impl):
    logp, old, mask = batch_from_ratios([[], [1.1, 1.1]], 3)
    ratio = ref_impl.sequence_ratio(logp, old, mask)
    assert ratio.tolist() == pytest.approx([1.0, 1.1])
    assert ratio[0].item() == 1.0
    adv = torch.tensor([5.0, 1.0], dtype=F64)  # the empty one's advantage must not matter
    loss = ref_impl.gspo_loss(logp, old, adv, mask)
    assert loss.item() == pytest.approx(-1.1 / 2)  # B = 2 in the mean, not 1


@pytest.mark.parametrize("batch", [0, 1, 3])
def test_all_empty_batch_gives_a_differentiable_zero(ref_impl, batch):
    logp = torch.full((batch, 4), math.nan, dtype=F64, requires_grad=True)
    old = torch.full((batch, 4), -math.inf, dtype=F64)
    mask = torch.zeros(batch, 4, dtype=torch.long)
    loss = ref_impl.gspo_loss(logp, old, torch.ones(batch, dtype=F64), mask)
    assert isinstance(loss, torch.Tensor) and loss.shape == () and loss.item() == 0.0
    loss.backward()
    assert logp.grad is not None and torch.equal(logp.grad, torch.zeros_like(logp))


# ----------------------------------------------------------------------------- padding


@pytest.mark.parametrize("value", [-math.inf, math.inf, 1e30, math.nan])
@pytest.mark.parametrize("where", ["logp", "old_logp", "both"])
def test_extreme_padding_reaches_neither_values_nor_gradients(ref_impl, value, where):
    logp, old, adv, mask = random_batch()
    dirty_logp, dirty_old = logp.clone(), old.clone()
    if where in ("logp", "both"):
        dirty_logp[~mask] = value
    if where in ("old_logp", "both"):
        dirty_old[~mask] = value
    clean_leaf, dirty_leaf = logp.clone().requires_grad_(), dirty_logp.clone().requires_grad_()
    clean_loss = ref_impl.gspo_loss(clean_leaf, old, adv, mask)
    dirty_loss = ref_impl.gspo_loss(dirty_leaf, dirty_old, adv, mask)
    (clean_loss + dirty_loss).backward()
    clean_ratio = ref_impl.sequence_ratio(logp, old, mask)
    assert torch.equal(ref_impl.sequence_ratio(dirty_logp, dirty_old, mask), clean_ratio)
    assert dirty_loss.item() == clean_loss.item() and math.isfinite(dirty_loss.item())
    assert torch.equal(dirty_leaf.grad, clean_leaf.grad)
    assert torch.equal(dirty_leaf.grad[~mask], torch.zeros_like(dirty_leaf.grad[~mask]))


# ----------------------------------------------------------------------------- gradients


def test_gradient_reaches_logp_only(ref_impl):
    logp, old, adv, mask = random_batch()
    logp.requires_grad_(True)
    old.requires_grad_(True)
    adv.requires_grad_(True)
    ref_impl.gspo_loss(logp, old, adv, mask).backward()
    assert logp.grad is not None and logp.grad[mask].abs().sum().item() > 0
    assert old.grad is None
    assert adv.grad is None


def test_sequence_ratio_is_differentiable_in_logp_only(ref_impl):
    logp, old, _, mask = random_batch()
    logp.requires_grad_(True)
    old.requires_grad_(True)
    ref_impl.sequence_ratio(logp, old, mask).sum().backward()
    assert logp.grad is not None and logp.grad[mask].abs().min().item() > 0
    assert old.grad is None


# ----------------------------------------------------------------------------- dtype, device, mask


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtype_is_preserved(ref_impl, dtype):
    logp, old, adv, mask = random_batch(dtype=dtype)
    assert ref_impl.sequence_ratio(logp, old, mask).dtype == dtype
    assert ref_impl.gspo_loss(logp, old, adv, mask).dtype == dtype


@pytest.mark.parametrize(
    ("logp_dtype", "adv_dtype"),
    [(torch.float32, F64), (F64, torch.float32), (torch.bfloat16, torch.float32)],
)
def test_loss_takes_the_dtype_of_logp_whatever_the_advantages(ref_impl, logp_dtype, adv_dtype):
    logp, old, adv, mask = random_batch()
    same = ref_impl.gspo_loss(logp.to(logp_dtype), old.to(logp_dtype), adv.to(logp_dtype), mask)
    mixed = ref_impl.gspo_loss(logp.to(logp_dtype), old.to(logp_dtype), adv.to(adv_dtype), mask)
    assert mixed.dtype == logp_dtype
    torch.testing.assert_close(mixed, same, rtol=1e-2, atol=1e-3)


def test_meta_device_is_preserved(ref_impl):
    logp = torch.empty(3, 5, device="meta", dtype=torch.float32)
    mask = torch.empty(3, 5, device="meta", dtype=torch.bool)
    adv = torch.empty(3, device="meta", dtype=torch.float32)
    ratio = ref_impl.sequence_ratio(logp, logp, mask)
    loss = ref_impl.gspo_loss(logp, logp, adv, mask)
    assert ratio.device.type == "meta" and ratio.shape == (3,) and ratio.dtype == torch.float32
    assert loss.device.type == "meta" and loss.shape == ()


@pytest.mark.parametrize("mask_dtype", [torch.long, torch.int32, torch.uint8, torch.float32])
def test_bool_integer_and_float_masks_agree(ref_impl, mask_dtype):
    logp, old, adv, mask = random_batch()
    want_ratio = ref_impl.sequence_ratio(logp, old, mask)
    want_loss = ref_impl.gspo_loss(logp, old, adv, mask)
    other = mask.to(mask_dtype)
    assert torch.equal(ref_impl.sequence_ratio(logp, old, other), want_ratio)
    assert torch.equal(ref_impl.gspo_loss(logp, old, adv, other), want_loss)


def test_inputs_are_not_modified(ref_impl):
    logp, old, adv, mask = random_batch()
    logp[~mask] = math.nan
    old[~mask] = -math.inf
    logp.requires_grad_(True)
    inputs = (logp, old, adv, mask.long())
    before = [t.detach().clone() for t in inputs]
    flags = [t.requires_grad for t in inputs]
    ref_impl.sequence_ratio(logp, old, inputs[3])
    ref_impl.gspo_loss(*inputs, clip_eps=0.3).backward()
    for tensor, copy, flag in zip(inputs, before, flags, strict=True):
        torch.testing.assert_close(tensor.detach(), copy, rtol=0, atol=0, equal_nan=True)
        assert tensor.requires_grad == flag


# ----------------------------------------------------------------------------- long sequences


@pytest.mark.parametrize(
    ("dtype", "rtol"),
    [(torch.float64, 1e-12), (torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1e-2)],
)
def test_stable_for_4096_tokens_around_minus_30(ref_impl, dtype, rtol):
    gen = torch.Generator().manual_seed(1)
    old = (-30.0 + torch.randn(2, 4096, generator=gen, dtype=F64)).to(dtype)
    logp = (old.double() + 0.05 * torch.randn(2, 4096, generator=gen, dtype=F64)).to(dtype)
    mask = torch.ones(2, 4096, dtype=torch.bool)
    mask[1, 3000:] = False
    ratio = ref_impl.sequence_ratio(logp, old, mask)
    delta = torch.where(mask, logp.double() - old.double(), 0.0)
    want = torch.exp(delta.sum(-1) / mask.sum(-1))  # float64 computation
    assert torch.isfinite(ratio).all()
    torch.testing.assert_close(ratio.double(), want, rtol=rtol, atol=0)
    loss = ref_impl.gspo_loss(logp, old, torch.tensor([1.0, -1.0], dtype=dtype), mask)
    assert math.isfinite(loss.item())


# ----------------------------------------------------------------------------- bad input


def _bad_calls():
    """(name, call on the reference, substrings the message must contain)."""
    logp, old, adv, mask = random_batch(batch=2, length=4)
    return {
        "old_logp shape": (
            lambda r: r.sequence_ratio(logp, old[:, :3], mask),
            ["[2, 3]", "[2, 4]"],
        ),
        "mask shape": (lambda r: r.sequence_ratio(logp, old, mask[:, :2]), ["[2, 2]", "[B, L]"]),
        "mask not 2-D": (lambda r: r.gspo_loss(logp, old, adv, mask[0]), ["[4]", "[B, L]"]),
        "integer logp": (lambda r: r.sequence_ratio(logp.long(), old, mask), ["int64", "float"]),
        "advantages shape": (lambda r: r.gspo_loss(logp, old, adv[:1], mask), ["[1]", "[B]"]),
        "clip_eps 0": (
            lambda r: r.gspo_loss(logp, old, adv, mask, clip_eps=0),
            ["got 0", "(0, 1)"],
        ),
        "clip_eps 1": (
            lambda r: r.gspo_loss(logp, old, adv, mask, clip_eps=1),
            ["got 1", "(0, 1)"],
        ),
        "clip_eps -0.1": (lambda r: r.gspo_loss(logp, old, adv, mask, -0.1), ["-0.1", "(0, 1)"]),
        "clip_eps 1.5": (lambda r: r.gspo_loss(logp, old, adv, mask, 1.5), ["1.5", "(0, 1)"]),
        "clip_eps str": (lambda r: r.gspo_loss(logp, old, adv, mask, "0.2"), ["str", "number"]),
    }


@pytest.mark.parametrize("case", list(_bad_calls()))
def test_bad_input_raises_with_expected_and_got(ref_impl, case):
    call, must_mention = _bad_calls()[case]
    with pytest.raises((ValueError, TypeError)) as info:
        call(ref_impl)
    for text in must_mention:
        assert text in str(info.value), f"{case}: {info.value!s} should mention {text!r}"
