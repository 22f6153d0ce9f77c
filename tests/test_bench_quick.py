"""Every benchmark of the OT operator runs (``--quick`` with the smallest sizes) and writes its JSON."""

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_ot_quick(tmp_path):
    out = tmp_path / "ot.json"
    sizes = {"pot_sizes": [16], "strata": 2, "prior_n": 1000, "spread_n": 12, "certified": [(8, 0.5)],
             "design": (16, 8), "ref_size": 1000, "pot_check_n": 16}
    _load("bench_ot").main(["--quick", "--out", str(out)], sizes=sizes)
    res = json.loads(out.read_text())
    assert {row["rho"] for row in res["pot"]} == {0.5, 0.9, 0.99}
    for row in res["pot"]:
        # both routes certify 1e-10; the operator's rows agree with its own 1e-13 answer
        assert row["max_error_ours"] <= 1e-9 and row["max_error_pot"] <= 1e-8 and row["ratio"] > 0
    assert all(len(row["pot_prefix_s"]) == row["pot_prefixes_timed"] for row in res["pot"])
    assert all(row["pot_total_s"] > 0 and row["estimate_over_total_strata_2"] > 0 for row in res["pot_check"])
    assert all(row["log_error_bound"] <= 1e-6 and row["seconds"] > 0 for row in res["prior"])
    assert all(row["max_diff_accelerated_vs_plain"] <= 1e-10 for row in res["spread"])
    assert all(row["max_diff"] <= 1e-10 for row in res["design"])


@pytest.mark.slow
def test_bench_ot_attention_quick(tmp_path):
    out = tmp_path / "ot_attention.json"
    sizes = {"numpy_lengths": [8], "sdpa_lengths": [8], "rhos": [0.5], "reps": 1, "memory": False,
             "float64_lengths": [8]}
    _load("bench_ot_attention").main(["--quick", "--out", str(out)], sizes=sizes)
    res = json.loads(out.read_text())
    assert res["against_numpy"][0]["max_abs_error_float64"] <= 1e-4
    assert res["against_sdpa"][0]["time_ratio"] > 0
    assert res["float64_pairs"][0]["time_ratio"] > 0 and res["float64_pairs"][0]["time_ratio_no_pairs"] > 0


@pytest.mark.slow
def test_bench_checkpoint_quick(tmp_path):
    out = tmp_path / "checkpoint.json"
    _load("bench_checkpoint").main(["--quick", "--out", str(out)], sizes={"layers": 1, "d": 16, "vocab": 32})
    res = json.loads(out.read_text())
    assert res["tensors_read"] == 2 and res["fraction_read"] < 0.5


@pytest.mark.slow
def test_a_quick_run_never_replaces_the_committed_figures(tmp_path):
    """Without --out a --quick run writes nothing (it used to overwrite the JSON the README quotes)."""
    module = _load("bench_checkpoint")
    module.RESULTS = tmp_path / "committed.json"
    module.main(["--quick"], sizes={"layers": 1, "d": 16, "vocab": 32})
    assert not module.RESULTS.exists()
