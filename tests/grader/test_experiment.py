"""experiment.py, the T3 toy: its numbers on the reference, its checks on wrong code, its plots
and its command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from grader.exercise import REPO_ROOT, default_exercise
from grader.report import Table

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOT_NAMES = {"curves", "grad_matrix", "token_vs_sequence"}

ARITHMETIC_MEAN = """
import torch

def sequence_ratio(logp, old_logp, mask):
    valid = mask.bool()
    ratios = torch.where(valid, (logp - old_logp).exp(), torch.zeros_like(logp))
    return ratios.sum(-1) / valid.sum(-1).clamp(min=1)

def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    s = sequence_ratio(logp, old_logp, mask)
    a = advantages.detach()
    return -torch.minimum(s * a, s.clamp(1 - clip_eps, 1 + clip_eps) * a).mean()
"""

MASK_BY_MULTIPLYING = """
import torch

def sequence_ratio(logp, old_logp, mask):
    m = mask.to(logp.dtype)
    return torch.exp(((logp - old_logp.detach()) * m).sum(-1) / m.sum(-1).clamp(min=1))

def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    s = sequence_ratio(logp, old_logp, mask)
    a = advantages.detach()
    return -torch.minimum(s * a, s.clamp(1 - clip_eps, 1 + clip_eps) * a).mean()
"""


@pytest.fixture(scope="module")
def ref_result(toy, ref_impl):
    return toy.run_toy(ref_impl)


def impl_from_source(toy, tmp_path, source: str):
    path = tmp_path / "impl.py"
    path.write_text(textwrap.dedent(source))
    return toy.load_impl(path)


class CountingImpl:
    """Forwards to a module and counts the calls, as the sandbox proxy would see them."""

    def __init__(self, module):
        self.module, self.calls = module, 0

    def sequence_ratio(self, *args, **kwargs):
        self.calls += 1
        return self.module.sequence_ratio(*args, **kwargs)

    def gspo_loss(self, *args, **kwargs):
        self.calls += 1
        return self.module.gspo_loss(*args, **kwargs)


# ----------------------------------------------------------------------------- the reference


def test_reference_passes_every_check(ref_result):
    assert ref_result["checks"], "the toy must name its checks"
    assert all(ref_result["checks"].values()), ref_result["checks"]
    assert set(ref_result["checks"]) >= {
        "ratios_match",
        "loss_matches",
        "equal_gradient_row0",
        "row1_clipped_zero_grad",
        "row2_clipped_zero_grad",
        "padding_zero_grad",
    }


def test_reference_numbers_are_the_analytic_ones(ref_result):
    assert ref_result["ratios"] == pytest.approx([1.0, 1.5, 0.5])
    assert ref_result["loss"] == pytest.approx(-(1.0 + 1.2 - 0.8) / 3)
    grads, mask = ref_result["grad_matrix"], ref_result["mask"]
    assert len(grads) == 3 and all(len(row) == len(mask[0]) == 4 for row in grads)
    assert grads[0][:2] == pytest.approx([-1 / 6, -1 / 6])  # -s*A/(B*T), B = 3, T = 2
    assert sum(map(sum, mask)) < 12, "the toy must contain padded cells"
    for g_row, m_row, i in zip(grads, mask, range(3), strict=True):
        for g, m in zip(g_row, m_row, strict=True):
            assert g == 0.0 or (i == 0 and m), f"row {i}: only row 0's valid tokens move"
    assert ref_result["clip_eps"] == 0.2 and len(ref_result["row_labels"]) == 3


def test_reference_curves_show_the_seeds_two_token_example(ref_result):
    curves = ref_result["curves"]
    at = curves["r1"].index(pytest.approx(1.5))
    assert curves["gspo_objective"][at] == pytest.approx(math.sqrt(1.2))  # 1.0954
    assert curves["token_objective"][at] == pytest.approx(1.0)  # (1.2 + 0.8) / 2
    assert curves["gspo_grad_token1"][at] == pytest.approx(math.sqrt(1.2) / 2)  # 0.5477
    assert curves["gspo_grad_token2"][at] == pytest.approx(math.sqrt(1.2) / 2)
    assert curves["token_grad_token1"][at] == 0.0  # clipped
    assert curves["token_grad_token2"][at] == pytest.approx(0.4)


def test_reference_log_ratio_sweep_is_flat_where_clipped(ref_result):
    curves = ref_result["curves"]
    for sign, a in (("pos", 1.0), ("neg", -1.0)):
        rows = zip(
            curves["x"], curves[f"objective_{sign}"], curves[f"derivative_{sign}"], strict=True
        )
        for x, objective, slope in rows:
            s = math.exp(x)
            clipped = s > 1.2 if a > 0 else s < 0.8
            assert objective == pytest.approx(a * (min(max(s, 0.8), 1.2) if clipped else s))
            assert slope == pytest.approx(0.0 if clipped else a * s)


def test_result_is_strict_json_with_every_table_the_manifest_declares(ref_result):
    result = json.loads(json.dumps(ref_result, allow_nan=False))
    declared = default_exercise().tables
    assert set(result["tables"]) == {table.name for table in declared}
    for spec in declared:
        table = Table.model_validate({"name": spec.name, "title": spec.title,
                                      **result["tables"][spec.name]})  # fmt: skip
        assert all(len(row.cells) == len(table.columns) for row in table.rows), spec.name
    matrix = result["tables"]["grad_matrix"]
    assert matrix["heatmap"] and [row["muted"] for row in matrix["rows"]] == [
        [False, False, True, True],
        [False, False, False, True],
        [False, False, False, False],
    ]
    assert result["tables"]["ratios"]["rows"][1]["cells"] == pytest.approx([1.5, 1.5])


def test_run_toy_stays_within_the_call_budget_through_any_object(toy, ref_impl):
    impl = CountingImpl(ref_impl)
    result = toy.run_toy(impl)
    assert all(result["checks"].values())
    assert 3 <= impl.calls <= 80


# ----------------------------------------------------------------------------- wrong code


def test_arithmetic_mean_fails_the_ratio_check(toy, tmp_path):
    result = toy.run_toy(impl_from_source(toy, tmp_path, ARITHMETIC_MEAN))
    assert result["ratios"][0] == pytest.approx(1.25)  # (2 + 0.5) / 2, not 1
    assert not result["checks"]["ratios_match"]
    assert not result["checks"]["equal_gradient_row0"]
    assert not all(result["checks"].values())


def test_nan_from_multiplying_by_the_mask_becomes_none(toy, tmp_path):
    result = toy.run_toy(impl_from_source(toy, tmp_path, MASK_BY_MULTIPLYING))
    json.dumps(result, allow_nan=False)  # still valid JSON
    assert result["ratios"][0] is None and result["loss"] is None
    assert not result["checks"]["padding_zero_grad"]
    assert not result["checks"]["ratios_match"]


def test_exceptions_from_the_implementation_propagate(toy):
    class Raising:
        def sequence_ratio(self, *args, **kwargs):
            raise RuntimeError("student bug")

        gspo_loss = sequence_ratio

    with pytest.raises(RuntimeError, match="student bug"):
        toy.run_toy(Raising())


def test_detached_loss_gives_none_gradients_not_a_crash(toy, ref_impl):
    class Detached:
        sequence_ratio = staticmethod(ref_impl.sequence_ratio)

        @staticmethod
        def gspo_loss(*args, **kwargs):
            return ref_impl.gspo_loss(*args, **kwargs).detach()

    result = toy.run_toy(Detached())
    assert result["checks"]["loss_matches"] and result["checks"]["ratios_match"]
    assert all(g is None for row in result["grad_matrix"] for g in row)
    assert not result["checks"]["equal_gradient_row0"]


# ----------------------------------------------------------------------------- plots


def assert_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 20_000, path


def test_render_plots_draws_every_declared_plot_from_the_report_data(toy, ref_result, tmp_path):
    data = {key: value for key, value in ref_result.items() if key != "tables"}
    paths = toy.render_plots(json.loads(json.dumps(data)), tmp_path)
    assert set(paths) == PLOT_NAMES == {plot.name for plot in default_exercise().plots}
    for name, path in paths.items():
        assert path == tmp_path / f"{name}.png"
        assert_png(path)


def test_render_plots_is_safe_in_threads_and_with_broken_values(toy, tmp_path):
    broken = toy.run_toy(impl_from_source(toy, tmp_path, MASK_BY_MULTIPLYING))
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(toy.render_plots, broken, tmp_path / str(k)) for k in range(2)]
        results = [job.result(timeout=120) for job in jobs]
    for paths in results:
        for path in paths.values():
            assert_png(path)


# ----------------------------------------------------------------------------- command line


def run_cli(*args, cwd=REPO_ROOT):
    command = [sys.executable, str(REPO_ROOT / "experiment.py"), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_cli_writes_json_and_plots(tmp_path):
    done = run_cli("--out", str(tmp_path / "toy"))
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "toy" / "toy.json").read_text())
    assert len(result["ratios"]) == 3 and all(isinstance(r, float) for r in result["ratios"])
    assert len(result["grad_matrix"]) == 3
    for name in PLOT_NAMES:
        assert_png(tmp_path / "toy" / f"{name}.png")
    assert "ratios_match" in done.stdout and "FAIL" not in done.stdout


def test_cli_missing_impl_exits_nonzero_with_one_line(tmp_path):
    missing = tmp_path / "nowhere.py"
    done = run_cli("--impl", str(missing), "--out", str(tmp_path / "out"))
    assert done.returncode in (1, 2)
    assert done.stderr.strip().count("\n") == 0 and str(missing) in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_main_reports_a_raising_impl_in_one_line(toy, tmp_path, capsys):
    path = tmp_path / "raises.py"
    path.write_text(
        "def sequence_ratio(*a):\n    raise ValueError('oops')\ngspo_loss = sequence_ratio\n"
    )
    assert toy.main(["--impl", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ValueError: oops" in err


def test_main_reports_a_syntax_error_in_one_line(toy, tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("def sequence_ratio(:\n")
    assert toy.main(["--impl", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SyntaxError" in err


def test_importing_the_toy_has_no_side_effects(tmp_path):
    location = str(REPO_ROOT / "experiment.py")
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('toy', {location!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib must load lazily'\n"
        "assert callable(module.run_toy) and callable(module.render_plots)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def test_toy_inputs_hold_extreme_padding(toy):
    logp, old, _, mask = toy._toy_batch()
    padded = torch.cat([logp[mask == 0], old[mask == 0]])
    assert torch.isnan(padded).any() and torch.isinf(padded).any()
    assert (padded.abs() == 1e30).any()
