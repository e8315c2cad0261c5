"""T0 Contract: the two functions can be called the documented way and return what they promise.

Nothing here checks the mathematics in depth (T1 and T2 do); a submission that passes T0 has
the right names, arguments, return types, shapes and dtypes, accepts every mask type, leaves
its inputs alone, lets the gradient reach the policy's log-probs and rejects beta <= 0.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from _checks import (
    LOSS_WHY,
    SEQUENCE_WHY,
    call_dpo_loss,
    call_sequence_logp,
    expect,
    expect_close,
    expect_tensor,
    fail,
    finite,
    make_pairs,
    make_tokens,
    raised_by,
    show,
)

pytestmark = pytest.mark.tier("T0")

PARAMETERS = {
    "sequence_logp": ("token_logp", "mask"),
    "dpo_loss": (
        "policy_chosen_logp",
        "policy_rejected_logp",
        "ref_chosen_logp",
        "ref_rejected_logp",
        "beta",
    ),
}
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_signature(student, name: str) -> None:
    """The documented parameters come first, in order; anything extra must be optional.

    Through the sandbox the judge reads the signature from the source (`student.signature`);
    when it cannot (a function built at run time), the calls by keyword below decide."""
    probe = getattr(student, "signature", None)
    signature = probe(name) if callable(probe) else None
    if signature is None:
        return
    parameters = signature.parameters
    wanted = PARAMETERS[name]
    names = tuple(parameters)[: len(wanted)]
    expect(names == wanted, f"{name} takes parameters {list(parameters)}; expected {list(wanted)}")
    optional = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    extra = [
        p.name
        for p in list(parameters.values())[len(wanted) :]
        if p.kind not in optional and p.default is inspect.Parameter.empty
    ]
    expect(not extra, f"{name} has extra required parameters {extra}")


def test_signatures(student):
    """Both functions take the documented parameter names, and beta defaults to 0.1."""
    for name in PARAMETERS:
        check_signature(student, name)
    tokens = make_tokens(1, B=3, L=4, lengths=[4, 2, 3])
    result = student.sequence_logp(token_logp=tokens.token_logp, mask=tokens.mask)
    expect_tensor(result, "sequence_logp (called by keyword)", (3,), why=SEQUENCE_WHY)
    pairs = make_pairs(2, B=3, spread=20.0)  # each call below gets fresh copies
    copies = [t.clone() for t in pairs.tensors()]
    by_keyword = dict(zip(PARAMETERS["dpo_loss"], copies, strict=False))
    explicit = student.dpo_loss(**by_keyword, beta=0.1)
    expect_tensor(explicit, "dpo_loss (called by keyword)", (), why=LOSS_WHY)
    default = student.dpo_loss(*(t.clone() for t in pairs.tensors()))
    expect_tensor(default, "dpo_loss (without beta)", (), why=LOSS_WHY)
    expect_close(
        default,
        explicit,
        "dpo_loss called without beta",
        0,
        0,
        hint="expected the value it has with beta=0.1: the default beta is 0.1",
    )


def test_sequence_logp_returns_one_value_per_response(student):
    """sequence_logp returns a Tensor of shape [B]: one log-prob per response, also when B = 1."""
    for B, L in ((4, 5), (1, 3)):
        tokens = make_tokens(B, B=B, L=L)
        result = student.sequence_logp(tokens.token_logp, tokens.mask)
        expect_tensor(result, f"sequence_logp (B={B}, L={L})", (B,), why=SEQUENCE_WHY)
        expect(result.is_floating_point(), f"sequence_logp returned dtype {result.dtype}")


def test_dpo_loss_returns_scalar_tensor(student):
    """dpo_loss returns a 0-dimensional Tensor, not a Python number and not shape [1] or [B]."""
    for B in (4, 1):
        loss = student.dpo_loss(*make_pairs(7 + B, B=B).tensors())
        expect_tensor(loss, f"dpo_loss (B={B})", (), why=LOSS_WHY)
        expect(loss.is_floating_point(), f"dpo_loss returned dtype {loss.dtype}")


def test_dtype_kept(student):
    """Both results keep their inputs' dtype: float16, bfloat16, float32 and float64."""
    tokens, pairs = make_tokens(11, B=3, L=6), make_pairs(12, B=3)
    for dtype in FLOAT_DTYPES:
        result = student.sequence_logp(tokens.to(dtype).token_logp, tokens.mask)
        what = f"sequence_logp on {dtype} token_logp"
        expect_tensor(result, what, (3,), dtype, why=SEQUENCE_WHY, like="token_logp")
        loss = student.dpo_loss(*pairs.to(dtype).tensors())
        what = f"dpo_loss on {dtype} log-probs"
        expect_tensor(loss, what, (), dtype, why=LOSS_WHY, like="the policy's log-probs")


def test_mask_types(student):
    """A mask given as bool, integer or float gives the same log-probs, in token_logp's dtype."""
    tokens = make_tokens(21, B=4, L=6).to(torch.float32)
    want = None
    for mask_dtype in (torch.bool, torch.uint8, torch.int64, torch.float32):
        mask = tokens.mask.to(mask_dtype)
        result = student.sequence_logp(tokens.token_logp, mask)
        what = f"sequence_logp with a {mask_dtype} mask"
        expect_tensor(result, what, (4,), torch.float32, why=SEQUENCE_WHY, like="token_logp")
        if want is None:
            want = result
            continue
        expect_close(
            result,
            want,
            what,
            1e-6,
            1e-6,
            f"(mask {show(mask)})",
            "expected the value it has with the same mask as bool; compare the mask with 0 "
            "(mask != 0) to get the valid tokens of any mask type",
        )


def test_inputs_not_modified(student):
    """Neither function changes its inputs (no in-place masked_fill_, sub_ or -=)."""
    tokens, pairs = make_tokens(31, B=3, L=5), make_pairs(32, B=3)
    inputs = {"token_logp": tokens.token_logp, "mask": tokens.mask}
    inputs |= dict(zip(PARAMETERS["dpo_loss"], pairs.tensors(), strict=False))
    before = {name: value.clone() for name, value in inputs.items()}
    student.sequence_logp(inputs["token_logp"], inputs["mask"])
    student.dpo_loss(*pairs.tensors())
    for name, value in inputs.items():
        if not torch.equal(value, before[name]):
            fail(
                f"{name} was modified by your code: it held {show(before[name])} and now holds "
                f"{show(value)}; work on new tensors (torch.where, masked_fill without the "
                "trailing underscore, a - b instead of a -= b) and leave the caller's tensors "
                "unchanged"
            )


def test_gradient_reaches_the_policy(student):
    """Backward gives a finite, non-zero gradient to valid tokens and to both policy inputs."""
    tokens = make_tokens(41, B=3, L=5, lengths=[5, 3, 1])
    _, grad = call_sequence_logp(student, tokens)
    expect(finite(grad), f"d sequence_logp / d token_logp is not finite: {show(grad)}")
    expect(
        bool((grad[tokens.valid] != 0).all()),
        f"d sequence_logp / d token_logp is zero on some valid tokens: {show(grad)} "
        f"{tokens.describe()}",
    )
    pairs = make_pairs(42, B=3, spread=3.0)
    _, chosen, rejected = call_dpo_loss(student, pairs)
    for name, g in (("policy_chosen_logp", chosen), ("policy_rejected_logp", rejected)):
        expect(
            finite(g) and bool((g != 0).all()),
            f"d dpo_loss / d {name} came out {show(g)}; expected finite and non-zero values "
            f"{pairs.describe()}",
        )


def test_beta_must_be_positive(student):
    """beta <= 0 raises ValueError with a message: it would erase or flip every preference."""
    pairs = make_pairs(43, B=2)
    for beta in (0.0, -0.1):
        error = raised_by(lambda beta=beta: student.dpo_loss(*pairs.tensors(), beta=beta))
        if error is None:
            fail(
                f"dpo_loss with beta={beta} returned instead of raising; expected a ValueError "
                "whose message says that beta must be positive"
            )
        expect(
            error.type_name == "ValueError",
            f"dpo_loss with beta={beta} raised {error.type_name}; expected ValueError "
            "(raise ValueError(...) explicitly rather than assert)",
        )
        expect(
            bool(error.message.strip()),
            f"dpo_loss with beta={beta} raised a ValueError without a message; say what was "
            "expected and what came, e.g. f'beta must be positive; got {beta}'",
        )
