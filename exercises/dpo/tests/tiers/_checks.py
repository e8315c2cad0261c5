"""DPO's input builders and calls for the tier suites; the checks come from grader.checks.

Student calls go through the `student` fixture only, as plain calls. Whatever it raises (the
sandbox's StudentError) is left to propagate: the judge reports it. What we guard against is
a *result* of the wrong kind (a float, a tuple, a wrongly shaped tensor), so that a test fails
with a sentence instead of an unrelated TypeError inside the test code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from grader.checks import (  # noqa: F401 (re-exported for the tier files)
    expect,
    expect_close,
    expect_tensor,
    fail,
    leaf,
    show,
    tolerance,
)
from grader.sandbox import StudentError

F64 = torch.float64
SEQUENCE_WHY = ", one log-probability per response"
LOSS_WHY = ", a 0-dimensional loss (shape [], not a Python number)"


# ---- responses: token log-probs and a mask --------------------------------------------------
@dataclass(frozen=True)
class Tokens:
    """Inputs of sequence_logp. `hidden` cases never print their tensors."""

    token_logp: Tensor  # [B, L]
    mask: Tensor  # [B, L], 0/1 in any dtype
    name: str = ""
    hidden: bool = False

    @property
    def B(self) -> int:
        return self.token_logp.shape[0]

    @property
    def valid(self) -> Tensor:
        return self.mask != 0  # [B, L] bool

    def to(self, dtype: torch.dtype) -> Tokens:
        return replace(self, token_logp=self.token_logp.to(dtype))

    def padded_with(self, value: float) -> Tokens:
        """The same responses with every padded position holding `value`."""
        return replace(self, token_logp=self.token_logp.masked_fill(~self.valid, value))

    def describe(self) -> str:
        if self.hidden:
            return f"(hidden case {self.name})" if self.name else "(hidden case)"
        return f"on case {self.name!r}: token_logp={show(self.token_logp)}, mask={show(self.mask)}"


def make_tokens(
    seed: int,
    B: int,
    L: int,
    *,
    lengths=None,
    dtype=F64,
    name: str = "",
    hidden: bool = False,
) -> Tokens:
    """Seeded token log-probs in [-6, -0.01]; padding holds ordinary values unless a test puts
    extreme ones there. By default lengths are random, the first response full and, when
    B > 2, the last one empty."""
    g = torch.Generator().manual_seed(seed)
    token_logp = -(0.01 + 5.99 * torch.rand(B, L, generator=g, dtype=F64))  # [B, L]
    if lengths is None:
        lengths = torch.randint(0, L + 1, (B,), generator=g).tolist()
        lengths[0] = L
        if B > 2:
            lengths[-1] = 0
    positions = torch.arange(L).expand(B, L)  # [B, L]
    mask = positions < torch.tensor(lengths).unsqueeze(-1)  # [B, L] bool
    return Tokens(token_logp.to(dtype), mask, name or f"seed {seed}, B={B}, L={L}", hidden)


# ---- preference pairs: four sequence log-probs and beta -------------------------------------
@dataclass(frozen=True)
class Pairs:
    """Inputs of dpo_loss: B preference pairs. `hidden` cases never print their tensors."""

    policy_chosen: Tensor  # [B]
    policy_rejected: Tensor  # [B]
    ref_chosen: Tensor  # [B]
    ref_rejected: Tensor  # [B]
    beta: float = 0.1
    name: str = ""
    hidden: bool = False

    @property
    def B(self) -> int:
        return self.policy_chosen.shape[0]

    @property
    def margin(self) -> Tensor:
        """m = beta * ((pc - rc) - (pr - rr)) in float64, [B]."""
        pc, pr, rc, rr = (t.double() for t in self.tensors())
        return self.beta * ((pc - rc) - (pr - rr))

    def tensors(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return self.policy_chosen, self.policy_rejected, self.ref_chosen, self.ref_rejected

    def to(self, dtype: torch.dtype) -> Pairs:
        pc, pr, rc, rr = (t.to(dtype) for t in self.tensors())
        return replace(self, policy_chosen=pc, policy_rejected=pr, ref_chosen=rc, ref_rejected=rr)

    def describe(self) -> str:
        if self.hidden:
            return f"(hidden case {self.name})" if self.name else "(hidden case)"
        pc, pr, rc, rr = self.tensors()
        return (
            f"on case {self.name!r}: policy_chosen_logp={show(pc)}, "
            f"policy_rejected_logp={show(pr)}, ref_chosen_logp={show(rc)}, "
            f"ref_rejected_logp={show(rr)}, beta={self.beta:g}"
        )


def make_pairs(
    seed: int,
    B: int,
    *,
    beta: float = 0.1,
    spread: float = 5.0,
    offset: float = 0.0,
    dtype=F64,
    name: str = "",
    hidden: bool = False,
) -> Pairs:
    """Seeded pairs: reference sequence log-probs in [-60, -5] (moved by `offset`, which long
    responses need), the policy's within about `spread` of them, so margins of either sign and
    of size about beta * spread."""
    g = torch.Generator().manual_seed(seed)
    ref = offset - (5.0 + 55.0 * torch.rand(2, B, generator=g, dtype=F64))  # [2, B]
    policy = ref + spread * torch.randn(2, B, generator=g, dtype=F64)  # [2, B]
    pairs = Pairs(policy[0], policy[1], ref[0], ref[1], beta, name or f"seed {seed}, B={B}")
    return replace(pairs.to(dtype), hidden=hidden)


def pairs_with_margins(
    margins, *, beta: float = 0.1, name: str = "", dtype=F64, hidden: bool = False
) -> Pairs:
    """Pairs whose margins m are exactly the given ones: each response's log-ratio carries
    half of m / beta, and every log-prob stays below -20 (a real log-probability is <= 0)."""
    m = torch.tensor(margins, dtype=F64)  # [B]
    B = m.shape[0]
    half = m / (2 * beta)  # [B], log-ratio of the chosen response; minus that of the rejected
    base_chosen = -20.0 - torch.arange(B, dtype=F64)  # [B]
    base_rejected = -30.0 + 0.5 * torch.arange(B, dtype=F64)  # [B]
    ref_chosen = base_chosen - half.clamp(min=0)  # [B]
    ref_rejected = base_rejected + half.clamp(max=0)  # [B]
    pairs = Pairs(ref_chosen + half, ref_rejected - half, ref_chosen, ref_rejected, beta, name)
    return replace(pairs.to(dtype), hidden=hidden)


def expected_loss(pairs: Pairs) -> Tensor:
    """mean(softplus(-m)) in float64, written out here: log(1 + e^-m), stably."""
    m = pairs.margin
    losses = torch.clamp(-m, min=0) + torch.log1p(torch.exp(-m.abs()))  # [B]
    return losses.sum() / max(pairs.B, 1)


def expected_grads(pairs: Pairs) -> tuple[Tensor, Tensor]:
    """d loss / d pc = -beta * sigmoid(-m) / B and d loss / d pr = +beta * sigmoid(-m) / B."""
    weight = pairs.beta * torch.sigmoid(-pairs.margin) / max(pairs.B, 1)  # [B]
    return -weight, weight


# ---- calling the student --------------------------------------------------------------------
def call_sequence_logp(
    impl, tokens: Tokens, weights: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """sequence_logp [B] and d(sum(weights * result)) / d token_logp [B, L] on a fresh leaf."""
    token_logp = leaf(tokens.token_logp)
    result = impl.sequence_logp(token_logp, tokens.mask.clone())
    expect_tensor(result, "sequence_logp", (tokens.B,), why=SEQUENCE_WHY)
    seed = torch.ones(tokens.B, dtype=result.dtype) if weights is None else weights
    backward("sequence_logp", result, seed.to(result.dtype))
    return result.detach(), grad_of(token_logp, "token_logp", "sequence_logp")


def call_dpo_loss(impl, pairs: Pairs) -> tuple[Tensor, Tensor, Tensor]:
    """dpo_loss () and its gradients [B] with respect to both policy inputs (fresh leaves)."""
    chosen, rejected = leaf(pairs.policy_chosen), leaf(pairs.policy_rejected)
    loss = impl.dpo_loss(
        chosen, rejected, pairs.ref_chosen.clone(), pairs.ref_rejected.clone(), beta=pairs.beta
    )
    expect_tensor(loss, "dpo_loss", (), why=LOSS_WHY)
    backward("dpo_loss", loss)
    return (
        loss.detach(),
        grad_of(chosen, "policy_chosen_logp", "dpo_loss"),
        grad_of(rejected, "policy_rejected_logp", "dpo_loss"),
    )


def backward(name: str, result: Tensor, weights: Tensor | None = None) -> None:
    """Backpropagate `result` (weighted when it is a vector)."""
    expect(
        result.requires_grad,
        f"{name} returned a tensor that does not depend on its policy inputs (requires_grad "
        "is False); keep the computation differentiable: no .detach(), .item(), torch.tensor(...) "
        "or torch.no_grad() on the policy's log-probs",
    )
    total = (result * weights).sum() if weights is not None else result
    total.backward()


def grad_of(tensor: Tensor, name: str, function: str) -> Tensor:
    expect(tensor.grad is not None, f"after backward through {function}, {name}.grad is None")
    return tensor.grad.detach()


def reference_sequence_logp(reference, tokens: Tokens, weights: Tensor | None = None):
    """The reference's value and gradient, computed in float64 from the same inputs."""
    return call_sequence_logp(reference, tokens.to(F64), weights)


def reference_dpo_loss(reference, pairs: Pairs):
    return call_dpo_loss(reference, pairs.to(F64))


def raised_by(call) -> StudentError | None:
    """The student's own exception from `call()`, or None when it returned.

    A timeout or a crash is not an answer to the question; it propagates to the judge."""
    try:
        call()
    except StudentError as error:
        if error.kind != "exception":
            raise
        return error
    return None


def finite(t: Tensor) -> bool:
    return bool(torch.isfinite(t).all())
