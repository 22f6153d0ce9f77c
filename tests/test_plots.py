"""Figures: returned, drawn into the caller's axes, global state untouched, every curve told apart.

References are independent of otprior.plots: the exact masses come from the library's numeric
functions (tested elsewhere against mpmath and POT), the seed spread from ``statistics.stdev``.
"""

import json
import math
import statistics
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

import otprior
import otprior.plots as P
from otprior import DomainError

ROOT = Path(__file__).resolve().parent.parent
HEAD_ROWS = [
    {"layer": layer, "head": head, "exponent": 1.1 + 0.2 * head + 0.05 * layer, "kind": "bounded",
     "distant_mass": {n: otprior.distant_mass(64, n, 1.1 + 0.2 * head + 0.05 * layer) for n in (128, 1024, 8192)}}
    for layer in range(2)
    for head in range(3)
]
RUNS = json.loads((ROOT / "bench" / "results" / "toy_extrapolation.json").read_text())["runs"]

# Small, fast arguments for every figure function (the defaults are exercised by the report).
CALLS = {
    "plot_scale_invariant_prior": ((), {"rhos": (0.0, 0.5), "n": 256}, 2),
    "plot_ot_prior": ((256, 0.5), {}, 1),
    "plot_ot_dilution": ((), {"window": 4, "rhos": (0.3, 0.8), "lengths": [16, 64, 256, 1024]}, 1),
    "plot_dilution_constants": ((), {"windows": (1, 16)}, 2),
    "plot_log_distance_window_mass": ((), {"alphas": (0.9, 1.2), "lengths": [64, 10**4, 10**9]}, 1),
    "plot_margin_growth": ((), {"window": 16, "lengths": (256, 2048), "tol": 0.1}, 1),
    "plot_distant_mass": ((otprior.encodings.LogDistance(1.2),), {"lengths": [128, 1024, 8192]}, 1),
    "plot_encoding_map": ((), {"encodings": [otprior.encodings.NoPE(), otprior.encodings.ALiBi(0.1)], "lengths": [128, 1024]}, 2),
    "plot_head_exponents": ((HEAD_ROWS,), {"margin": 0.3}, 1),
    "plot_head_distant_mass": ((HEAD_ROWS, 64), {}, 1),
    "plot_extrapolation": ((RUNS,), {"train_length": 64}, 1),
}


def _call(name, **extra):
    args, kwargs, _ = CALLS[name]
    return getattr(P, name)(*args, **{**kwargs, **extra})


def test_every_figure_function_is_exercised():
    assert sorted(n for n in P.__all__ if n.startswith("plot_")) == sorted(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_figure_is_returned_labelled_and_leaves_global_state_alone(name):
    backend = matplotlib.get_backend()
    before = dict(matplotlib.rcParams)
    fig = _call(name)
    try:
        assert isinstance(fig, matplotlib.figure.Figure)
        assert dict(matplotlib.rcParams) == before
        assert matplotlib.get_backend() == backend
        axes = [ax for ax in fig.axes if ax.has_data()]
        assert len(axes) == CALLS[name][2]
        for ax in axes:
            assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
            assert ax.get_legend() is not None, "every panel explains its curves"
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_draws_into_the_callers_axes(name):
    panels = CALLS[name][2]
    fig, axes = plt.subplots(1, panels)
    before = set(plt.get_fignums())
    try:
        target = axes if panels == 1 else list(axes)
        assert _call(name, ax=target) is fig
        assert all(ax.has_data() for ax in np.atleast_1d(axes))
        assert set(plt.get_fignums()) == before  # no extra figure behind the caller's back
    finally:
        plt.close(fig)


def test_wrong_number_of_axes_is_refused():
    fig, ax = plt.subplots()
    try:
        with pytest.raises(DomainError, match="ax"):
            P.plot_scale_invariant_prior(ax=ax)
    finally:
        plt.close(fig)


def test_backend_is_never_selected(tmp_path):
    """In a fresh interpreter with the SVG backend, drawing keeps that backend."""
    import os
    import subprocess
    import sys

    code = (
        "import matplotlib; matplotlib.use('svg')\n"
        "from otprior import plots\n"
        "plots.plot_ot_prior(64, 0.5)\n"
        "print(matplotlib.get_backend())\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "svg"


def _tick_texts(ax, which="x"):
    ax.figure.canvas.draw()
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    axis = ax.xaxis if which == "x" else ax.yaxis
    return [t.get_text() for t in axis.get_majorticklabels() if t.get_text() and lo <= t.get_position()[0 if which == "x" else 1] <= hi]


def test_length_ticks_are_plain_integers():
    fig = P.plot_ot_prior(256, 0.5)
    try:
        texts = _tick_texts(fig.axes[0], "x")
        assert "64" in texts and "1" in texts
        assert not any("times" in t or "\\mathdefault" in t for t in texts)
    finally:
        plt.close(fig)


def test_mass_ticks_are_decimals():
    fig = P.plot_ot_dilution(window=4, rhos=(0.5,), lengths=[16, 64, 256])
    try:
        texts = _tick_texts(fig.axes[0], "y")
        assert "0.1" in texts or "0.5" in texts
        assert not any("times" in t for t in texts)
    finally:
        plt.close(fig)


def test_window_law_is_clipped_to_its_domain():
    """The window law exceeds one at short lengths (rho = 0.9, W = 16, n = 32); it is not drawn there."""
    assert otprior.ot_window_law(16, 32, 0.9) > 1.0  # the situation the clipping is for
    fig = P.plot_ot_dilution(window=16, rhos=(0.9,), lengths=[32, 64, 1024])
    try:
        for line in fig.axes[0].lines:
            y = np.asarray(line.get_ydata(), float)
            assert np.all(y[np.isfinite(y)] <= 1.0)
    finally:
        plt.close(fig)


def test_exact_curve_is_the_exact_mass():
    lengths = [16, 64, 256]
    fig = P.plot_ot_dilution(window=4, rhos=(0.5,), lengths=lengths)
    try:
        exact = fig.axes[0].lines[0]
        ref = [otprior.ot_window_mass(4, n, 0.5) for n in lengths]
        np.testing.assert_allclose(exact.get_ydata(), ref, rtol=1e-12)
    finally:
        plt.close(fig)


def test_encoding_map_tells_every_curve_apart_and_merges_identical_ones():
    E = otprior.encodings
    encs = {"NoPE": E.NoPE(), "RoPE": E.RoPE(1.0), "ALiBi": E.ALiBi(0.1), "CABLE": E.CABLE(0.05), "log": E.LogDistance(0.9)}
    fig = P.plot_encoding_map(encodings=encs, lengths=[128, 512, 2048])
    try:
        for ax in fig.axes:
            curves = [line for line in ax.lines if len(line.get_xdata()) > 1]
            styles = {(line.get_color(), line.get_marker()) for line in curves}
            assert len(styles) == len(curves)
            data = [tuple(np.round(line.get_ydata(), 12)) for line in curves]
            assert len(set(data)) == len(data), "identical curves are drawn once"
        labels = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
        merged = [t for t in labels if "NoPE" in t]
        assert len(merged) == 1 and "RoPE" in merged[0]  # NoPE and RoPE: D_n = 1 - W/n for both
        assert len(labels) == 4
    finally:
        plt.close(fig)


def test_dilution_constants_draws_the_law_constant_not_one_minus_rho():
    fig = P.plot_dilution_constants(windows=(16,))
    try:
        line = fig.axes[0].lines[0]
        rho = np.asarray(line.get_xdata())
        assert not np.allclose(line.get_ydata(), 1 - rho)
        # C_W(rho) = H_W^(rho) Z_q^(1 - rho), computed here from scipy's gamma function
        from scipy.special import gammaln

        q = 1 - rho
        H = np.array([sum(k**-r for k in range(1, 17)) for r in rho])
        logZ = (1 / q - 1) * np.log(q) + gammaln(1 / q)
        np.testing.assert_allclose(line.get_ydata(), H * np.exp(q * logZ), rtol=1e-9)
    finally:
        plt.close(fig)


def test_density_panel_has_a_legend():
    fig = P.plot_scale_invariant_prior(rhos=(0.5,), n=128)
    try:
        assert fig.axes[1].get_legend() is not None
    finally:
        plt.close(fig)


def test_seed_spread_is_one_standard_deviation():
    fig = P.plot_extrapolation(RUNS, train_length=64)
    try:
        ax = fig.axes[0]
        scheme = RUNS[0]["scheme"]
        container = next(c for c in ax.containers if c.get_label().startswith(scheme))
        line, _caps, (bars,) = container
        n = int(line.get_xdata()[-1])
        values = [r["loss"][str(n)] for r in RUNS if r["scheme"] == scheme]
        segment = bars.get_segments()[-1]
        half = (segment[1][1] - segment[0][1]) / 2
        assert math.isclose(half, statistics.stdev(values), rel_tol=1e-9)
        assert math.isclose(line.get_ydata()[-1], statistics.fmean(values), rel_tol=1e-12)
    finally:
        plt.close(fig)


def test_head_figures_have_integer_ticks_and_a_legend_entry_per_head():
    fig = P.plot_head_exponents(HEAD_ROWS, margin=0.3)
    fig2 = P.plot_head_distant_mass(HEAD_ROWS, 64)
    try:
        fig.canvas.draw()
        ticks = [t for t in fig.axes[0].get_xticks() if fig.axes[0].get_xlim()[0] <= t <= fig.axes[0].get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
        labels = [t.get_text() for t in fig2.axes[0].get_legend().get_texts()]
        assert len(labels) == len(HEAD_ROWS) and len(set(labels)) == len(labels)
    finally:
        plt.close(fig)
        plt.close(fig2)


def test_style_restores_exactly_what_it_set():
    before = dict(matplotlib.rcParams)
    with P.style():
        assert matplotlib.rcParams["axes.grid"] is True
        matplotlib.rcParams["interactive"] = not before["interactive"]  # as IPython does on first use
    assert matplotlib.rcParams["interactive"] != before["interactive"]  # not undone
    matplotlib.rcParams["interactive"] = before["interactive"]
    assert dict(matplotlib.rcParams) == before


def test_head_exponents_read_any_row_layout():
    rows = [{"layer": 0, "head": h, "decided_by": {"value": 1.1 + h}} for h in range(3)]
    fig = P.plot_head_exponents(rows, key=lambda r: r["decided_by"]["value"])
    try:
        points = fig.axes[0].lines[0]
        np.testing.assert_array_equal(points.get_xdata(), [0, 1, 2])
        np.testing.assert_allclose(points.get_ydata(), [1.1, 2.1, 3.1])
    finally:
        plt.close(fig)


def test_bounded_encoding_without_a_known_limit_gets_no_marker():
    """A user's encoding may be bounded with D_oo(W) unknown: the curve is drawn, the marker left out."""
    from dataclasses import dataclass

    from otprior.encodings import Encoding, Verdict

    @dataclass(frozen=True, repr=False)
    class Steep(Encoding):
        name = "steep-test"

        def bias(self, d, n=None):
            return -2.0 * np.log1p(np.asarray(d, dtype=float))

        def _verdict(self):
            return Verdict(self, True, "bounded", "(d+1)^-2 is summable")

    fig, ax = plt.subplots()
    try:
        P.plot_distant_mass(Steep(), window=8, lengths=[16, 128, 1024], ax=ax)
        assert len(ax.lines) == 1 and len(ax.lines[0].get_xdata()) == 3
        P.plot_encoding_map(window=8, encodings=[Steep()], lengths=[16, 128], ax=ax)
        assert len(ax.lines) == 2
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    "lengths, expected",
    [
        ([10**3, 10**4, 10**5, 10**6], ["$10^{3}$", "$10^{4}$", "$10^{5}$", "$10^{6}$"]),  # powers of ten: ticks there
        ([2**k for k in range(8, 18)], None),  # up to 2^17: every label a power of two, none a plain 32768
    ],
)
def test_length_ticks_follow_the_lengths_in_one_format(lengths, expected):
    fig, ax = plt.subplots()
    try:
        P.plot_distant_mass(otprior.encodings.KerpleLog(0.9, 1.0), window=8, lengths=lengths, ax=ax)
        texts = _tick_texts(ax, "x")
        if expected is not None:
            assert all(t in texts for t in expected) and all(t.startswith("$10^") for t in texts), texts
        else:
            assert texts and all(t.startswith("$2^") for t in texts), texts
    finally:
        plt.close(fig)


def test_dilution_constants_legend_covers_no_curve():
    fig = P.plot_dilution_constants()
    try:
        fig.canvas.draw()
        for ax in fig.axes:
            box = ax.get_legend().get_window_extent()
            for line in ax.lines:
                xy = ax.transData.transform(line.get_xydata())
                inside = (box.x0 <= xy[:, 0]) & (xy[:, 0] <= box.x1) & (box.y0 <= xy[:, 1]) & (xy[:, 1] <= box.y1)
                assert not inside.any(), (ax.get_title(), line.get_label())
    finally:
        plt.close(fig)


def test_mass_ticks_use_one_format_per_axis():
    """A mass axis from 1e-6 to 1 labels every tick as a power of ten, not 0.001 beside 10^-4."""
    fig, ax = plt.subplots()
    try:
        ax.loglog([1, 10], [1e-6, 1.0])
        ax.set_ylim(1e-6, 1.5)
        P._log_mass_axis(ax, "y")  # as every figure with a mass axis sets it
        texts = _tick_texts(ax, "y")
        assert len(texts) >= 3 and all(t.startswith("$10^{") for t in texts), texts
        ax.set_ylim(0.02, 1.5)
        texts = _tick_texts(ax, "y")
        assert "0.1" in texts and not any("10^" in t for t in texts), texts
    finally:
        plt.close(fig)
