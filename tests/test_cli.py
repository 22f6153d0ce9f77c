"""The otprior command: results equal the library's, bad input gives one line and status 2."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import otprior
from otprior.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_margin_json_equals_library(capsys):
    code, out, _ = run(capsys, "margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0.05", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["margin"] == otprior.margin_for(64, (512, 8192), 0.05).margin
    code, out, _ = run(capsys, "margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0.05")
    assert "0.3628" in out and "bracket" in out


@pytest.mark.parametrize(
    "argv, kind",
    [
        (["nope"], "diluting"),
        (["rope", "--logit-bound", "2"], "diluting"),
        (["yarn", "--factor", "8", "--logit-bound", "1"], "diluting"),
        (["alibi", "--slope", "0.25"], "bounded"),
        (["kerple-log", "--r1", "0.9", "--r2", "1"], "diluting"),
        (["kerple-log", "--r1", "1.4", "--r2", "1"], "bounded"),
        (["kerple-power", "--r1", "0.5", "--r2", "1"], "bounded"),
        (["t5"], "diluting"),
        (["fire"], "diluting"),
        (["cable", "--min-increment", "0.05"], "bounded"),
        (["log-distance", "--alpha", "1.2"], "bounded"),
        (["causal-ot", "--rho", "0.5"], "diluting"),
        (["bias", "--expr=-2*log(d+1)"], "bounded"),
    ],
)
def test_classify_every_encoding(capsys, argv, kind):
    code, out, _ = run(capsys, "classify", *argv, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kind"] == kind and data["reason"]
    assert 0 <= data["limit_distant_mass"] <= 1


def test_mass_and_prior(capsys, tmp_path):
    code, out, _ = run(capsys, "mass", "--window", "64", "--n", "1e12", "--alpha", "1.05", "--json")
    assert code == 0
    (row,) = json.loads(out)["rows"]
    assert row["window_mass"] == otprior.window_mass(64, 10**12, 1.05)
    lo, hi = row["window_mass_bounds"]
    assert lo <= row["window_mass"] <= hi
    code, out, _ = run(capsys, "mass", "--window", "8", "--n", "1000", "--alpha", "1", "--dps", "25")
    assert code == 0 and "25 digits" in out
    plot = tmp_path / "prior.png"
    code, out, _ = run(capsys, "prior", "--rho", "0.5", "--n", "4096", "--plot", str(plot), "--json")
    assert code == 0 and plot.stat().st_size > 1000
    assert json.loads(out)["windows"][0]["mass"] == pytest.approx(otprior.ot_window_mass(1, 4096, 0.5), rel=1e-14)
    # the file is the user's now: a second run refuses to replace it, --force replaces it
    code, _, err = run(capsys, "prior", "--rho", "0.5", "--n", "64", "--plot", str(plot))
    assert code == 2 and "--plot" in err and "--force" in err
    assert run(capsys, "prior", "--rho", "0.5", "--n", "64", "--plot", str(plot), "--force")[0] == 0


def test_prior_full_prints_every_entry(capsys):
    code, out, _ = run(capsys, "prior", "--rho", "0.5", "--n", "100", "--full", "--json")
    assert code == 0
    prior = json.loads(out)["prior"]
    np.testing.assert_allclose(prior, otprior.ot_prior(100, 0.5), rtol=1e-15)
    assert sum(prior) == pytest.approx(1.0, abs=1e-12)


def test_mass_of_alibi_heads(capsys):
    """``--heads H``: ALiBi's standard slopes, each head's distant mass in closed form e^(-mW)(1-e^(-m(n-W)))/(1-e^(-mn))."""
    code, out, _ = run(capsys, "mass", "alibi", "--heads", "12", "--window", "16", "--n", "1024", "65536", "--json")
    assert code == 0
    rows = json.loads(out)["rows"]
    assert len(rows) == 24 and {r["head"] for r in rows} == set(range(12))
    # the slopes of 12 heads (Press et al.): those of 8 heads, then every other one of 16
    slopes = [2 ** (-8 * (i + 1) / 8) for i in range(8)] + [2 ** (-8 * (i + 1) / 16) for i in range(16)][0::2][:4]
    for r in rows:
        m, n, W = slopes[r["head"]], r["n"], 16
        expected = (math.exp(-m * W) - math.exp(-m * n)) / (1 - math.exp(-m * n))
        assert r["distant_mass"] == pytest.approx(expected, rel=1e-12)
        assert r["window_mass"] == pytest.approx(1 - expected, rel=1e-12, abs=1e-15)


def test_mass_of_any_encoding(capsys):
    code, out, _ = run(capsys, "mass", "kerple-log", "--r1", "1.5", "--r2", "0.5", "--window", "8", "--n", "4096", "--json")
    assert code == 0
    (row,) = json.loads(out)["rows"]
    d = np.arange(4096.0)
    w = (1 + 0.5 * d) ** -1.5  # direct sum, independent of the library's route
    assert row["distant_mass"] == pytest.approx(w[8:].sum() / w.sum(), rel=1e-10)
    code, _, err = run(capsys, "mass", "nope", "--heads", "4", "--window", "8", "--n", "64")
    assert code == 2 and "--heads" in err


def test_mass_prints_a_tiny_window_mass_as_itself(capsys):
    """The window share is computed as itself, not as 1 - D (which is 0 in double when D rounds to 1)."""
    code, out, _ = run(capsys, "mass", "bias", "--expr", "0.5*sin(d)", "--window", "64", "--n", "1e300", "--json")
    assert code == 0
    (row,) = json.loads(out)["rows"]
    # the total is n I_0(1/2) up to a relative O(log n / n) (equidistribution of d mod 2 pi)
    from scipy.special import i0

    ref = math.fsum(math.exp(0.5 * math.sin(d)) for d in range(64)) / (1e300 * i0(0.5))
    assert row["window_mass"] == pytest.approx(ref, rel=1e-12, abs=0)
    assert row["distant_mass"] == 1.0


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["margin", "--window", "64", "--lengths", "8192", "512", "--tol", "0.05"], "--lengths"),
        (["margin", "--window", "600", "--lengths", "512", "8192", "--tol", "0.05"], "--window"),
        (["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "1.5"], "--tol"),
        (["margin", "--window", "64", "--lengths", "512", "--tol", "0.05"], "--lengths"),
        (["mass", "--window", "64", "--n", "1e12", "--alpha", "-1"], "--alpha"),
        (["mass", "--window", "64", "--n", "10.5", "--alpha", "1"], "--n"),
        (["prior", "--rho", "1.2", "--n", "10"], "--rho"),
        (["classify", "kerple-log", "--r1", "0.9"], "--r2"),
        (["classify", "kerple-log", "--r1", "-1", "--r2", "1"], "--r1"),
        (["classify", "alibi", "--r1", "3"], "alibi does not take --r1"),
        (["classify", "sinusoidal"], "unknown encoding"),
        (["classify", "fire", "--f", "x"], "fire does not take --f"),
        (["classify", "bias", "--expr", "log(("], "--expr"),
        (["classify", "bias", "--expr", "__import__('os').system('touch pwned')+d"], "--expr"),
        (["classify", "bias", "--expr=-2*x"], "--expr"),
        (["classify", "bias", "--expr=-d", "--time-budget", "0"], "--time-budget"),
        (["classify", "log-distance", "--alpha", "1.2", "--entmax-alpha", "2"], "--entmax-alpha"),
        (["classify", "nope", "--normaliser", "logn"], "--logn-train-length"),
        (["classify", "nope", "--normaliser", "entmax", "--entmax-alpha", "0.5"], "--entmax-alpha"),
        (["classify", "nope", "--normaliser", "fancy"], "--normaliser"),
        (["classify", "cable", "--min-increment", "0.1,0.2"], "--min-increment"),
        (["mass", "nope", "--window", "4", "--n", "64", "--slope", "1"], "nope does not take --slope"),
        (["classify", "alibi", "--slope", "nan"], "--slope"),
        (["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0"], "--tol"),
        (["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0.05", "--offset", "1e301"], "--offset"),
        (["prior", "--rho", "0.5", "--n", "1e12", "--full"], "--n"),
        (["mass", "causal-ot", "--rho", "0.5", "--window", "4", "--n", "1e12"], "--n"),
        (["mass", "alibi", "--heads", "1e12", "--window", "4", "--n", "64"], "--heads"),
        (["mass", "t5", "--max-distance", "10000000000000000000", "--window", "4", "--n", "64"], "--max-distance"),
        (["mass", "alibi", "--heads", "5e6", "--window", "4", "--n", "64"], "--heads"),
        (["mass", "fire", "--window", "4", "--n", "64", "--dps", "20"], "--dps"),
        (["report", "--out", ""], "--out"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_status_two(capsys, argv, needle):
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("otprior: error:")
    assert needle in err
    assert "Traceback" not in err


def test_no_traceback_from_the_console_script():
    proc = subprocess.run(
        [sys.executable, "-m", "otprior.cli", "mass", "--window", "0", "--n", "10", "--alpha", "1"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("sub", ["margin", "classify", "prior", "mass", "report", "checkpoint", "intervene"])
def test_help(capsys, sub):
    assert main([sub, "--help"]) == 0
    out, _ = capsys.readouterr()
    assert "--json" in out and "Infinity" in out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"otprior {otprior.__version__}"


def test_python_dash_m(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(otprior.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "otprior", "--version"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"otprior {otprior.__version__}"
    proc = subprocess.run([sys.executable, "-m", "otprior", "prior", "--rho", "2", "--n", "8"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--rho" in proc.stderr


def test_broken_pipe_is_quiet():
    """``otprior ... | head -1``: the reader leaves early; no traceback, no message, status 141."""
    env = dict(os.environ, PYTHONPATH=str(Path(otprior.__file__).resolve().parents[1]))
    cmd = [sys.executable, "-m", "otprior", "prior", "--rho", "0.5", "--n", "20000", "--full"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, bufsize=0) as proc:
        first = os.read(proc.stdout.fileno(), 64)  # a few bytes of the 700 kB, as head reads its line
        proc.stdout.close()
        err = proc.stderr.read().decode()
        status = proc.wait(timeout=60)
    assert first.startswith(b"constant-score prior")
    assert err == ""
    assert status == 141


def _strict(text):
    def refuse(token):
        raise ValueError(token)

    return json.loads(text, parse_constant=refuse)


def test_json_is_strict_for_non_finite_numbers(capsys):
    from otprior.cli import to_strict_json

    data = {"a": math.inf, "b": [-math.inf, math.nan, np.float64("nan")], "c": np.array([1.0, np.inf]), "d": (1, 2.5)}
    text = json.dumps(to_strict_json(data), allow_nan=False)
    assert _strict(text) == {"a": "Infinity", "b": ["-Infinity", "NaN", "NaN"], "c": [1.0, "Infinity"], "d": [1, 2.5]}
    with pytest.raises(ValueError):
        _strict(json.dumps({"x": math.inf}))  # the check itself refuses what json.dumps writes by default


@pytest.mark.parametrize(
    "argv",
    [
        ["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0.05"],
        ["classify", "nope"],
        ["classify", "t5"],
        ["classify", "bias", "--expr=-d"],
        ["prior", "--rho", "0.9", "--n", "2048"],
        ["mass", "fire", "--window", "8", "--n", "64", "1024"],
        ["mass", "causal-ot", "--rho", "0.5", "--window", "8", "--n", "64"],
    ],
)
def test_every_json_command_is_strict(capsys, argv):
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    _strict(out)


def test_report_folder_rules(tmp_path, capsys, monkeypatch):
    """New or empty folder, or --force; nothing written outside it, links replaced, not followed."""
    import otprior.report

    calls = []

    def quick(folder, progress):
        calls.append(folder)
        (folder / "index.html").write_text("report")
        (folder / "tables.json").write_text("{}")

    monkeypatch.setattr(otprior.report, "_write_report", quick)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("the user's page")
    code, _, err = run(capsys, "report", "--out", str(mine))
    assert code == 2 and "--out" in err and "--force" in err and err.count("\n") == 1
    assert (mine / "index.html").read_text() == "the user's page" and not calls
    # with --force, a link at a report name is replaced; its target outside is untouched
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    (mine / "tables.json").symlink_to(outside)
    assert run(capsys, "report", "--out", str(mine), "--force")[0] == 0
    assert outside.read_text() == "precious"
    assert not (mine / "tables.json").is_symlink() and (mine / "tables.json").read_text() == "{}"
    assert sorted(p.name for p in mine.iterdir()) == ["index.html", "tables.json"]  # no staging left behind
    # a new folder, nested
    assert run(capsys, "report", "--out", str(tmp_path / "a" / "b"))[0] == 0
    assert (tmp_path / "a" / "b" / "index.html").read_text() == "report"
    # an empty folder
    (tmp_path / "empty").mkdir()
    assert run(capsys, "report", "--out", str(tmp_path / "empty"))[0] == 0


@pytest.mark.parametrize("out", ["", " ", "/proc", "/proc/otprior", "/dev/null", "/etc/hostname"])
def test_report_refuses_bad_folders_up_front(capsys, out, monkeypatch):
    import otprior.report

    monkeypatch.setattr(otprior.report, "_write_report", lambda folder, progress: pytest.fail("computed"))
    code, _, err = run(capsys, "report", "--out", out)
    assert code == 2 and err.count("\n") == 1 and "--out" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_report_refuses_an_unwritable_folder(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, _, err = run(capsys, "report", "--out", str(locked / "rep"))
    assert code == 2 and "not writable" in err


def test_library_errors_name_the_command_flag(capsys):
    """A DomainError's parameter is mapped to the flag that carried it; no flag the command lacks is named."""
    code, _, err = run(capsys, "classify", "bias", "--expr=-2*x")
    assert code == 2 and "--expr" in err and "symbol" not in err.split(":")[2]
    code, _, err = run(capsys, "classify", "log-distance", "--alpha", "1.2", "--normaliser", "temperature", "--temperature-factor", "-1")
    assert code == 2 and "--temperature-factor" in err and "--alpha" not in err
    code, _, err = run(capsys, "classify", "kerple-power", "--r1", "1", "--r2", "0.5", "--window", "0")
    assert code == 2 and "--window" in err and "--n" not in err


@pytest.mark.slow
def test_report(tmp_path):
    from otprior.report import build_report

    index = build_report(tmp_path / "rep", progress=False)
    text = index.read_text()
    pngs = sorted(p.name for p in (tmp_path / "rep").glob("*.png"))
    assert len(pngs) == 6
    for name in pngs:
        assert f"src='{name}'" in text
    tables = json.loads((tmp_path / "rep" / "tables.json").read_text())
    assert set(tables) == {"log_distance_window_mass", "margins", "encodings", "ot_dilution", "limits_in_rho"}
    ref = [r for r in tables["margins"] if r["window"] == 64 and r["L0"] == 512 and r["tol"] == 0.05][0]
    assert ref["margin"] == pytest.approx(0.3628, abs=5e-5)


# --- encodings and normalisers from the registries ------------------------------------------------

#: the flags an encoding needs (its required parameters, or values its verdicts need) and the same as keywords
_T5_TABLE = [-1.0] * 16 + [-2.0] * 16
_NEEDS = {
    "alibi": (["--slope", "0.5"], {"slope": 0.5}),
    "bias": (["--expr=-2*log(d+1)"], {"expr": "-2*log(d+1)"}),
    "cable": (["--min-increment", "0.05"], {"min_increment": 0.05}),
    "log-distance": (["--alpha", "1.2"], {"alpha": 1.2}),
    "kerple-log": (["--r1", "1.5", "--r2", "1"], {"r1": 1.5, "r2": 1.0}),
    "kerple-power": (["--r1", "0.5", "--r2", "1"], {"r1": 0.5, "r2": 1.0}),
    "causal-ot": (["--rho", "0.5"], {"rho": 0.5}),
    "rope": (["--logit-bound", "1"], {"logit_bound": 1.0}),
    "yarn": (["--factor", "8", "--logit-bound", "1"], {"factor": 8.0, "logit_bound": 1.0}),
    "t5": (["--values=" + ",".join(map(str, _T5_TABLE))], {"values": tuple(_T5_TABLE)}),
    "nope": ([], {}),
    "fire": ([], {}),
}
_NORMALISER_NEEDS = {"logn": (["--logn-train-length", "4096"], {"train_length": 4096})}


def test_every_encoding_flag_comes_from_the_registry():
    """Each encoding's leaf has exactly its own parameters' flags: no --c or --L beside alibi."""
    import argparse

    from otprior import cli, encodings

    parser = cli.build_parser()
    (top,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for command in ("classify", "mass"):
        (leaves,) = [a for a in top.choices[command]._actions if isinstance(a, argparse._SubParsersAction)]
        assert set(leaves.choices) == set(encodings.names())
        everyone = {f for name in encodings.names() for f in ("--" + p.name.replace("_", "-") for p in encodings.parameters(name))}
        for name, leaf in leaves.choices.items():
            own = {"--" + p.name.replace("_", "-") for p in cli.encoding_parameters(name)}
            flags = {s for a in leaf._actions for s in a.option_strings}
            assert own <= flags
            assert not (everyone - own) & flags, (name, (everyone - own) & flags)
    assert "--c" in {s for a in leaves.choices["fire"]._actions for s in a.option_strings}


def test_classify_help_shows_the_encodings_own_flags(capsys):
    assert main(["classify", "kerple-power", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--wei-a" in out and "--r2" in out and "--normaliser" in out and "--slope" not in out


@pytest.mark.parametrize("encoding", sorted(_NEEDS))
def test_classify_covers_every_normaliser(capsys, encoding):
    """Every (encoding, normaliser) pair from the command line, its verdict the library's."""
    from otprior import classify, encodings, normalisers

    assert set(_NEEDS) == set(encodings.names())
    flags, params = _NEEDS[encoding]
    for name in normalisers.names():
        if encoding == "bias" and name not in ("softmax", "ssmax"):
            continue  # each expression verdict runs a child process; two suffice for the wiring
        extra, kwargs = _NORMALISER_NEEDS.get(name, ([], {}))
        code, out, err = run(capsys, "classify", encoding, *flags, "--normaliser", name, *extra, "--logit-bound", "0.5", "--json")
        assert code == 0, (name, err)
        data = _strict(out)
        expected = classify(encodings.get(encoding, **{**params, "logit_bound": 0.5}), normalisers.get(name, **kwargs))
        assert data["kind"] == expected.kind and data["reason"] == expected.reason
        assert data["normaliser"] == repr(normalisers.get(name, **kwargs))


def test_classify_heads_one_verdict_each(capsys):
    """ALiBi --heads H: H verdicts, D_oo(W) = e^(-m W) for the standard slopes 2^(-8(h+1)/H)."""
    code, out, _ = run(capsys, "classify", "alibi", "--heads", "8", "--window", "4", "--json")
    assert code == 0
    heads = _strict(out)["heads"]
    assert [h["head"] for h in heads] == list(range(8))
    for h in heads:
        assert h["kind"] == "bounded"
        assert h["limit_distant_mass"] == pytest.approx(math.exp(-(2 ** (-(h["head"] + 1))) * 4), rel=1e-12)
    # per-head values as a comma-separated list: one bounded and one diluting head
    code, out, _ = run(capsys, "classify", "log-distance", "--alpha", "1.1,0.9", "--json")
    data = _strict(out)
    assert code == 0 and [h["kind"] for h in data["heads"]] == ["bounded", "diluting"]
    assert data["counts"]["bounded"] == 1 and data["counts"]["diluting"] == 1


def test_mass_per_head_values(capsys):
    code, out, _ = run(capsys, "mass", "kerple-log", "--r1", "1.5,0.5", "--r2", "0.5", "--window", "8", "--n", "4096", "--json")
    assert code == 0
    rows = _strict(out)["rows"]
    d = np.arange(4096.0)
    for row, r1 in zip(rows, (1.5, 0.5), strict=True):
        w = (1 + 0.5 * d) ** -r1  # direct sum, independent of the library's route
        assert row["distant_mass"] == pytest.approx(w[8:].sum() / w.sum(), rel=1e-10)


def test_expression_time_budget(capsys):
    """A tower the parser lets through is undecided when its budget ends, and says so."""
    code, out, _ = run(capsys, "classify", "bias", "--expr=-d**d**d", "--time-budget", "0.5", "--json")
    assert code == 0
    data = _strict(out)
    assert data["kind"] == "undecided" and "0.5 s" in data["reason"] and data["limit_distant_mass"] is None


# --- checkpoints ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference_checkpoints(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from otprior.torch.model import ModelConfig, ReferenceModel, save_model

    root = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    out = {}
    for scheme in ("kerple-log", "alibi"):
        cfg = ModelConfig(scheme=scheme, d_model=8, n_layers=2, n_heads=2, d_ff=16, train_length=16)
        out[scheme] = save_model(ReferenceModel(cfg), root / f"{scheme}.safetensors")
    text = root / "text.txt"
    text.write_text("def f(x):\n    return x * 2 + 1\n" * 40)
    out["text"] = text
    out["root"] = root
    return out


def test_checkpoint_equals_the_library(capsys, reference_checkpoints):
    from otprior.torch import analyse_checkpoint

    path = reference_checkpoints["kerple-log"]
    code, out, _ = run(capsys, "checkpoint", str(path), "--scheme", "kerple-log", "--json")
    assert code == 0
    data = _strict(out)
    expected = analyse_checkpoint(path, scheme="kerple-log")
    assert data["lengths"] == [16, 128] == list(expected.lengths)  # the training length found, and beyond
    assert [h["kind"] for h in data["heads"]] == [r["kind"] for r in expected.rows]
    assert [h["distant_mass"] for h in data["heads"]] == [r["distant_mass"] for r in expected.rows]
    code, out, _ = run(capsys, "checkpoint", str(path), "--window", "4", "--lengths", "16", "32", "64")
    assert code == 0 and "D_64" in out and "margin" in out


def test_checkpoint_measure_and_plot(capsys, reference_checkpoints, tmp_path):
    path, text = reference_checkpoints["alibi"], reference_checkpoints["text"]
    figs = tmp_path / "figs"
    argv = ["checkpoint", str(path), "--lengths", "16", "32", "--measure", "--text", str(text), "--plot", str(figs), "--json"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    data = _strict(out)
    rows = data["measurement"]["rows"]
    assert len(rows) == 2 * 2 * 2  # layers x heads x lengths
    for r in rows:
        assert 0.0 <= r["measured_distant_mass"] <= 1.0 and r["band"][0] <= r["band"][1]
    assert sorted(p.name for p in figs.iterdir()) == ["measured_layer0.png", "measured_layer1.png", "parameters.png"]
    assert all((figs / name).read_bytes()[:4] == b"\x89PNG" for name in ("parameters.png", "measured_layer0.png"))
    code, _, err = run(capsys, *argv)  # the folder holds the figures now: refused without --force
    assert code == 2 and "--plot" in err and "--force" in err


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--mapping", "pos.bias_p=bias_p"], "--mapping"),
        (["--scheme", "kerple-log", "--mapping", "x=nonsense"], "--mapping"),
        (["--text", "TEXT"], "--text"),
        (["--measure"], "--measure"),
        (["--lengths", "32", "16"], "--lengths"),
        (["--window", "64", "--lengths", "16", "32"], "--window"),
        (["--scheme", "frobnicate"], "--scheme"),
        (["--scheme", "alibi"], "contradicts"),
        (["--num-heads", "0"], "--num-heads"),
        (["--measure", "--text", "TEXT", "--lengths", "16", "4096"], "--text"),
        (["--measure", "--text", "/dev/zero"], "--text"),
    ],
)
def test_checkpoint_bad_input(capsys, reference_checkpoints, extra, needle):
    extra = [str(reference_checkpoints["text"]) if x == "TEXT" else x for x in extra]
    code, _, err = run(capsys, "checkpoint", str(reference_checkpoints["kerple-log"]), *extra)
    assert code == 2 and err.count("\n") == 1 and needle in err, err


def test_falcon_classify_names_no_flag_the_user_did_not_give(capsys):
    """Falcon's bfloat16 rows have no limit D_oo(W): the verdict is printed, and the default
    window is not reported as a bad --window."""
    argv = ["classify", "alibi", "--slope", "0.0625", "--variant", "falcon", "--head-dim", "64"]
    code, out, err = run(capsys, *argv)
    assert code == 0 and err == "" and "--window" not in out
    assert "no limit: liminf D_n(W = 64) = 0, limsup = 1" in out  # the oscillating verdict's bounds
    code, out, _ = run(capsys, *argv, "--json")
    doc = json.loads(out)
    assert code == 0 and doc.get("limit_distant_mass") is None
    assert (doc["liminf_distant_mass"], doc["limsup_distant_mass"]) == (0.0, 1.0)
    code, out, _ = run(capsys, "classify", "alibi", "--slope", "0.0625", "--window", "4")
    assert code == 0 and f"D_oo(W = 4) = {math.exp(-0.25):.6g}" in out  # e^(-mW), unchanged


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["margin", "--window", "4", "--length", "8", "16", "--tol", "0.1"], "--length (did you mean --lengths?)"),
        (["--verison"], "--verison (did you mean --version?)"),
        (["classify", "nope", "--normalizer", "ssmax"], "--normalizer (did you mean --normaliser?)"),
        (["margin", "--window", "4", "--lengths", "8", "16", "--tol", "0.1", "--growht=absolute"], "--growht (did you mean --growth?)"),
        (["mass", "--windows", "3", "--n", "10", "--alpha", "1.1"], "--windows (did you mean --window?)"),
    ],
)
def test_misspelled_flags_are_named_with_their_spelling(capsys, argv, hint):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err == f"otprior: error: unrecognized argument {hint}\n"


def test_unrelated_flags_and_value_errors_keep_their_message(capsys):
    code, _, err = run(capsys, "margin", "--window", "x", "--length", "8", "16")
    assert code == 2 and "'x' is not an integer" in err  # the first error, not a guess
    code, _, err = run(capsys, "margin", "--window", "4", "--zzzzzz", "8", "16", "--tol", "0.1")
    assert code == 2 and "did you mean" not in err and "--lengths" in err


def test_every_command_has_a_description_and_help_has_no_tex(capsys):
    for command in ("prior", "report"):
        code, out, _ = run(capsys, command, "--help")
        usage, description = out.split("\n\n")[:2]
        assert code == 0 and not description.startswith("options:") and len(description) > 80, command
    code, out, _ = run(capsys, "classify", "alibi", "--help")
    assert code == 0 and "D_oo(W) = e^(-mW)" in " ".join(out.split()) and "infty" not in out and "{-mW}" not in out
    code, out, _ = run(capsys, "classify", "kerple-power", "--help")
    assert code == 0 and "d^(r_2)" in out and "^{" not in out


_PLUGIN = '''
from dataclasses import dataclass, field

import numpy as np

import otprior
from otprior.encodings import Encoding, Verdict, register


@register
@dataclass(frozen=True, repr=False)
class Geometric(Encoding):
    """Geometric bias b(d) = -d/s, a plugin's encoding."""

    name = "geometric-plugin"
    s: float = field(default=2.0, metadata={"doc": "scale s > 0"})

    def __post_init__(self):
        if not isinstance(self.s, (int, float)) or isinstance(self.s, bool) or not 0 < self.s <= 1e6:
            raise otprior.DomainError("s", self.s, "a real number in (0, 1e6]")

    def bias(self, d, n=None):
        return -np.asarray(d, dtype=float) / self.s

    def _verdict(self):
        return Verdict(self, True, "bounded", "e^(-d/s) is summable (Theorem 11).", "geometric",
                       limit_fn=lambda W: float(np.exp(-W / self.s)))
'''


def test_an_installed_package_offers_its_encoding_to_the_shell_command(tmp_path):
    """A package declaring a module under the entry-point group ``otprior.encodings`` gets its registered
    encoding listed by ``otprior classify --help`` and classified by the shell command; a broken plugin is
    named in one warning line and left out. The packages are installed as a site folder with dist-info
    metadata, as pip lays them out."""
    (tmp_path / "geometric_plugin.py").write_text(_PLUGIN)
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('broken on purpose')\n")
    for dist, group in (("geometric_plugin-0.1", "geometric = geometric_plugin"), ("broken_plugin-0.1", "broken = broken_plugin")):
        info = tmp_path / f"{dist}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.split('-')[0]}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[otprior.encodings]\n{group}\n")
    root = Path(otprior.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(tmp_path)]))

    def shell(*argv):
        return subprocess.run([sys.executable, "-m", "otprior", *argv], capture_output=True, text=True, env=env, timeout=120)

    listed = shell("classify", "--help")
    assert listed.returncode == 0 and "geometric-plugin" in listed.stdout and "Geometric bias" in listed.stdout
    assert listed.stderr.count("\n") == 1 and "broken = broken_plugin" in listed.stderr and "broken on purpose" in listed.stderr
    done = shell("classify", "geometric-plugin", "--s", "4", "--window", "8", "--json")
    data = json.loads(done.stdout)
    assert done.returncode == 0 and data["kind"] == "bounded"
    assert data["limit_distant_mass"] == pytest.approx(math.exp(-8 / 4), rel=1e-15)  # the plugin's D_oo(W), passed through


@pytest.mark.parametrize("text", ["1_0", "1_000", "\u0661\u0660", "4096.0", "0x10", "1e-3", "+inf", "1e1_0"])
def test_integer_flags_take_plain_digits_or_an_exponent_only(capsys, text):
    """Python's int() reads '1_0' as 10 and Arabic-Indic digits as digits; an integer flag takes plain
    ASCII digits (or the documented exponent form 1e12) and refuses the rest in one line, status 2."""
    code, _, err = run(capsys, "mass", "--window", "4", "--n", text, "--alpha", "1.5")
    assert code == 2 and err.count("\n") == 1 and "--n" in err and "not an integer" in err
    code, out, _ = run(capsys, "mass", "--window", "4", "--n", "1000", "2e3", "--alpha", "1.5", "--json")
    assert code == 0 and [r["n"] for r in json.loads(out)["rows"]] == [1000, 2000]


def test_prior_takes_every_length_the_library_takes(capsys):
    """--n up to 1e300 (ot_window_mass's domain): beyond the memory cap the masses are ot_window_mass's,
    the prior is not formed; --full beyond the cap is refused by name."""
    code, out, _ = run(capsys, "prior", "--rho", "0.5", "--n", "1e300", "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["prior_formed"] is False and payload["n"] == 10**300  # the integer typed, exactly
    for row in payload["windows"]:
        assert row["mass"] == float(otprior.ot_window_mass(row["window"], 10**300, 0.5))
    code, _, err = run(capsys, "prior", "--rho", "0.5", "--n", "1e301")
    assert code == 2 and "--n" in err
    code, _, err = run(capsys, "prior", "--rho", "0.5", "--n", "1e300", "--full")
    assert code == 2 and "--n" in err and err.count("\n") == 1


def test_integer_flags_are_read_exactly_and_only_as_ascii():
    """An exponent form names its integer exactly (no rounding through a double), a value of
    thousands of digits is refused by the flag's own range (one line, cut), and padding other
    than ASCII white space is refused."""
    import argparse

    from otprior.cli._common import int_type

    parse = int_type(1, 10**300)
    assert parse("9007199254740993e0") == 2**53 + 1
    assert parse("1.5e1") == 15 and parse("0" * 5000 + "5") == 5 and parse(" 12\t") == 12
    assert parse("1e300") == 10**300
    for bad in ("1.0000000000000000000001e300", "9" * 5000, "1e999999999999", "1.25e1", "\u00a05", "5\x1c", "1_0"):
        with pytest.raises(argparse.ArgumentTypeError) as err:
            parse(bad)
        assert len(str(err.value)) < 300
