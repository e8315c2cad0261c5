"""GSPO's input builders and calls for the tier suites; the checks come from grader.checks.

Student calls go through the `student` fixture only. Whatever it raises (the proxy's
StudentError) is left to propagate: the judge reports it. What we guard against is a
*result* of the wrong kind (a float, a tuple, a wrongly shaped tensor), so that a test fails
with a sentence instead of an unrelated TypeError inside the test code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from grader.checks import (  # noqa: F401 (re-exported for the tier files)
    device_note,
    difference,
    expect,
    expect_close,
    expect_tensor,
    fail,
    is_close,
    leaf,
    show,
    text,
    tolerance,
    worst_entry,
)

RATIO_WHY = ", one ratio per response"
LOSS_WHY = ", a 0-dimensional loss (shape [], not a Python number)"


@dataclass(frozen=True)
class Batch:
    """One set of inputs for both functions. Padding holds ordinary values unless a test
    puts extreme ones there. `hidden` cases never print their tensors."""

    logp: Tensor  # [B, L]
    old_logp: Tensor  # [B, L]
    mask: Tensor  # [B, L], 0/1 in any dtype
    advantages: Tensor  # [B]
    clip_eps: float = 0.2
    name: str = ""
    hidden: bool = False

    @property
    def B(self) -> int:
        return self.logp.shape[0]

    @property
    def valid(self) -> Tensor:
        return self.mask != 0  # [B, L] bool

    def to(self, dtype: torch.dtype) -> Batch:
        """The same case with floating inputs in another dtype (the mask is kept as it is)."""
        return replace(
            self,
            logp=self.logp.to(dtype),
            old_logp=self.old_logp.to(dtype),
            advantages=self.advantages.to(dtype),
        )

    def on(self, device: str) -> Batch:
        """The same case with every tensor on another device (`meta` keeps shapes only)."""
        return replace(
            self,
            logp=self.logp.to(device),
            old_logp=self.old_logp.to(device),
            mask=self.mask.to(device),
            advantages=self.advantages.to(device),
        )

    def describe(self) -> str:
        """Where the failure happened: the inputs for a visible case, the name for a hidden one."""
        if self.hidden:
            return f"(hidden case {self.name})" if self.name else "(hidden case)"
        return (
            f"on case {self.name!r}: logp={show(self.logp)}, old_logp={show(self.old_logp)}, "
            f"mask={show(self.mask)}, advantages={show(self.advantages)}, "
            f"clip_eps={self.clip_eps}"
        )


def make_batch(
    seed: int,
    B: int,
    L: int,
    *,
    lengths=None,
    spread: float = 0.1,
    clip_eps: float = 0.2,
    dtype=torch.float64,
    name: str = "",
    hidden: bool = False,
) -> Batch:
    """Seeded random inputs: old log-probs in [-5, -0.1], current = old + spread * noise.

    `lengths` gives each response's number of valid tokens (0 = empty, L = full); by default
    lengths are drawn at random and the first row is full, the last one empty when B > 2.
    """
    g = torch.Generator().manual_seed(seed)
    old_logp = -(0.1 + 4.9 * torch.rand(B, L, generator=g, dtype=torch.float64))  # [B, L]
    logp = old_logp + spread * torch.randn(B, L, generator=g, dtype=torch.float64)  # [B, L]
    if lengths is None:
        lengths = torch.randint(0, L + 1, (B,), generator=g).tolist()
        lengths[0] = L
        if B > 2:
            lengths[-1] = 0
    positions = torch.arange(L).expand(B, L)  # [B, L]
    mask = positions < torch.tensor(lengths).unsqueeze(-1)  # [B, L] bool
    advantages = torch.randn(B, generator=g, dtype=torch.float64)  # [B], mixed signs
    return Batch(
        logp.to(dtype),
        old_logp.to(dtype),
        mask,
        advantages.to(dtype),
        clip_eps,
        name or f"seed {seed}, B={B}, L={L}",
        hidden,
    )


def call_ratio(student, batch: Batch, weights: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Student's ratio [B] and d(sum(weights * ratio))/d logp [B, L] on fresh leaves (the
    plain sum without weights: the gradient that comes back with the call)."""
    logp = leaf(batch.logp)
    ratio = student.sequence_ratio(logp, batch.old_logp.clone(), batch.mask.clone())
    expect_tensor(ratio, "sequence_ratio", (batch.B,), why=RATIO_WHY)
    grad = backward(ratio, logp, "sequence_ratio", weights)
    return ratio.detach(), grad


def call_loss(student, batch: Batch) -> tuple[Tensor, Tensor]:
    """Student's loss () and d loss / d logp [B, L] on fresh leaves."""
    logp = leaf(batch.logp)
    loss = student.gspo_loss(
        logp,
        batch.old_logp.clone(),
        batch.advantages.clone(),
        batch.mask.clone(),
        clip_eps=batch.clip_eps,
    )
    expect_tensor(loss, "gspo_loss", (), why=LOSS_WHY)
    return loss.detach(), backward(loss, logp, "gspo_loss")


def backward(result: Tensor, logp: Tensor, name: str, weights: Tensor | None = None) -> Tensor:
    """Backpropagate `result` (weighted when it is a vector) and return logp's gradient."""
    expect(
        result.requires_grad,
        f"{name} returned a tensor that does not depend on logp (requires_grad is False); "
        "keep the computation differentiable: no .detach(), .item() or torch.no_grad() on logp",
    )
    if weights is not None:
        result = result * weights.to(result.dtype)
    total = result.sum() if result.dim() else result
    total.backward()
    expect(logp.grad is not None, f"after backward through {name}, logp.grad is None")
    return logp.grad.detach()


def reference_ratio(reference, batch: Batch, weights: Tensor | None = None):
    """The reference's ratio and gradient computed in float64 from the same inputs."""
    return call_ratio(reference, batch.to(torch.float64), weights)


def reference_loss(reference, batch: Batch):
    """The reference's loss and gradient computed in float64 from the same inputs."""
    return call_loss(reference, batch.to(torch.float64))


def ratio_batch(
    ratios,
    lengths,
    advantages,
    L: int,
    clip_eps: float = 0.2,
    name: str = "",
) -> Batch:
    """Responses with a chosen sequence ratio each: token log-ratios vary around log(s_i)
    but average exactly to it, so the geometric mean is s_i by construction."""
    B = len(ratios)
    g = torch.Generator().manual_seed(B * 100 + L)
    old_logp = -(0.5 + 2.0 * torch.rand(B, L, generator=g, dtype=torch.float64))  # [B, L]
    positions = torch.arange(L).expand(B, L)  # [B, L]
    mask = positions < torch.tensor(lengths).unsqueeze(-1)  # [B, L] bool
    wiggle = torch.where(mask, 0.05 * torch.randn(B, L, generator=g, dtype=torch.float64), 0.0)
    T = mask.sum(-1, keepdim=True).clamp(min=1)  # [B, 1]
    wiggle = torch.where(mask, wiggle - wiggle.sum(-1, keepdim=True) / T, 0.0)  # zero mean
    log_s = torch.log(torch.tensor(ratios, dtype=torch.float64)).unsqueeze(-1)  # [B, 1]
    logp = old_logp + torch.where(mask, log_s + wiggle, 0.3)  # padding: ordinary values
    advantages = torch.tensor(advantages, dtype=torch.float64)  # [B]
    return Batch(logp, old_logp, mask, advantages, clip_eps, name)


def unclipped_weights(batch: Batch) -> Tensor:
    """d loss / d logp [B, L] when no response is clipped: -s_i * A_i / (B * T_i) on valid
    tokens (the paper's equal token weights), 0 on padding and on empty responses."""
    valid = batch.valid
    log_ratio = torch.where(valid, batch.logp.double() - batch.old_logp.double(), 0.0)
    T = valid.sum(-1).double()  # [B]
    s = (log_ratio.sum(-1) / T.clamp(min=1)).exp()  # [B]
    weight = -s * batch.advantages.double() / (batch.B * T.clamp(min=1))  # [B]
    return torch.where(valid, weight.unsqueeze(-1), 0.0)  # [B, L]
