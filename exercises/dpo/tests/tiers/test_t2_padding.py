"""T2 Math and gradient properties, part 1: padding and empty responses in sequence_logp.

Padded positions may hold anything a real pipeline leaves there: -inf (a masked logit's
log-softmax), +inf, huge numbers, NaN. Each test compares the submission with itself on the
same responses with ordinary padding, so a failure here is about padding alone (T1 judges
the sum).
"""

from __future__ import annotations

import pytest
import torch
from _checks import (
    Tokens,
    call_sequence_logp,
    expect,
    expect_close,
    fail,
    finite,
    make_tokens,
    show,
)

pytestmark = pytest.mark.tier("T2")

EXTREMES = (float("-inf"), float("inf"), 1e30, float("nan"))
ADVICE = (
    "padding must be removed before the sum: select the valid tokens (torch.where, "
    "masked_fill, boolean indexing) rather than multiplying by the mask (0 * inf and "
    "0 * nan are nan)"
)


def student_clean(student, tokens: Tokens) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's own result on ordinary padding: the padding tests compare against it."""
    got, grad = call_sequence_logp(student, tokens)
    if not (finite(got) and finite(grad)):
        fail(
            "sequence_logp or its gradient is not finite even when padding holds ordinary "
            f"values: {show(got)}; fix that first (T1 shows where)"
        )
    return got, grad


def check_padding(where: str, got, grad, clean, tokens: Tokens) -> None:
    """Value finite and unchanged; gradient exactly 0 on padding and unchanged on valid tokens."""
    clean_got, clean_grad = clean
    shown = "" if tokens.hidden else f" {show(got)}"
    expect(finite(got), f"{where}, sequence_logp came out non-finite{shown}; {ADVICE}")
    expect_close(
        got,
        clean_got,
        f"sequence_logp {where}",
        1e-9,
        1e-12,
        context="expected the value you return for ordinary padding",
        hint=ADVICE,
        hidden=tokens.hidden,
    )
    padded = grad[~tokens.valid]
    if not bool((padded == 0).all()):
        shown = "not all 0" if tokens.hidden else show(padded)
        fail(
            f"{where}, d sequence_logp / d token_logp on padded positions is {shown}; expected "
            "exactly 0 (torch.where sends no gradient to the branch it did not select; "
            "multiplying by a 0 mask sends 0 * inf = nan)"
        )
    what = f"d sequence_logp / d token_logp {where}"
    expect_close(grad, clean_grad, what, 1e-9, 1e-12, hint=ADVICE, hidden=tokens.hidden)


def test_padding_never_matters(student):
    """Padding holding -inf, +inf, 1e30 or NaN changes neither the log-probs nor their gradient."""
    tokens = make_tokens(51, B=3, L=6, lengths=[6, 2, 4], name="padded")
    clean = student_clean(student, tokens)
    for value in EXTREMES:
        got, grad = call_sequence_logp(student, tokens.padded_with(value))
        check_padding(f"when the padded positions hold {value}", got, grad, clean, tokens)


def test_empty_response_gives_zero(student):
    """A response with no valid token has log-prob exactly 0 and sends no gradient back."""
    tokens = make_tokens(52, B=3, L=4, lengths=[4, 0, 2], name="middle response empty")
    for value in (-0.5, float("-inf"), float("nan")):
        case = tokens.padded_with(value)
        got, grad = call_sequence_logp(student, case)
        expect(
            bool(got[1] == 0),
            lambda case=case, got=got: (
                f"sequence_logp of the empty response (row 1) came out {float(got[1])}; "
                "expected exactly 0: the sum over no tokens is 0 (no division by its length, "
                f"no padding in the sum); {case.describe()}"
            ),
        )
        expect(
            bool((grad[1] == 0).all()),
            f"d sequence_logp / d token_logp on the empty response is {show(grad[1])}; "
            "expected all zeros",
        )


@pytest.mark.hidden
def test_padding_mixture_never_matters(student):
    """Padding holding a random mixture of extreme values, in float32, changes nothing."""
    tokens = make_tokens(
        55, B=6, L=9, lengths=[9, 1, 4, 0, 2, 5], dtype=torch.float32, name="mixture", hidden=True
    )
    clean = student_clean(student, tokens)
    g = torch.Generator().manual_seed(55)
    pool = torch.tensor([float("-inf"), float("inf"), 1e30, -1e30, float("nan")])
    junk = pool[torch.randint(0, len(pool), tokens.token_logp.shape, generator=g)]  # [B, L]
    dirty = Tokens(torch.where(tokens.valid, tokens.token_logp, junk), tokens.mask, hidden=True)
    got, grad = call_sequence_logp(student, dirty)
    check_padding("when the padding holds a mixture of extreme values", got, grad, clean, tokens)
