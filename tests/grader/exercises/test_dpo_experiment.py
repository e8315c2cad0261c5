"""The DPO toy (exercises/dpo/experiment.py): its numbers on the reference, its checks on wrong
code from the exercise's corpus, its tables and plots, and its command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from grader.exercise import load_module

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHECKS = {
    "weight_is_sigmoid",
    "wrong_pairs_weigh_most",
    "pair_gradients_match",
    "loss_matches",
    "token_loss_matches",
    "token_gradients_match",
    "padding_zero_grad",
}


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@pytest.fixture(scope="module")
def ref_result(dpo_toy, dpo_reference):
    return dpo_toy.run_toy(dpo_reference)


@pytest.fixture(scope="module")
def wrong(dpo):
    """A wrong implementation from the exercise's corpus, by file stem."""
    return lambda stem: load_module(dpo.corpus / "wrong" / f"{stem}.py", f"_dpo_toy_{stem}")


class CountingImpl:
    """Forwards to a module and counts the calls, as the sandbox proxy would see them."""

    def __init__(self, module):
        self.module, self.calls = module, 0

    def sequence_logp(self, *args, **kwargs):
        self.calls += 1
        return self.module.sequence_logp(*args, **kwargs)

    def dpo_loss(self, *args, **kwargs):
        self.calls += 1
        return self.module.dpo_loss(*args, **kwargs)


# ----------------------------------------------------------------------------- the reference


def test_reference_passes_every_check(ref_result):
    assert set(ref_result["checks"]) == CHECKS
    assert all(ref_result["checks"].values()), ref_result["checks"]


def test_reference_weights_are_sigmoid_of_minus_margin(ref_result):
    sweep = ref_result["sweep"]
    assert len(sweep["margin"]) >= 25 and min(sweep["margin"]) < 0 < max(sweep["margin"])
    want = [sigmoid(-m) for m in sweep["margin"]]
    assert sweep["weight"] == pytest.approx(want, abs=1e-9)
    assert sweep["rejected_weight"] == pytest.approx(want, abs=1e-9)


def test_reference_three_pairs_are_the_analytic_ones(ref_result):
    pairs, beta = ref_result["pairs"], ref_result["beta"]
    assert pairs["margin"] == pytest.approx([-2.0, 0.0, 2.0])
    weights = [beta * sigmoid(-m) / 3 for m in (-2.0, 0.0, 2.0)]
    assert pairs["grad_chosen"] == pytest.approx([-w for w in weights])
    assert pairs["grad_rejected"] == pytest.approx(weights)
    want_loss = sum(math.log1p(math.exp(-m)) for m in (-2.0, 0.0, 2.0)) / 3
    assert pairs["loss"] == pytest.approx(want_loss) == ref_result["tokens"]["loss"]
    assert ref_result["loss"] == pairs["loss"]


def test_reference_token_gradients_are_the_pairs_and_zero_on_padding(ref_result):
    tokens, pairs = ref_result["tokens"], ref_result["pairs"]
    for side in ("chosen", "rejected"):
        grads, mask = tokens[f"grad_{side}"], tokens[f"mask_{side}"]
        assert any(0 in row for row in mask), "the toy must contain padded cells"
        for row, m_row, pair in zip(grads, mask, pairs[f"grad_{side}"], strict=True):
            for g, m in zip(row, m_row, strict=True):
                assert g == pytest.approx(pair) if m else g == 0.0


def test_toy_inputs_hold_extreme_padding(dpo_toy):
    for ratios in (dpo_toy.CHOSEN_RATIOS, dpo_toy.REJECTED_RATIOS):
        policy, ref, mask = dpo_toy.token_batch(ratios)
        padded = [v for t in (policy, ref) for v in t[mask == 0].tolist()]
        assert any(math.isnan(v) for v in padded) and math.inf in padded
        assert -math.inf in padded and 1e30 in padded


def test_result_is_strict_json_with_the_tables_the_manifest_declares(dpo, ref_result):
    json.loads(json.dumps(ref_result, allow_nan=False))
    assert set(ref_result["tables"]) == {table.name for table in dpo.tables}
    for table in ref_result["tables"].values():
        width = len(table["columns"])
        assert width and table["rows"]
        for row in table["rows"]:
            assert row["label"] and len(row["cells"]) == width
            assert len(row.get("muted", row["cells"])) == width
            assert all(c is None or isinstance(c, float | int | str) for c in row["cells"])
    token_rows = ref_result["tables"]["token_grads"]["rows"]
    assert any(any(row["muted"]) for row in token_rows)


def test_run_toy_stays_within_the_call_budget(dpo_toy, dpo_reference):
    impl = CountingImpl(dpo_reference)
    assert all(dpo_toy.run_toy(impl)["checks"].values())
    assert 3 <= impl.calls <= 12


# ----------------------------------------------------------------------------- wrong code


def test_padding_leak_becomes_none_and_fails_its_check(dpo_toy, wrong):
    result = dpo_toy.run_toy(wrong("mask_by_multiplication"))
    json.dumps(result, allow_nan=False)  # still valid JSON
    assert not result["checks"]["padding_zero_grad"]
    assert not result["checks"]["token_gradients_match"]
    assert not result["checks"]["token_loss_matches"]  # NaN from 0 * -inf in the padding
    assert result["checks"]["weight_is_sigmoid"]  # dpo_loss itself is right
    assert result["checks"]["loss_matches"]  # so is the loss of the pairs given as sequences
    cells = [c for row in result["tables"]["token_grads"]["rows"] for c in row["cells"]]
    assert None in cells


def test_swapped_margin_fails_the_weight_checks(dpo_toy, wrong):
    result = dpo_toy.run_toy(wrong("margin_sign_swapped"))
    assert not result["checks"]["weight_is_sigmoid"]
    assert not result["checks"]["wrong_pairs_weigh_most"]
    assert result["sweep"]["weight"][0] == pytest.approx(-sigmoid(-8.0))  # -sigmoid(m): pushed down


def test_zero_gradient_at_a_tie_is_seen(dpo_toy, wrong):
    result = dpo_toy.run_toy(wrong("relu_abs_zero_gradient_at_tie"))
    assert result["checks"]["loss_matches"] and result["checks"]["padding_zero_grad"]
    assert not result["checks"]["weight_is_sigmoid"]
    at_zero = result["sweep"]["margin"].index(0.0)
    assert result["sweep"]["weight"][at_zero] == 0.0


def test_exceptions_from_the_implementation_propagate(dpo_toy):
    class Raising:
        def dpo_loss(self, *args, **kwargs):
            raise RuntimeError("student bug")

        sequence_logp = dpo_loss

    with pytest.raises(RuntimeError, match="student bug"):
        dpo_toy.run_toy(Raising())


def test_a_wrong_kind_of_result_raises_type_error(dpo_toy, dpo_reference):
    class Floats:
        sequence_logp = staticmethod(dpo_reference.sequence_logp)

        @staticmethod
        def dpo_loss(*args, **kwargs):
            return dpo_reference.dpo_loss(*args, **kwargs).item()

    with pytest.raises(TypeError, match="dpo_loss returned float"):
        dpo_toy.run_toy(Floats())


def test_detached_loss_gives_none_gradients_not_a_crash(dpo_toy, dpo_reference):
    class Detached:
        sequence_logp = staticmethod(dpo_reference.sequence_logp)

        @staticmethod
        def dpo_loss(*args, **kwargs):
            return dpo_reference.dpo_loss(*args, **kwargs).detach()

    result = dpo_toy.run_toy(Detached())
    assert result["checks"]["loss_matches"]
    assert all(w is None for w in result["sweep"]["weight"])
    assert not result["checks"]["weight_is_sigmoid"]
    json.dumps(result, allow_nan=False)


# ----------------------------------------------------------------------------- plots


def assert_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 20_000, path


def test_render_plots_draws_the_manifest_plots_from_sweep_and_pairs(
    dpo, dpo_toy, ref_result, tmp_path
):
    needed = {key: ref_result[key] for key in ("sweep", "pairs")}
    paths = dpo_toy.render_plots(needed, tmp_path)
    assert set(paths) == {plot.name for plot in dpo.plots}
    for name, path in paths.items():
        assert path == tmp_path / f"{name}.png"
        assert_png(path)


def test_render_plots_is_safe_in_threads_and_with_broken_values(dpo_toy, wrong, tmp_path):
    broken = dpo_toy.run_toy(wrong("log_of_sigmoid"))
    broken["sweep"]["weight"][3] = None
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(dpo_toy.render_plots, broken, tmp_path / str(k)) for k in range(2)]
        results = [job.result(timeout=120) for job in jobs]
    for paths in results:
        for path in paths.values():
            assert_png(path)


# ----------------------------------------------------------------------------- command line


def run_cli(dpo, *args, cwd):
    command = [sys.executable, str(dpo.experiment), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_cli_writes_json_and_plots(dpo, tmp_path):
    done = run_cli(dpo, "--out", str(tmp_path / "toy"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "toy" / "toy.json").read_text())
    assert all(result["checks"].values())
    for plot in dpo.plots:
        assert_png(tmp_path / "toy" / f"{plot.name}.png")
    assert "padding_zero_grad" in done.stdout and "FAIL" not in done.stdout


@pytest.mark.slow
def test_cli_grades_a_wrong_file_with_fail_lines(dpo, tmp_path):
    impl = dpo.corpus / "wrong" / "margin_sign_swapped.py"
    done = run_cli(dpo, "--impl", str(impl), "--out", str(tmp_path / "toy"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[FAIL] weight_is_sigmoid" in done.stdout


def test_main_reports_a_missing_file_in_one_line(dpo_toy, tmp_path, capsys):
    missing = tmp_path / "nowhere.py"
    assert dpo_toy.main(["--impl", str(missing), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err and not (tmp_path / "out").exists()


def test_main_reports_a_raising_impl_in_one_line(dpo_toy, tmp_path, capsys):
    path = tmp_path / "raises.py"
    path.write_text(
        "def sequence_logp(*a, **k):\n    raise ValueError('oops')\ndpo_loss = sequence_logp\n"
    )
    assert dpo_toy.main(["--impl", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ValueError: oops" in err


def test_main_reports_a_syntax_error_in_one_line(dpo_toy, tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("def dpo_loss(:\n")
    assert dpo_toy.main(["--impl", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SyntaxError" in err


def test_importing_the_toy_has_no_side_effects(dpo, tmp_path):
    code = (
        "import sys\n"
        "from grader.exercise import load_module\n"
        f"module = load_module({str(dpo.experiment)!r}, 'toy')\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib must load lazily'\n"
        "assert callable(module.run_toy) and callable(module.render_plots)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and list(tmp_path.iterdir()) == []
