"""Property tests of the reference over random shapes, masks and dtypes (hypothesis).

Each property is a fact of the paper: the ratio is a geometric mean, the loss depends on the
mean log-ratio only (so duplicating tokens changes nothing), and every valid token of an
unclipped response gets the same weight -s*A/(B*T) in d loss / d logp.
"""

from __future__ import annotations

import math

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

CLIP_EPS = 0.2
TOLERANCE = {
    torch.float64: 1e-10,
    torch.float32: 1e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1.6e-2,
}
PROPERTY = settings(max_examples=50, deadline=None)


@st.composite
def batches(draw, dtypes=tuple(TOLERANCE)):
    """logp, old_logp, mask of random shape; padded cells hold extreme values."""
    b, length = draw(st.integers(1, 5)), draw(st.integers(1, 12))
    dtype = draw(st.sampled_from(dtypes))
    flat = st.lists(st.floats(-1.0, 1.0), min_size=b * length, max_size=b * length)
    log_ratio = torch.tensor(draw(flat), dtype=torch.float64).reshape(b, length)
    old = torch.tensor(draw(flat), dtype=torch.float64).reshape(b, length) * 3 - 4
    bits = draw(st.lists(st.booleans(), min_size=b * length, max_size=b * length))
    mask = torch.tensor(bits).reshape(b, length)
    pad = draw(st.sampled_from([math.nan, math.inf, -math.inf, 1e30]))  # 1e30 is inf in fp16
    logp = (old + log_ratio).masked_fill(~mask, pad).to(dtype)
    return logp, old.masked_fill(~mask, -pad).to(dtype), mask


def direct_geometric_mean(logp, old, mask) -> list[float]:
    """Product of the valid token ratios, to the power 1/T, in float64 arithmetic (1 if T = 0)."""
    out = []
    for lp_row, old_row, m_row in zip(logp.double(), old.double(), mask, strict=True):
        ratios = [math.exp(a - b) for a, b, m in zip(lp_row, old_row, m_row, strict=True) if m]
        out.append(math.prod(ratios) ** (1 / len(ratios)) if ratios else 1.0)
    return out


@PROPERTY
@given(batches())
def test_ratio_is_the_geometric_mean_of_valid_token_ratios(ref_impl, batch):
    logp, old, mask = batch
    ratio = ref_impl.sequence_ratio(logp, old, mask)
    want = torch.tensor(direct_geometric_mean(logp, old, mask), dtype=torch.float64)
    assert ratio.dtype == logp.dtype and ratio.shape == (len(mask),)
    tol = TOLERANCE[logp.dtype]
    torch.testing.assert_close(ratio.double(), want, rtol=tol, atol=tol)


@PROPERTY
@given(batches(dtypes=(torch.float64,)), st.integers(2, 3), st.data())
def test_duplicating_every_token_leaves_the_loss_unchanged(ref_impl, batch, copies, data):
    logp, old, mask = batch
    adv = torch.tensor(
        data.draw(st.lists(st.floats(-2, 2), min_size=len(mask), max_size=len(mask)))
    )
    loss = ref_impl.gspo_loss(logp, old, adv.double(), mask)
    twice = [t.repeat_interleave(copies, dim=1) for t in (logp, old, mask)]
    loss_dup = ref_impl.gspo_loss(twice[0], twice[1], adv.double(), twice[2])
    torch.testing.assert_close(loss_dup, loss, rtol=1e-10, atol=1e-12)


def _away_from_clip_edges(mean_log_ratio: float) -> bool:
    s = math.exp(mean_log_ratio)
    return min(abs(s - (1 - CLIP_EPS)), abs(s - (1 + CLIP_EPS))) > 0.02


@st.composite
def responses_with_chosen_ratios(draw):
    """A float64 batch whose responses have mean log-ratios chosen away from the clip edges."""
    logp, old, mask = draw(batches(dtypes=(torch.float64,)))
    b = len(mask)
    targets = draw(st.lists(st.floats(-1.0, 1.0), min_size=b, max_size=b))
    assume(all(map(_away_from_clip_edges, targets)))
    delta = torch.where(mask, logp - old, 0.0)
    lengths = mask.sum(-1).clamp(min=1)
    shift = torch.tensor(targets, dtype=torch.float64) - delta.sum(-1) / lengths  # [B]
    logp = torch.where(mask, logp + shift[:, None], logp)
    signs = draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=b, max_size=b))
    magnitudes = draw(st.lists(st.floats(0.1, 2.0), min_size=b, max_size=b))
    adv = torch.tensor(signs, dtype=torch.float64) * torch.tensor(magnitudes, dtype=torch.float64)
    return logp, old, adv, mask


def expected_token_gradient(s: float, a: float, length: int, batch: int) -> float:
    """d loss / d logp_it on a valid token: -s*A/(B*T), or 0 when the clip is active."""
    clipped = (a > 0 and s > 1 + CLIP_EPS) or (a < 0 and s < 1 - CLIP_EPS)
    return 0.0 if clipped or length == 0 else -s * a / (batch * length)


@PROPERTY
@given(responses_with_chosen_ratios())
def test_each_valid_token_gets_the_shared_weight_or_zero_when_clipped(ref_impl, batch):
    logp, old, adv, mask = batch
    leaf = logp.clone().requires_grad_(True)
    ref_impl.gspo_loss(leaf, old, adv, mask, clip_eps=CLIP_EPS).backward()
    ratio = ref_impl.sequence_ratio(logp, old, mask)
    for i in range(len(mask)):
        length = int(mask[i].sum())
        want = expected_token_gradient(ratio[i].item(), adv[i].item(), length, len(mask))
        valid = leaf.grad[i][mask[i]]
        torch.testing.assert_close(valid, torch.full_like(valid, want), rtol=1e-9, atol=1e-12)
        assert torch.equal(leaf.grad[i][~mask[i]], torch.zeros_like(leaf.grad[i][~mask[i]]))
