"""The report: figures as PNG and PDF, version and parameters recorded, bracket widths shown,
lengths readable, headings in words."""

import inspect
import json
import re

import mpmath
import pytest

import otprior
from otprior import plots, report


def test_lengths_are_readable():
    assert report._fmt_n(10**15) == "10<sup>15</sup>"
    assert report._fmt_n(10**4) == "10<sup>4</sup>"
    assert report._fmt_n(16384) == "16&#8239;384"
    assert report._fmt_n(512) == "512"


def test_mathtext_labels_become_html():
    assert report._plain("ALiBi, slope $2^{-4}$") == "ALiBi, slope 2<sup>-4</sup>"
    assert report._plain("log-distance, $\\alpha = 1.05$") == "log-distance, α = 1.05"


def test_every_table_and_figure_has_parameters_and_a_title():
    """Each recorded parameter set is exactly a call of its function (so none is left implicit)."""
    for _key, title, caption, params, func, columns in report.TABLES:
        assert "_" not in title and title[0].isupper()
        assert caption and columns
        inspect.signature(func).bind(**params)
    for _name, func_name, params, caption in report.FIGURES:
        assert func_name in plots.__all__ and caption
        inspect.signature(getattr(otprior.plots, func_name)).bind(**params)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    index = report.build_report(out, progress=False)
    return out, index.read_text(encoding="utf-8")


@pytest.mark.slow
def test_figures_in_png_and_pdf(built):
    out, html = built
    for name, *_ in report.FIGURES:
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
        assert f"src='{name}.png'" in html and f"href='{name}.pdf'" in html


@pytest.mark.slow
def test_version_and_every_parameter_recorded(built):
    out, html = built
    params = json.loads((out / "parameters.json").read_text())
    assert params["versions"]["otprior"] == otprior.__version__
    assert f"otprior {otprior.__version__}" in html
    assert params["commit"] == report._commit() and f"commit <code>{params['commit']}</code>" in html
    assert set(params["tables"]) == {t[0] for t in report.TABLES}
    assert set(params["figures"]) == {f[0] for f in report.FIGURES}
    assert params["tables"]["log_distance_window_mass"]["lengths"][-1] == 10**15


@pytest.mark.slow
def test_headings_are_words_and_lengths_readable(built):
    _, html = built
    headings = re.findall(r"<h[1-3]>(.*?)</h[1-3]>", html)
    assert headings and not any("_" in h for h in headings)
    assert "1000000000000000" not in html and "10<sup>15</sup>" in html
    assert "bracket width" in html
    assert "<th>lower</th>" not in html and "<th>upper</th>" not in html


@pytest.mark.slow
def test_brackets_contain_the_mass_computed_by_mpmath(built):
    """Each reported bracket holds the window mass H_W / H_n evaluated by mpmath at 40 digits,
    and its reported width is its width."""
    out, _ = built
    rows = json.loads((out / "tables.json").read_text())["log_distance_window_mass"]
    ctx = mpmath.MPContext()
    ctx.dps = 40
    for row in rows:
        W, n, a = row["window"], row["n"], ctx.mpf(row["alpha"])
        if row["alpha"] == 1.0:
            exact = ctx.harmonic(W) / ctx.harmonic(n)
        else:
            exact = (ctx.zeta(a) - ctx.zeta(a, W + 1)) / (ctx.zeta(a) - ctx.zeta(a, n + 1))
        assert row["lower"] <= exact <= row["upper"], row
        assert row["relative_width"] == pytest.approx((row["upper"] - row["lower"]) / row["window_mass"], rel=1e-12)
        assert 0 < row["relative_width"] < 1e-4  # Theorem 8's promise for W >= 16


def test_every_table_is_strict_json_and_names_its_columns():
    """Every table of the report (the whole default computation, a few seconds) is written
    as strict JSON: no object the encoder cannot write, no bare NaN or Infinity. The full
    build with its figures is the slow test above."""
    import json

    from otprior import report
    from otprior._json import to_strict_json

    def refuse(constant):
        raise ValueError(f"bare {constant} in the JSON")

    for key, _title, _caption, params, func, columns in report.TABLES:
        rows = func(**params)
        text = json.dumps(to_strict_json(rows), allow_nan=False)
        back = json.loads(text, parse_constant=refuse)
        assert back, key
        for column, _head, _fmt in columns:
            assert all(column in row for row in back), (key, column)


def test_rates_and_limits_read_as_maths():
    """No pseudo-TeX in the rate column (``_{``, ``^``, ``<=``, ``oo``) and no bare ``oo`` beside
    a limit that the claim says is zero."""
    import sympy as sp

    from otprior.encodings import ALiBi, classify
    from otprior.symbolic import Step

    rates = [classify(enc).rate for enc in plots.default_encodings().values()]
    rates.append(classify(ALiBi(0.0625, variant="falcon", head_dim=64)).rate)
    for rate in rates:
        shown = report._math(rate)
        assert not re.search(r"[\^{}~]|_\{|&lt;=|(?<![A-Za-z])oo(?![A-Za-z])", shown), (rate, shown)
    assert report._math("D_oo(W) - D_n(W) ~ n^-(0.3)") == "D<sub>∞</sub>(W) − D<sub>n</sub>(W) ∼ n<sup>−0.3</sup>"
    assert report._math("e^{-r1 n^r2} <= x_max") == "e<sup>−r1 n<sup>r2</sup></sup> ≤ x_max"
    assert report._math("<script>") == "&lt;script&gt;"
    # the step as otprior.symbolic.dilution_limits states it (the whole table is the slow report's)
    to_one = report._limit_row(Step("rho_to_one", "1 - F_rho(delta) <= exp(-(delta Gamma(1/q + 1))^q) -> 0 as q -> 0", sp.oo, True))
    assert "-> 0" in to_one["claim"] and "oo" not in report._fmt(to_one["computed"], "html")
    assert "= ∞, so the bound exp(−∞) = 0" in to_one["computed"] and to_one["limit"] == "rho to one"
    assert report._fmt(to_one["limit"], "math") == "ρ to one"


def test_progress_counts_from_one_and_writes_lines_to_a_log():
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    log = io.StringIO()
    bar = report._Progress(3, True, stream=log)
    for label in ("a", "b", "c"):
        bar.step(label)
    bar.close()
    assert log.getvalue() == "[1/3] a\n[2/3] b\n[3/3] c\n"
    tty = Terminal()
    bar = report._Progress(2, True, stream=tty)
    bar.step("first step")
    bar.step("b")
    bar.close()
    assert tty.getvalue() == "\r[1/2] first step\r" + "[2/2] b".ljust(len("[1/2] first step")) + "\n"  # in place
    labels = [report._table_step(t[1]) for t in report.TABLES] + [report._figure_step(f[0], f[1]) for f in report.FIGURES]
    assert len(set(labels)) == len(labels)  # a table and a figure of one name are two steps


def test_commit_is_recorded_or_unknown(monkeypatch, tmp_path):
    import subprocess
    from pathlib import Path

    root = Path(report.__file__).resolve().parent.parent
    commit = report._commit()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = None
    if head is None or not (root / ".git").exists():
        assert commit == "unknown"
    else:
        assert commit in (head, head + "+modified")
    monkeypatch.setattr(report, "__file__", str(tmp_path / "otprior" / "report.py"))  # an installed copy
    assert report._commit() == "unknown"
