"""The T3 toy: GSPO's three-response diagnostic and two ratio sweeps, run through any impl.

`impl` is anything with `sequence_ratio` and `gspo_loss`: the reference module, a student's
module, or the grader's sandbox proxy. Only ordinary tensor calls, `requires_grad` inputs and
`.backward()` are used, so the same code runs locally and through the remote-autograd proxy.
matplotlib is imported only when plots are drawn, so importing this file stays cheap.

    python experiment.py [--impl PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

CLIP_EPS = 0.2
L = 4  # token positions per response in the diagnostic
ROW_LABELS = ("A=+1, token ratios [2, 0.5]", "A=+1, ratio 1.5", "A=-1, ratio 0.5")
ADVANTAGES = (1.0, 1.0, -1.0)
TOKEN_RATIOS = ((2.0, 0.5), (1.5, 2.25, 1.0), (0.25, 0.5, 0.5, 1.0))  # geometric means 1, 1.5, 0.5
OLD_LOGP = ((-1.2, -0.9), (-1.5, -2.0, -0.6), (-0.3, -1.1, -0.9, -2.0))
PADDING = {  # (row, position): (logp, old_logp); a correct implementation never sees these
    (0, 2): (-math.inf, 1e30),
    (0, 3): (math.nan, math.inf),
    (1, 3): (1e30, -math.inf),
}
N_X = 25  # points of the log-ratio sweep across [-1, 1]
# first token ratio, 0.5 .. 2.0 in steps of 1/8: holds the seeds' 1.5, and steps over 1.2 and
# 1.8, where the token-level and the GSPO clip switch on (a gradient there is a coin toss)
R1_VALUES = tuple(0.5 + 0.125 * k for k in range(13))
R2 = 0.8  # second token ratio in the seeds' two-token example
BASE_LOGP = -2.0  # old log-prob of the sweeps' one-token responses
ABS_TOL, REL_TOL = 1e-6, 1e-5

F64 = torch.float64


# ----------------------------------------------------------------------------- analytic GSPO


def _clip(s: float, eps: float) -> float:
    return min(max(s, 1 - eps), 1 + eps)


def _is_clipped(s: float, a: float, eps: float) -> bool:
    """The surrogate sits on its flat branch: the clip is active in the direction A pushes."""
    return (a > 0 and s > 1 + eps) or (a < 0 and s < 1 - eps)


def surrogate(s: float, a: float, eps: float = CLIP_EPS) -> tuple[float, float]:
    """min(sA, clip(s)A) and its derivative with respect to log s."""
    value = min(s * a, _clip(s, eps) * a)
    return value, 0.0 if _is_clipped(s, a, eps) else s * a


def expected_values(eps: float = CLIP_EPS) -> dict[str, Any]:
    """The diagnostic's analytic ratios, loss, gradient matrix and sweep curves."""
    batch = len(TOKEN_RATIOS)
    ratios, objective, grads = [], [], []
    for ratios_t, a in zip(TOKEN_RATIOS, ADVANTAGES, strict=True):
        s = math.exp(sum(math.log(r) for r in ratios_t) / len(ratios_t))
        value, slope = surrogate(s, a, eps)
        weight = 0.0 - slope / (batch * len(ratios_t))  # d loss/d logp_it: -s*A/(B*T) or 0
        ratios.append(s)
        objective.append(value)
        grads.append([weight if t < len(ratios_t) else 0.0 for t in range(L)])
    loss = -sum(objective) / batch
    return {"ratios": ratios, "loss": loss, "grad_matrix": grads, "curves": _expected_curves(eps)}


def _expected_curves(eps: float) -> dict[str, list[float]]:
    xs = _x_values()
    curves: dict[str, list[float]] = {"x": xs}
    for sign, a in (("pos", 1.0), ("neg", -1.0)):
        points = [surrogate(math.exp(x), a, eps) for x in xs]
        curves[f"objective_{sign}"] = [p[0] for p in points]
        curves[f"derivative_{sign}"] = [p[1] for p in points]
    curves["r1"] = list(R1_VALUES)
    curves["gspo_objective"] = [surrogate(math.sqrt(r1 * R2), 1.0, eps)[0] for r1 in R1_VALUES]
    slopes = [surrogate(math.sqrt(r1 * R2), 1.0, eps)[1] / 2 for r1 in R1_VALUES]
    curves["gspo_grad_token1"] = slopes
    curves["gspo_grad_token2"] = list(slopes)
    return curves


def token_level_baseline(eps: float = CLIP_EPS) -> dict[str, list[float]]:
    """GRPO-style clipping of each token ratio, averaged over the two tokens (A = +1)."""
    objective, grad1, grad2 = [], [], []
    for r1 in R1_VALUES:
        (v1, d1), (v2, d2) = surrogate(r1, 1.0, eps), surrogate(R2, 1.0, eps)
        objective.append((v1 + v2) / 2)
        grad1.append(d1 / 2)
        grad2.append(d2 / 2)
    return {"token_objective": objective, "token_grad_token1": grad1, "token_grad_token2": grad2}


def _x_values() -> list[float]:
    return [-1.0 + 2.0 * k / (N_X - 1) for k in range(N_X)]


# ----------------------------------------------------------------------------- calling impl


def _finite(values: Any) -> Any:
    """JSON has no NaN/inf: a broken implementation's non-finite numbers become None."""
    if isinstance(values, list):
        return [_finite(v) for v in values]
    return values if math.isfinite(values) else None


def _floats(result: Any, what: str, shape: tuple[int, ...]) -> Any:
    """The numbers of a returned tensor (float, list or rows), after checking type and shape."""
    if not isinstance(result, torch.Tensor):
        raise TypeError(f"{what} returned {type(result).__name__}; expected a torch.Tensor")
    if tuple(result.shape) != shape:
        raise ValueError(f"{what} returned shape {list(result.shape)}; expected {list(shape)}")
    return _finite(result.detach().to("cpu", F64).tolist())


def _loss_and_grad(impl: Any, logp: torch.Tensor, *args: torch.Tensor) -> tuple[Any, Any]:
    """impl.gspo_loss on a fresh leaf copy of logp, then backward: (loss, d loss / d logp)."""
    leaf = logp.detach().clone().requires_grad_(True)  # [B, L]
    loss = impl.gspo_loss(leaf, *args, clip_eps=CLIP_EPS)
    value = _floats(loss, "gspo_loss", ())
    if loss.requires_grad:  # a detached loss has no gradient to show: NaN -> None below
        loss.backward()
    grad = leaf.grad if leaf.grad is not None else torch.full_like(leaf, math.nan)
    return value, _floats(grad, "d loss / d logp", tuple(leaf.shape))


def _negated(value: float | None, scale: float = 1.0) -> float | None:
    return None if value is None else 0.0 - scale * value  # 0.0 - ... never gives -0.0


def _sweep(impl: Any, logp: torch.Tensor, old: torch.Tensor, a: float) -> tuple[list, list]:
    """Each row of logp [N, T] as its own response (old [1, T], advantage a): its objective from
    a B=1 call, and d objective / d logp from one batched call, where d loss/d logp = -dJ/N."""
    n, t = logp.shape
    adv, mask = torch.tensor([a], dtype=F64), torch.ones(1, t, dtype=torch.long)
    losses = [
        impl.gspo_loss(row.reshape(1, t).clone(), old.clone(), adv, mask, clip_eps=CLIP_EPS)
        for row in logp  # [T]
    ]
    objective = [_negated(_floats(loss, "gspo_loss", ())) for loss in losses]
    batch = (old.expand(n, t).clone(), adv.expand(n).clone(), mask.expand(n, t).clone())
    _, grad = _loss_and_grad(impl, logp, *batch)  # [N, T]
    return objective, [[_negated(g, n) for g in row] for row in grad]


def _sweeps(impl: Any) -> dict[str, list]:
    """The log-ratio sweep for A = +1 and -1, and the seeds' two-token example as r1 varies."""
    curves: dict[str, list] = {"x": _x_values(), "r1": list(R1_VALUES)}
    x = torch.tensor(curves["x"], dtype=F64).reshape(-1, 1) + BASE_LOGP  # [N, 1]
    for sign, a in (("pos", 1.0), ("neg", -1.0)):
        objective, slopes = _sweep(impl, x, torch.full((1, 1), BASE_LOGP, dtype=F64), a)
        curves[f"objective_{sign}"] = objective
        curves[f"derivative_{sign}"] = [row[0] for row in slopes]
    old = torch.tensor([[-1.2, -0.9]], dtype=F64)  # [1, 2]
    logp = old + torch.tensor([[r1, R2] for r1 in R1_VALUES], dtype=F64).log()  # [N, 2]
    objective, slopes = _sweep(impl, logp, old, 1.0)
    curves["gspo_objective"] = objective
    curves["gspo_grad_token1"] = [row[0] for row in slopes]
    curves["gspo_grad_token2"] = [row[1] for row in slopes]
    return curves | token_level_baseline()


def _toy_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """logp, old_logp, advantages, mask of the diagnostic, with extreme values in padding."""
    batch = len(TOKEN_RATIOS)
    logp, old_logp = torch.zeros(batch, L, dtype=F64), torch.zeros(batch, L, dtype=F64)
    mask = torch.zeros(batch, L, dtype=torch.long)
    for i, (ratios_t, old_t) in enumerate(zip(TOKEN_RATIOS, OLD_LOGP, strict=True)):
        n = len(ratios_t)
        old_logp[i, :n] = torch.tensor(old_t, dtype=F64)
        logp[i, :n] = old_logp[i, :n] + torch.tensor(ratios_t, dtype=F64).log()
        mask[i, :n] = 1
    for (i, t), (new, old) in PADDING.items():
        logp[i, t], old_logp[i, t] = new, old
    return logp, old_logp, torch.tensor(ADVANTAGES, dtype=F64), mask


# ----------------------------------------------------------------------------- the toy


def run_toy(impl: Any) -> dict[str, Any]:
    """Run the diagnostic and both sweeps through impl; a JSON-ready dict (no NaN/inf)."""
    logp, old_logp, _, mask = _toy_batch()  # a fresh batch per call: in-place edits stay local
    ratios = _floats(impl.sequence_ratio(logp, old_logp, mask), "sequence_ratio", (len(mask),))
    loss, grad_matrix = _loss_and_grad(impl, *_toy_batch())
    expected = expected_values()
    result = {
        "clip_eps": CLIP_EPS,
        "row_labels": list(ROW_LABELS),
        "mask": [[int(t < len(r)) for t in range(L)] for r in TOKEN_RATIOS],  # [3, L] of 0/1
        "ratios": ratios,
        "loss": loss,
        "grad_matrix": grad_matrix,
        "curves": _sweeps(impl),
        "expected": expected,
    }
    result["checks"] = toy_checks(result, expected)
    result["tables"] = toy_tables(result, expected)
    return result


def toy_tables(result: dict[str, Any], expected: dict[str, Any]) -> dict[str, dict]:
    """The tables the manifest declares (grad_matrix, ratios, checks), from the toy's data."""
    grads, mask = result["grad_matrix"], result["mask"]
    return {
        "grad_matrix": {
            "heatmap": True,
            "columns": [f"token {t}" for t in range(L)],
            "rows": [
                {"label": label, "cells": row, "muted": [not m for m in valid]}
                for label, row, valid in zip(result["row_labels"], grads, mask, strict=True)
            ],
        },
        "ratios": {
            "columns": ["your s", "expected s"],
            "rows": [
                {"label": label, "cells": [got, want]}
                for label, got, want in zip(
                    result["row_labels"], result["ratios"], expected["ratios"], strict=True
                )
            ],
        },
        "checks": {
            "columns": ["result"],
            "rows": [
                {"label": name.replace("_", " "), "cells": ["pass" if ok else "FAIL"]}
                for name, ok in result["checks"].items()
            ],
        },
    }


def _close(value: float | None, target: float) -> bool:
    return value is not None and abs(value - target) <= ABS_TOL + REL_TOL * abs(target)


def _all_close(values: list, targets: list) -> bool:
    return len(values) == len(targets) and all(map(_close, values, targets))


def _cells(grads: list, mask: list, row: int, valid: bool) -> list:
    """Gradient cells of one row: its valid tokens, or its padded positions."""
    return [g for g, m in zip(grads[row], mask[row], strict=True) if bool(m) == valid]


def toy_checks(result: dict[str, Any], expected: dict[str, Any]) -> dict[str, bool]:
    """Named pass/fail facts about the diagnostic, each one a claim of the seeds."""
    grads, mask = result["grad_matrix"], result["mask"]
    row0_want = _cells(expected["grad_matrix"], mask, 0, True)  # -s*A/(B*T) = -1/6 twice
    curve_names = [k for k in expected["curves"] if k not in ("x", "r1")]
    return {
        "ratios_match": _all_close(result["ratios"], expected["ratios"]),
        "loss_matches": _close(result["loss"], expected["loss"]),
        "equal_gradient_row0": _all_close(_cells(grads, mask, 0, True), row0_want),
        "row1_clipped_zero_grad": all(_close(g, 0.0) for g in _cells(grads, mask, 1, True)),
        "row2_clipped_zero_grad": all(_close(g, 0.0) for g in _cells(grads, mask, 2, True)),
        "padding_zero_grad": all(
            g == 0.0 for i in range(len(mask)) for g in _cells(grads, mask, i, False)
        ),
        "curves_match": all(
            _all_close(result["curves"][k], expected["curves"][k]) for k in curve_names
        ),
    }


# ----------------------------------------------------------------------------- plots


def _nan(values: list) -> list[float]:
    return [math.nan if v is None else v for v in values]


def _figure(width: float, height: float):
    """A Figure with its own Agg canvas: no pyplot global state, safe in threads.

    No layout engine: each plot places its axes with `_grid`. Constrained layout measured
    every label of a figure before drawing it, a third of the figure's CPU, and this
    process draws the plots of every new result a class submits; the margins below leave
    room for the widest labels the toy's numbers give (NaN, 1e+30, negative values)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _grid(fig, rows: int, cols: int, margins: tuple[float, float, float, float], gaps=(0, 0)):
    """`gridspec_kw` for a rows x cols grid with margins (left, right, bottom, top) and gaps
    (between columns, between rows) in inches, whatever the figure's size."""
    width, height = fig.get_size_inches()
    left, right, bottom, top = margins
    axes_w = (width - left - right - gaps[0] * (cols - 1)) / cols
    axes_h = (height - bottom - top - gaps[1] * (rows - 1)) / rows
    return {
        "left": left / width,
        "right": 1 - right / width,
        "bottom": bottom / height,
        "top": 1 - top / height,
        "wspace": gaps[0] / axes_w,
        "hspace": gaps[1] / axes_h,
    }


def _dense(lo: float, hi: float, n: int = 601) -> list[float]:
    """A fine grid for analytic lines, so kinks and jumps are drawn where they really are."""
    return [lo + (hi - lo) * k / (n - 1) for k in range(n)]


def _curve_panel(ax, curves: dict, key: str, a: float, eps: float, slope: bool) -> None:
    x = _dense(-1.0, 1.0)
    analytic = [surrogate(math.exp(v), a, eps)[int(slope)] for v in x]
    ax.axvspan(math.log(1 - eps), math.log(1 + eps), color="#dcebf7", label="clip range")
    ax.plot(x, analytic, color="0.45", lw=1.5, ls="--", label="analytic GSPO")
    ax.plot(
        curves["x"], _nan(curves[key]), "o", ms=4, color="#c0392b", label="tested implementation"
    )
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_ylabel("d objective / d log s" if slope else "objective  min(sA, clip(s)A)")
    ax.grid(alpha=0.3)


def _draw_curves(result: dict[str, Any], eps: float):
    import numpy as np

    fig = _figure(11, 7.5)
    grid = _grid(fig, 2, 2, margins=(0.8, 0.25, 0.6, 1.0), gaps=(0.95, 0.45))
    axes = fig.subplots(2, 2, sharex=True, gridspec_kw=grid)
    for col, (sign, a) in enumerate((("pos", 1.0), ("neg", -1.0))):
        top, bottom = axes[0][col], axes[1][col]
        _curve_panel(top, result["curves"], f"objective_{sign}", a, eps, slope=False)
        _curve_panel(bottom, result["curves"], f"derivative_{sign}", a, eps, slope=True)
        top.set_title(f"A = {a:+g}: objective of one response")
        bottom.set_title(f"A = {a:+g}: slope (zero on the clipped, flat side)")
        bottom.set_xlabel("x = log s  (mean valid log-ratio of the response)")
        inverse = (np.exp, lambda s: np.log(np.maximum(s, 1e-9)))
        top.secondary_xaxis("top", functions=inverse).set_xlabel("sequence ratio s")
    axes[0][0].legend(loc="upper left", fontsize=9)
    fig.suptitle(
        f"GSPO surrogate of one response versus its sequence ratio s "
        f"(clip range [{1 - eps:g}, {1 + eps:g}] shaded)"
    )
    return fig


def _cell_text(ax, i: int, t: int, got: float | None, want: float, valid: bool) -> None:
    """One heatmap cell: the value got, and either the expected value or a padding mark."""
    from matplotlib.patches import Rectangle

    shown = "NaN/inf" if got is None else f"{got:+.4f}" if abs(got) < 1e4 else f"{got:+.3e}"
    wrong = not _close(got, want) if valid else got != 0.0
    color = "#c00000" if wrong else "black"
    corner = (t - 0.5, i - 0.5)
    if not valid:
        ax.add_patch(Rectangle(corner, 1, 1, facecolor="0.9", hatch="//", edgecolor="0.7", lw=0))
    if wrong:
        ax.add_patch(Rectangle(corner, 1, 1, fill=False, edgecolor=color, lw=3, zorder=4))
    note = "padding" if not valid else f"expected {want:+.4f}"
    ax.text(t, i - 0.12, shown, ha="center", va="center", fontsize=13, color=color, weight="bold")
    ax.text(t, i + 0.22, note, ha="center", va="center", fontsize=9, color="0.3")


def _draw_grad_matrix(result: dict[str, Any], eps: float):
    grads, mask, ratios = result["grad_matrix"], result["mask"], result["ratios"]
    want = expected_values(eps)["grad_matrix"]
    fig = _figure(10.5, 4.8)
    ax = fig.subplots(gridspec_kw=_grid(fig, 1, 1, margins=(2.1, 0.15, 0.6, 0.7)))
    values = [[0.0 if g is None else g for g in row] for row in grads]  # [3, L]
    bound = 1.8 * max([abs(v) for row in values for v in row] + [1e-3])  # pale colours
    image = ax.imshow(values, cmap="PuOr", vmin=-bound, vmax=bound, aspect="auto")
    for i, row in enumerate(grads):
        for t, got in enumerate(row):
            _cell_text(ax, i, t, got, want[i][t], bool(mask[i][t]))
    rows = zip(result["row_labels"], ratios, strict=True)
    ax.set_yticks(range(len(grads)), [f"{lab}\n(got s = {_fmt(r)})" for lab, r in rows])
    ax.set_xticks(range(len(grads[0])), [f"token {t}" for t in range(len(grads[0]))])
    ax.set_xlabel(
        "hatched cells are padding (they held -inf, +inf, 1e30 or NaN): "
        "their gradient must be exactly 0"
    )
    fig.colorbar(image, ax=ax, label="d loss / d logp")
    ax.set_title(
        f"d loss / d logp for each token of the toy batch (B = {len(grads)}, clip ε = {eps:g})\n"
        "a red frame marks a value that differs from the analytic one"
    )
    return fig


def _fmt(value: float | None) -> str:
    return "NaN" if value is None else f"{value:.4g}"


def _draw_token_vs_sequence(result: dict[str, Any], eps: float):
    curves = result["curves"]
    fig = _figure(12.5, 5.2)
    left, right = fig.subplots(1, 2, gridspec_kw=_grid(fig, 1, 2, (0.8, 0.2, 0.6, 0.75), (0.95, 0)))
    r1 = _dense(min(curves["r1"]), max(curves["r1"]))
    switch = (1 + eps) ** 2 / R2  # beyond this r1, s = sqrt(r1 * r2) leaves the clip range
    for ax in (left, right):
        ax.axvspan(switch, r1[-1], color="#fde2c8", label=f"GSPO clips (s > {1 + eps:g})")
        ax.axvline(1 + eps, color="#2c7fb8", ls=":", lw=1.2, label="token-level clips token 1")
        ax.set_xlabel("first token ratio r1  (second token ratio r2 = 0.8, A = +1)")
        ax.grid(alpha=0.3)
    gspo = [surrogate(math.sqrt(r * R2), 1.0, eps)[0] for r in r1]
    token = [(surrogate(r, 1.0, eps)[0] + surrogate(R2, 1.0, eps)[0]) / 2 for r in r1]
    left.plot(r1, gspo, color="0.45", ls="--", lw=1.2, label="analytic GSPO")
    left.plot(
        curves["r1"],
        _nan(curves["gspo_objective"]),
        "o",
        color="#c0392b",
        ms=5,
        label="GSPO, tested implementation",
    )
    left.plot(r1, token, color="#2c7fb8", lw=2, label="token-level clipping (GRPO style)")
    _mark(left, 1.5, math.sqrt(1.2), "GSPO: s = √1.2 ≈ 1.0954", (-175, 22))
    _mark(left, 1.5, 1.0, "token-level: (1.2 + 0.8)/2 = 1", (12, -40))
    left.set(
        ylabel="objective of the response",
        title="Objective: one clip per response (GSPO) vs one clip per token",
    )
    left.legend(loc="lower right", fontsize=8.5)
    _draw_coefficients(right, curves, r1, eps)
    fig.suptitle(
        "The seeds' two-token response: token ratios [r1, 0.8], advantage A = +1 "
        "(stars mark the worked example r1 = 1.5)"
    )
    return fig


def _draw_coefficients(ax, curves: dict[str, list], r1: list[float], eps: float) -> None:
    """Right panel: the weight each token's log-prob gradient gets, GSPO vs token-level."""
    gspo = [surrogate(math.sqrt(r * R2), 1.0, eps)[1] / 2 for r in r1]
    first = [surrogate(r, 1.0, eps)[1] / 2 for r in r1]
    second = [surrogate(R2, 1.0, eps)[1] / 2] * len(r1)
    ax.plot(r1, gspo, color="0.45", ls="--", lw=1.2, label="analytic GSPO (both tokens)")
    for key, marker, ms in (("gspo_grad_token1", "o", 6), ("gspo_grad_token2", "x", 7)):
        ax.plot(
            curves["r1"],
            _nan(curves[key]),
            marker,
            color="#a02818",
            ms=ms,
            label=f"GSPO, token {key[-1]} (tested)",
        )
    ax.plot(r1, first, color="#2c7fb8", lw=2, label="token-level, token 1")
    ax.plot(r1, second, color="#41ab5d", lw=2, label="token-level, token 2")
    _mark(ax, 1.5, math.sqrt(1.2) / 2, "GSPO: s/2 ≈ 0.5477\non both tokens", (14, -42))
    _mark(ax, 1.5, 0.4, "token-level, token 2:\n0.8/2 = 0.4", (14, -36))
    _mark(ax, 1.5, 0.0, "token-level, token 1:\nclipped, 0", (14, 14))
    ax.set(
        ylabel="gradient coefficient on the token's log-prob",
        title="Per-token gradient weight  d objective / d log π(token)",
    )
    ax.legend(loc="lower left", fontsize=8)


def _mark(ax, x: float, y: float, text: str, offset: tuple[int, int]) -> None:
    ax.plot([x], [y], "*", color="black", ms=12, zorder=5)
    ax.annotate(
        text,
        (x, y),
        xytext=offset,
        textcoords="offset points",
        fontsize=9,
        zorder=6,
        arrowprops={"arrowstyle": "-", "color": "0.4"},
    )


PLOTS = {
    "curves": _draw_curves,
    "grad_matrix": _draw_grad_matrix,
    "token_vs_sequence": _draw_token_vs_sequence,
}


def render_plots(result: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write curves.png, grad_matrix.png and token_vs_sequence.png; return name -> path.

    Only the keys a report's artifacts keep are needed (`curves`, `grad_matrix`, `mask`,
    `ratios`, `row_labels`); the analytic lines are recomputed here.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    eps = result.get("clip_eps", CLIP_EPS)
    paths = {}
    for name, draw in PLOTS.items():
        path = out / f"{name}.png"
        draw(result, eps).savefig(path, dpi=100)
        paths[name] = path
    return paths


# ----------------------------------------------------------------------------- command line


def load_impl(path: str | Path) -> ModuleType:
    """Import an implementation file by path (never as an installed package)."""
    from grader.exercise import load_module

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no implementation file at {path}")
    module = load_module(path, f"gspo_toy_impl_{path.stem}")
    missing = [f for f in ("sequence_ratio", "gspo_loss") if not callable(getattr(module, f, None))]
    if missing:
        raise AttributeError(f"{path} defines no function {', '.join(missing)}")
    return module


def _summary(result: dict[str, Any], paths: dict[str, Path], out: Path) -> str:
    ratios = ", ".join("NaN" if r is None else f"{r:.4f}" for r in result["ratios"])
    loss = "NaN" if result["loss"] is None else f"{result['loss']:.4f}"
    checks = "\n".join(
        f"  [{'ok' if ok else 'FAIL'}] {name}" for name, ok in result["checks"].items()
    )
    files = ", ".join(p.name for p in paths.values())
    return (
        f"ratios: [{ratios}] (expected [1, 1.5, 0.5])\nloss: {loss}\nchecks:\n{checks}\n"
        f"wrote {out / 'toy.json'} and {files}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run GSPO's toy diagnostic through an impl.")
    parser.add_argument(
        "--impl",
        default=str(Path(__file__).parent / "reference" / "gspo.py"),
        help="file defining sequence_ratio and gspo_loss (default: reference)",
    )
    parser.add_argument("--out", default="out/toy", help="output folder (default: out/toy)")
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
