"""T1 Reference compare: values and gradients agree with the reference.

The statement's worked example comes first. The visible tests show their inputs when they
fail; the hidden ones (Submit only) draw more varied batches (sizes, betas, margins, long
responses) and say which kind of case failed without revealing its tensors. Comparisons are
made against the reference evaluated in float64 on the very same inputs, with a tolerance
fitted to the dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from _checks import (
    F64,
    Pairs,
    Tokens,
    call_dpo_loss,
    call_sequence_logp,
    expect,
    expect_close,
    expect_tensor,
    grad_of,
    leaf,
    make_pairs,
    make_tokens,
    reference_dpo_loss,
    reference_sequence_logp,
    tolerance,
)
from _hints import loss_hint, sequence_hint

pytestmark = pytest.mark.tier("T1")

TOKEN_CASES = (
    make_tokens(1, B=4, L=6, name="small batch"),
    make_tokens(2, B=3, L=9, lengths=[1, 9, 4], name="short and long responses"),
    make_tokens(3, B=5, L=3, lengths=[3, 0, 2, 3, 1], name="an empty response"),
)
PAIR_CASES = (
    make_pairs(4, B=4, beta=0.1, spread=5.0, name="beta 0.1"),
    make_pairs(5, B=6, beta=0.5, spread=10.0, name="beta 0.5, wide margins"),
    make_pairs(6, B=3, beta=2.0, spread=1.0, name="beta 2"),
    make_pairs(11, B=4, beta=0.1, spread=8.0, offset=-3000.0, name="long responses"),
)


def hidden_token_cases() -> list[Tokens]:
    """Ten seeded batches of responses of varied sizes (the same on every run)."""
    g = torch.Generator().manual_seed(2023)
    cases = []
    for k in range(10):
        B = int(torch.randint(1, 9, (1,), generator=g))
        L = int(torch.randint(1, 41, (1,), generator=g))
        name = f"#{k}: {B} responses of up to {L} tokens"
        cases.append(make_tokens(200 + k, B, L, name=name, hidden=True))
    return cases


def hidden_pair_cases() -> list[Pairs]:
    """Ten seeded batches of pairs that vary the batch size, beta and the margins' spread."""
    g = torch.Generator().manual_seed(2305)
    betas, spreads = (0.01, 0.1, 0.3, 1.0, 5.0), (0.5, 5.0, 30.0)
    cases = []
    for k in range(10):
        B = int(torch.randint(1, 65, (1,), generator=g))
        beta, spread = betas[k % len(betas)], spreads[k % len(spreads)]
        name = f"#{k}: {B} pairs, beta {beta}, log-ratios spread {spread}"
        cases.append(make_pairs(300 + k, B, beta=beta, spread=spread, name=name, hidden=True))
    return cases


def weights_for(tokens: Tokens) -> torch.Tensor:
    """A random cotangent for sequence_logp: d(sum(w * result)) / d token_logp checks every
    response's gradient at once."""
    g = torch.Generator().manual_seed(tokens.B * 1000 + tokens.token_logp.shape[-1])
    return torch.randn(tokens.B, generator=g, dtype=F64)  # [B]


def compare_sequence(student, reference, tokens: Tokens, with_grad: bool = True) -> None:
    rtol, atol = tolerance(tokens.token_logp.dtype)
    weights = weights_for(tokens)
    got, grad = call_sequence_logp(student, tokens, weights)
    want, want_grad = reference_sequence_logp(reference, tokens, weights)
    expect_close(
        got,
        want,
        "sequence_logp",
        rtol,
        atol,
        tokens.describe,
        lambda: sequence_hint(got, want, tokens),
        hidden=tokens.hidden,
    )
    if with_grad:
        what = "d(sum(w * sequence_logp)) / d token_logp"
        expect_close(grad, want_grad, what, rtol, atol, tokens.describe, hidden=tokens.hidden)


def compare_loss(student, reference, pairs: Pairs, with_grad: bool = True) -> None:
    rtol, atol = tolerance(pairs.policy_chosen.dtype)
    loss, chosen, rejected = call_dpo_loss(student, pairs)
    want, want_chosen, want_rejected = reference_dpo_loss(reference, pairs)
    expect_close(
        loss,
        want,
        "dpo_loss",
        rtol,
        atol,
        pairs.describe,
        lambda: loss_hint(loss, want, pairs),
        hidden=pairs.hidden,
    )
    if with_grad:
        for name, got, grad in (
            ("policy_chosen_logp", chosen, want_chosen),
            ("policy_rejected_logp", rejected, want_rejected),
        ):
            what = f"d loss / d {name}"
            expect_close(got, grad, what, rtol, atol, pairs.describe, hidden=pairs.hidden)


def test_worked_example(student):
    """The statement's worked example: loss 0.313262, d loss / d pc -0.134471, d / d pr +0.134471.

    pc - rc = 1, pr - rr = -1 and beta = 0.5 give m = 1, loss log(1 + e^-1) and
    d loss / d pc = -beta * sigmoid(-1)."""
    pc, pr, rc, rr = (torch.tensor([v], dtype=F64) for v in (-5.0, -12.0, -6.0, -11.0))
    pairs = Pairs(pc, pr, rc, rr, beta=0.5, name="the worked example")
    loss, chosen, rejected = call_dpo_loss(student, pairs)
    want = torch.tensor(math.log1p(math.exp(-1.0)), dtype=F64)
    weight = 0.5 / (1.0 + math.e)  # beta * sigmoid(-1)
    expect_close(
        loss,
        want,
        "dpo_loss",
        *tolerance(F64),
        pairs.describe,
        lambda: loss_hint(loss, want, pairs),
    )
    hint = "the gradient is -beta * sigmoid(-m) on pc and +beta * sigmoid(-m) on pr"
    for name, got, value in (
        ("policy_chosen_logp", chosen, -weight),
        ("policy_rejected_logp", rejected, weight),
    ):
        want_grad = torch.tensor([value], dtype=F64)
        what = f"d loss / d {name}"
        expect_close(got, want_grad, what, *tolerance(F64), pairs.describe, hint)


def test_sequence_logp_matches_reference(student, reference):
    """sequence_logp and its gradient match the reference on three small batches."""
    for tokens in TOKEN_CASES:
        compare_sequence(student, reference, tokens)


def test_dpo_loss_matches_reference(student, reference):
    """dpo_loss and its gradients match the reference on four batches with betas 0.1 to 2."""
    for pairs in PAIR_CASES:
        compare_loss(student, reference, pairs)


def test_low_precision_matches_reference(student, reference):
    """float32, float16 and bfloat16 inputs give the reference's values within their precision."""
    tokens = make_tokens(7, B=4, L=12, lengths=[12, 5, 9, 0], name="low precision")
    pairs = make_pairs(8, B=5, beta=0.1, spread=3.0, name="low precision")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        exact = dtype == torch.float32  # half-type gradients are too coarse to compare
        compare_sequence(student, reference, tokens.to(dtype), with_grad=exact)
        compare_loss(student, reference, pairs.to(dtype), with_grad=exact)


@dataclass(frozen=True)
class Chain:
    """Token log-probs of B chosen and B rejected responses, under the policy and under the
    reference model (the same masks), and beta."""

    chosen: Tokens
    rejected: Tokens
    ref_chosen: Tokens
    ref_rejected: Tokens
    beta: float

    def describe(self) -> str:
        return (
            f"chosen {self.chosen.describe()}; rejected {self.rejected.describe()}; "
            f"beta={self.beta:g}"
        )


def make_chain(seed: int, B: int, beta: float) -> Chain:
    chosen, rejected = make_tokens(seed, B, 5, name="chosen"), make_tokens(seed + 1, B, 7)
    g = torch.Generator().manual_seed(seed)

    def ref(tokens: Tokens) -> Tokens:
        shift = 0.3 * torch.randn(tokens.token_logp.shape, generator=g, dtype=F64)
        return Tokens(tokens.token_logp + shift, tokens.mask, f"ref {tokens.name}")

    rejected = Tokens(rejected.token_logp, rejected.mask, "rejected")
    return Chain(chosen, rejected, ref(chosen), ref(rejected), beta)


def run_chain(impl, chain: Chain) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dpo_loss of impl's own sequence_logp, and its gradients to both policy token tensors."""
    chosen, rejected = leaf(chain.chosen.token_logp), leaf(chain.rejected.token_logp)
    logps = [
        impl.sequence_logp(chosen, chain.chosen.mask),
        impl.sequence_logp(rejected, chain.rejected.mask),
        impl.sequence_logp(chain.ref_chosen.token_logp.clone(), chain.ref_chosen.mask),
        impl.sequence_logp(chain.ref_rejected.token_logp.clone(), chain.ref_rejected.mask),
    ]
    for logp in logps:
        expect_tensor(logp, "sequence_logp", (chain.chosen.B,))
    loss = impl.dpo_loss(*logps, beta=chain.beta)
    expect_tensor(loss, "dpo_loss", ())
    expect(loss.requires_grad, "dpo_loss(sequence_logp(...), ...) does not depend on the tokens")
    loss.backward()
    through = "dpo_loss(sequence_logp(...), ...)"
    return (
        loss.detach(),
        grad_of(chosen, "the chosen token_logp", through),
        grad_of(rejected, "the rejected token_logp", through),
    )


def test_chained_from_token_logps(student, reference):
    """Your two functions chained, token log-probs to loss and back, match the reference chained.

    dpo_loss of your sequence_logp is backpropagated to the token log-probs of both responses
    of each pair."""
    chain = make_chain(9, B=3, beta=0.5)
    got = run_chain(student, chain)
    want = run_chain(reference, chain)
    names = ("the loss", "d loss / d chosen token_logp", "d loss / d rejected token_logp")
    for name, g, w in zip(names, got, want, strict=True):
        expect_close(g, w, f"{name} (chained)", *tolerance(F64), chain.describe)


@pytest.mark.hidden
def test_sequence_logp_matches_reference_hidden(student, reference):
    """sequence_logp and its gradient match the reference on ten varied hidden batches."""
    for tokens in hidden_token_cases():
        compare_sequence(student, reference, tokens)


@pytest.mark.hidden
def test_dpo_loss_matches_reference_hidden(student, reference):
    """dpo_loss and its gradients match the reference on ten varied hidden batches."""
    for pairs in hidden_pair_cases():
        compare_loss(student, reference, pairs)


@pytest.mark.hidden
def test_long_responses_match_reference(student, reference):
    """Responses of up to 2048 tokens match the reference in float64 and float32."""
    tokens = make_tokens(10, B=3, L=2048, lengths=[2048, 1500, 7], name="long", hidden=True)
    for dtype in (F64, torch.float32):
        compare_sequence(student, reference, tokens.to(dtype))
