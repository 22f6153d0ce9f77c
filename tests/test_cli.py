"""The otprior command: results equal the library's, bad input gives one line and status 2."""

import json
import subprocess
import sys

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
        (["yarn", "--scale", "8", "--logit-bound", "1"], "diluting"),
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
    data = json.loads(out)
    assert data["window_mass"] == otprior.window_mass(64, 10**12, 1.05)
    lo, hi = data["window_mass_bounds"]
    assert lo <= data["window_mass"] <= hi
    code, out, _ = run(capsys, "mass", "--window", "8", "--n", "1000", "--alpha", "1", "--dps", "25")
    assert code == 0 and "25 digits" in out
    plot = tmp_path / "prior.png"
    code, out, _ = run(capsys, "prior", "--rho", "0.5", "--n", "4096", "--plot", str(plot), "--json")
    assert code == 0 and plot.stat().st_size > 1000
    assert json.loads(out)["windows"][0]["mass"] == pytest.approx(otprior.ot_window_mass(1, 4096, 0.5), rel=1e-14)


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
        (["classify", "alibi", "--r1", "3"], "does not take"),
        (["classify", "sinusoidal"], "unknown encoding"),
        (["classify", "bias", "--expr", "log(("], "--expr"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_status_two(capsys, argv, needle):
    with pytest.raises(SystemExit) as info:
        code = main(argv)
        raise SystemExit(code)
    assert info.value.code == 2
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
    with pytest.raises(SystemExit) as info:
        main([sub, "--help"])
    assert info.value.code == 0
    out, _ = capsys.readouterr()
    assert "--json" in out


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
