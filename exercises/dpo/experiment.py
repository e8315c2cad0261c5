"""The T3 toy: which preference pairs a DPO step pushes hardest, run through any impl.

The paper's reading of the gradient: a pair weighs sigmoid(-m), where m is the implicit
reward margin beta * ((pc - rc) - (pr - rr)); a pair the implicit reward model ranks wrong
(m < 0) weighs close to 1, one it already ranks right weighs close to 0. The toy measures
that weight through an implementation's gradients, on a sweep of margins and on three pairs
built from token log-probs (with extreme values in the padding).

`impl` is anything with `sequence_logp` and `dpo_loss`: the reference module, a student's
module, or the grader's sandbox proxy. Only plain calls, `requires_grad` inputs and
`.backward()` are used. matplotlib is imported only when plots are drawn.

    python exercises/dpo/experiment.py [--impl PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

import torch

BETA = 0.5
SWEEP = tuple(-8.0 + 0.5 * k for k in range(33))  # implicit reward margins m, -8 .. 8
PAIR_LABELS = ("ranked wrong (m = -2)", "a tie (m = 0)", "ranked right (m = +2)")
# token log-ratios log(pi / pi_ref) of each pair's chosen and rejected response; their sums
# differ by -4, 0 and +4, so with beta = 0.5 the margins are -2, 0 and +2
CHOSEN_RATIOS = ((-1.0, -1.0), (0.5, -0.5, 0.0), (0.5, 0.5, 0.5, 0.5))
REJECTED_RATIOS = ((1.0, 0.5, 0.5), (0.0,), (-1.0, -1.0))
REF_TOKEN_LOGP = (-0.7, -2.3, -1.1, -3.0)  # the reference model's log-prob of tokens 0..3
PAIR_MARGINS = tuple(
    BETA * (sum(c) - sum(r)) for c, r in zip(CHOSEN_RATIOS, REJECTED_RATIOS, strict=True)
)
PADDING = (-math.inf, math.nan, 1e30, math.inf)  # what padded position t holds
L = 4  # token positions per response
TOL = 1e-6

F64 = torch.float64
PLOTS = ("gradient_weight",)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def _finite(values: Any) -> Any:
    """JSON has no NaN/inf: a broken implementation's non-finite numbers become None."""
    if isinstance(values, list):
        return [_finite(v) for v in values]
    return values if math.isfinite(values) else None


def _floats(result: Any, what: str, shape: tuple[int, ...]) -> Any:
    """The numbers of a returned tensor, after checking its type and shape."""
    if not isinstance(result, torch.Tensor):
        raise TypeError(f"{what} returned {type(result).__name__}; expected a torch.Tensor")
    if tuple(result.shape) != shape:
        raise ValueError(f"{what} returned shape {list(result.shape)}; expected {list(shape)}")
    return _finite(result.detach().to("cpu", F64).tolist())


def _grad(t: torch.Tensor) -> Any:
    """A leaf's gradient as numbers; None everywhere when none arrived."""
    if t.grad is None:
        return _finite(torch.full_like(t, math.nan).tolist())
    return _floats(t.grad, "the gradient", tuple(t.shape))


# ----------------------------------------------------------------------------- inputs


def pairs_for(margins) -> tuple[torch.Tensor, ...]:
    """pc, pr, rc, rr [B] whose margins are `margins` (half from each response's log-ratio);
    every log-prob stays below -10."""
    half = torch.tensor(margins, dtype=F64) / (2 * BETA)  # [B]
    steps = torch.arange(len(margins), dtype=F64)  # [B]
    ref_chosen = -10.0 - 0.25 * steps - half.clamp(min=0)  # [B]
    ref_rejected = -14.0 - 0.1 * steps + half.clamp(max=0)  # [B]
    return ref_chosen + half, ref_rejected - half, ref_chosen, ref_rejected


def token_batch(ratios) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """policy and reference token log-probs [3, L] and the mask [3, L] for one side of the
    three pairs; padded positions hold -inf, NaN, 1e30 and +inf."""
    policy = torch.tensor([PADDING] * len(ratios), dtype=F64)  # [3, L]
    ref = torch.tensor([PADDING[::-1]] * len(ratios), dtype=F64)  # [3, L]
    mask = torch.zeros(len(ratios), L, dtype=torch.long)  # [3, L]
    for i, row in enumerate(ratios):
        n = len(row)
        ref[i, :n] = torch.tensor(REF_TOKEN_LOGP[:n], dtype=F64)
        policy[i, :n] = ref[i, :n] + torch.tensor(row, dtype=F64)
        mask[i, :n] = 1
    return policy, ref, mask


# ----------------------------------------------------------------------------- runs


def _backward(loss: Any) -> float | None:
    """The loss's value, after backpropagating it (a detached loss leaves the grads None)."""
    value = _floats(loss, "dpo_loss", ())
    if loss.requires_grad:
        loss.backward()
    return value


def loss_and_grads(impl: Any, pc, pr, rc, rr) -> tuple[Any, Any, Any]:
    """impl.dpo_loss on fresh leaves of the policy inputs: (loss, d/d pc, d/d pr)."""
    chosen, rejected = pc.clone().requires_grad_(True), pr.clone().requires_grad_(True)
    value = _backward(impl.dpo_loss(chosen, rejected, rc.clone(), rr.clone(), beta=BETA))
    return value, _grad(chosen), _grad(rejected)


def _weights(grads: list, pairs: int, sign: float) -> list:
    """The weight sigmoid(-m) read back from a gradient: d loss / d pc = -beta w / B."""
    return [None if g is None else 0.0 + sign * g * pairs / BETA for g in grads]


def run_sweep(impl: Any) -> dict[str, list]:
    """One call with a pair per margin of SWEEP: each pair's weight from both gradients."""
    _, chosen, rejected = loss_and_grads(impl, *pairs_for(SWEEP))
    return {
        "margin": list(SWEEP),
        "weight": _weights(chosen, len(SWEEP), -1.0),
        "rejected_weight": _weights(rejected, len(SWEEP), 1.0),
    }


def run_pairs(impl: Any) -> dict[str, Any]:
    """The three pairs as sequence log-probs: the loss and both gradients of each pair."""
    loss, chosen, rejected = loss_and_grads(impl, *pairs_for(PAIR_MARGINS))
    margins = list(PAIR_MARGINS)
    return {"margin": margins, "loss": loss, "grad_chosen": chosen, "grad_rejected": rejected}


def run_tokens(impl: Any) -> dict[str, Any]:
    """The three pairs from token log-probs, through impl.sequence_logp and impl.dpo_loss:
    d loss / d token log-prob of every chosen and rejected token, padding included."""
    chosen, ref_chosen, mask_c = token_batch(CHOSEN_RATIOS)
    rejected, ref_rejected, mask_r = token_batch(REJECTED_RATIOS)
    chosen, rejected = chosen.requires_grad_(True), rejected.requires_grad_(True)
    sides = ((chosen, mask_c), (rejected, mask_r), (ref_chosen, mask_c), (ref_rejected, mask_r))
    logps = [impl.sequence_logp(tokens, mask.clone()) for tokens, mask in sides]
    for logp in logps:
        _floats(logp, "sequence_logp", (len(CHOSEN_RATIOS),))
    return {
        "loss": _backward(impl.dpo_loss(*logps, beta=BETA)),
        "grad_chosen": _grad(chosen),
        "grad_rejected": _grad(rejected),
        "mask_chosen": mask_c.tolist(),
        "mask_rejected": mask_r.tolist(),
    }


# ----------------------------------------------------------------------------- expected


def expected_values() -> dict[str, Any]:
    """What a correct implementation gives: weights sigmoid(-m), gradients -+beta sigmoid(-m)/B."""
    pairs = len(PAIR_MARGINS)
    grad = [-BETA * sigmoid(-m) / pairs for m in PAIR_MARGINS]  # d loss / d pc
    loss = sum(softplus(-m) for m in PAIR_MARGINS) / pairs

    def tokens(ratios, sign: float) -> list[list[float]]:
        return [
            [sign * g if t < len(r) else 0.0 for t in range(L)]
            for g, r in zip(grad, ratios, strict=True)
        ]

    return {
        "weight": [sigmoid(-m) for m in SWEEP],
        "margin": list(PAIR_MARGINS),
        "loss": loss,
        "grad_chosen": grad,
        "grad_rejected": [-g for g in grad],
        "token_grad_chosen": tokens(CHOSEN_RATIOS, 1.0),
        "token_grad_rejected": tokens(REJECTED_RATIOS, -1.0),
    }


def close(value: float | None, target: float) -> bool:
    return value is not None and abs(value - target) <= TOL * (1 + abs(target))


def all_close(values: list, targets: list) -> bool:
    return len(values) == len(targets) and all(map(close, values, targets))


def _cells(grads: list, mask: list, valid: bool) -> list:
    """The gradient cells of the valid tokens, or of the padded positions, row after row."""
    return [
        g
        for row, m_row in zip(grads, mask, strict=True)
        for g, m in zip(row, m_row, strict=True)
        if bool(m) == valid
    ]


def toy_checks(result: dict[str, Any], want: dict[str, Any]) -> dict[str, bool]:
    """Named pass/fail facts about the toy, each one a claim of the paper or the contract."""
    sweep, pairs, tokens = result["sweep"], result["pairs"], result["tokens"]
    weights = sweep["weight"]
    sides = (("chosen", tokens["mask_chosen"]), ("rejected", tokens["mask_rejected"]))
    return {
        "weight_is_sigmoid": all_close(weights, want["weight"])
        and all_close(sweep["rejected_weight"], want["weight"]),
        "wrong_pairs_weigh_most": None not in weights
        and all(w > 0 for w in weights)
        and all(a > b for a, b in itertools.pairwise(weights)),
        "pair_gradients_match": all_close(pairs["grad_chosen"], want["grad_chosen"])
        and all_close(pairs["grad_rejected"], want["grad_rejected"]),
        "loss_matches": close(pairs["loss"], want["loss"]),
        "token_loss_matches": close(tokens["loss"], want["loss"]),
        "token_gradients_match": all(
            all_close(
                _cells(tokens[f"grad_{side}"], mask, True),
                _cells(want[f"token_grad_{side}"], mask, True),
            )
            for side, mask in sides
        ),
        "padding_zero_grad": all(
            g == 0.0 for side, mask in sides for g in _cells(tokens[f"grad_{side}"], mask, False)
        ),
    }


# ----------------------------------------------------------------------------- tables


PAIR_COLUMNS = (
    "margin m",
    "weight σ(-m), yours",
    "d loss / d pc, yours",
    "d loss / d pc, formula",
    "d loss / d pr, yours",
    "d loss / d pr, formula",
)


def pairs_table(pairs: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    """The three pairs: margin, the weight read from the gradient, both gradients."""
    weights = _weights(pairs["grad_chosen"], len(PAIR_LABELS), -1.0)
    columns = zip(
        pairs["margin"],
        weights,
        pairs["grad_chosen"],
        want["grad_chosen"],
        pairs["grad_rejected"],
        strict=True,
    )
    rows = [
        {"label": label, "cells": [m, w, got_c, want_c, got_r, -want_c]}
        for label, (m, w, got_c, want_c, got_r) in zip(PAIR_LABELS, columns, strict=True)
    ]
    return {"columns": list(PAIR_COLUMNS), "rows": rows}


def token_table(tokens: dict[str, Any]) -> dict[str, Any]:
    """d loss / d token log-prob of the six responses; padding cells muted."""
    rows = []
    for i in range(len(PAIR_LABELS)):
        for side in ("chosen", "rejected"):
            mask = tokens[f"mask_{side}"][i]
            rows.append(
                {
                    "label": f"pair {i + 1}, {side}",
                    "cells": tokens[f"grad_{side}"][i],
                    "muted": [not bool(m) for m in mask],
                }
            )
    return {"columns": [f"token {t}" for t in range(L)], "rows": rows}


# ----------------------------------------------------------------------------- the toy


def run_toy(impl: Any) -> dict[str, Any]:
    """Run the sweep, the three pairs and their tokens through impl; a JSON-ready dict."""
    want = expected_values()
    measured = {"sweep": run_sweep(impl), "pairs": run_pairs(impl), "tokens": run_tokens(impl)}
    return {
        "beta": BETA,
        "pair_labels": list(PAIR_LABELS),
        **measured,
        "loss": measured["pairs"]["loss"],
        "expected": want,
        "checks": toy_checks(measured, want),
        "tables": {
            "pairs": pairs_table(measured["pairs"], want),
            "token_grads": token_table(measured["tokens"]),
        },
    }


# ----------------------------------------------------------------------------- plots


def _nan(values: list) -> list[float]:
    return [math.nan if v is None else v for v in values]


def _figure(width: float, height: float):
    """A Figure with its own Agg canvas: no pyplot global state, safe in threads. No layout
    engine, which would measure every label before each draw (a third of the plot's CPU):
    the axes get fixed margins instead (`subplots(gridspec_kw=...)`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _draw_gradient_weight(result: dict[str, Any]):
    """Weight sigmoid(-m) against the margin: tested points over the analytic curve."""
    fig = _figure(10, 5.6)  # margins: 0.8 in left, 0.2 right, 0.6 below, 0.45 above
    ax = fig.subplots(gridspec_kw={"left": 0.08, "right": 0.98, "bottom": 0.107, "top": 0.92})
    sweep, pairs = result["sweep"], result["pairs"]
    dense = [-8.5 + 17.0 * k / 600 for k in range(601)]
    ax.axvspan(-8.5, 0.0, color="#fde2c8", label="ranked wrong by the implicit reward (m < 0)")
    ax.plot(dense, [sigmoid(-m) for m in dense], "--", color="0.45", lw=1.5, label="σ(-m)")
    ax.plot(
        sweep["margin"],
        _nan(sweep["weight"]),
        "o",
        color="#c0392b",
        ms=5,
        label="tested, from d loss / d (chosen log-prob)",
    )
    ax.plot(
        sweep["margin"],
        _nan(sweep["rejected_weight"]),
        "x",
        color="#2c7fb8",
        ms=7,
        label="tested, from d loss / d (rejected log-prob)",
    )
    weights = _weights(pairs["grad_chosen"], len(PAIR_LABELS), -1.0)
    for label, m, w in zip(
        result.get("pair_labels", PAIR_LABELS), pairs["margin"], weights, strict=True
    ):
        if w is not None and math.isfinite(w):
            ax.plot([m], [w], "*", color="black", ms=14, zorder=5)
            ax.annotate(f"{label}: {w:.4f}", (m, w), xytext=(10, 8), textcoords="offset points")
    ax.set(
        xlabel="implicit reward margin m = β·((log π(y_w) − log π_ref(y_w)) − "
        "(log π(y_l) − log π_ref(y_l)))",
        ylabel="gradient weight of the pair",
        title=f"Each pair's weight in the DPO gradient (β = {result.get('beta', BETA):g}): "
        "the pairs ranked wrong weigh most",
    )
    ax.axhline(0, color="0.7", lw=0.8)
    ax.grid(alpha=0.3)
    ax.set_xlim(-8.5, 8.5)
    ax.legend(loc="upper right", fontsize=9)
    return fig


DRAW = {"gradient_weight": _draw_gradient_weight}


def render_plots(result: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write gradient_weight.png from a toy result (`sweep` and `pairs` are what it needs);
    return name -> path. The analytic curve is recomputed here."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, draw in DRAW.items():
        path = out / f"{name}.png"
        draw(result).savefig(path, dpi=100)
        paths[name] = path
    return paths


# ----------------------------------------------------------------------------- command line


def load_impl(path: str | Path):
    """Import an implementation file by path; it must define both functions."""
    from grader.exercise import load_module

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no implementation file at {path}")
    module = load_module(path, f"dpo_toy_impl_{path.stem}")
    missing = [f for f in ("sequence_logp", "dpo_loss") if not callable(getattr(module, f, 0))]
    if missing:
        raise AttributeError(f"{path} defines no function {', '.join(missing)}")
    return module


def _summary(result: dict[str, Any], paths: dict[str, Path], out: Path) -> str:
    loss = "NaN" if result["loss"] is None else f"{result['loss']:.6f}"
    checks = "\n".join(
        f"  [{'ok' if ok else 'FAIL'}] {name}" for name, ok in result["checks"].items()
    )
    files = ", ".join(p.name for p in paths.values())
    want = result["expected"]["loss"]
    return (
        f"loss of the three pairs: {loss} (expected {want:.6f})\nchecks:\n{checks}\n"
        f"wrote {out / 'toy.json'} and {files}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run DPO's toy through an implementation.")
    parser.add_argument(
        "--impl",
        default=str(Path(__file__).parent / "reference" / "dpo.py"),
        help="file defining sequence_logp and dpo_loss (default: the reference)",
    )
    parser.add_argument("--out", default="out/dpo-toy", help="output folder (default: out/dpo-toy)")
    args = parser.parse_args(argv)
    try:
        impl = load_impl(args.impl)
    except Exception as exc:  # the file is broken: say so in one line
        print(f"error: cannot load {args.impl}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    try:
        result = run_toy(impl)
    except Exception as exc:  # the implementation raised while the toy ran
        print(f"error: the implementation raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out)
    try:
        paths = render_plots(result, out)
        (out / "toy.json").write_text(json.dumps(result, indent=2, allow_nan=False))
    except OSError as exc:
        print(f"error: cannot write to {out}: {exc}", file=sys.stderr)
        return 2
    print(_summary(result, paths, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
