"""Figures (matplotlib, imported on first use). Each function returns a Figure with
labelled axes and units; the theorem it draws is named in its docstring."""

from __future__ import annotations

import numpy as np

__all__ = [
    "plot_scale_invariant_prior",
    "plot_ot_prior",
    "plot_ot_dilution",
    "plot_log_distance_window_mass",
    "plot_margin_growth",
    "plot_encoding_map",
    "plot_dilution_constants",
]


def _figure(ncols=1, width=5.0):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 3.8), layout="constrained")
    return fig, np.atleast_1d(axes)


def plot_scale_invariant_prior(rhos=(0.0, 0.3, 0.5, 0.7, 0.9), n=2048):
    """CDF ``F_rho`` and density ``f_rho`` of the scale-invariant prior, with the exact
    discrete prior of query ``n`` overlaid (Theorems 2 and 3)."""
    from .ot_prior import ot_prior
    from .scale_invariant import scale_invariant_cdf, scale_invariant_density

    fig, (ax_cdf, ax_pdf) = _figure(2)
    delta = np.linspace(0.0, 1.0, 401)[1:]
    for rho in rhos:
        (line,) = ax_cdf.plot(delta, scale_invariant_cdf(delta, rho), label=f"ρ = {rho:g}")
        prior = ot_prior(n, rho)
        d = np.arange(n)
        ax_cdf.plot((d + 1) / n, np.cumsum(prior), ls=":", color=line.get_color())
        ax_pdf.plot(delta, scale_invariant_density(delta, rho), color=line.get_color())
        ax_pdf.plot((d + 0.5) / n, n * prior, ls=":", color=line.get_color())
    ax_cdf.set(xlabel="distance fraction δ = d / t", ylabel="mass within δ, F_ρ(δ)", title=f"scale-invariant prior (dotted: exact, t = {n})")
    ax_pdf.set(xlabel="distance fraction δ = d / t", ylabel="density f_ρ(δ)", yscale="log", title="density")
    ax_cdf.legend(fontsize=8)
    return fig


def plot_ot_prior(n, rho):
    """The exact constant-score prior ``pi_n(d)`` against distance, log axes."""
    from .ot_prior import ot_prior

    fig, (ax,) = _figure(1)
    prior = ot_prior(n, rho)
    d = np.arange(n)
    ax.loglog(d + 1, prior, label=f"π_n(d), n = {n}, ρ = {rho:g}")
    ax.set(xlabel="distance d + 1 (tokens)", ylabel="attention share π_n(d)", title="constant-score prior of causal OT attention")
    ax.legend(fontsize=8)
    return fig


def plot_ot_dilution(window=16, rhos=(0.3, 0.5, 0.7, 0.9), lengths=None, score_bound=0.25):
    """Window mass of the causal OT prior against context length: exact, the window law
    (Theorem 4) and the bounded-score upper bound (Theorem 5) as a band."""
    from .ot_prior import ot_dilution_bound, ot_window_law, ot_window_mass

    lengths = np.unique(np.geomspace(max(window, 32), 2**16, 12).astype(int)) if lengths is None else np.asarray(lengths)
    fig, (ax,) = _figure(1, width=6.0)
    for rho in rhos:
        exact = [ot_window_mass(window, int(n), rho) for n in lengths]
        law = [ot_window_law(window, int(n), rho) for n in lengths]
        bound = [ot_dilution_bound(window, int(n), rho, score_bound) for n in lengths]
        (line,) = ax.loglog(lengths, exact, marker="o", ms=3, label=f"ρ = {rho:g}")
        ax.loglog(lengths, law, ls="--", color=line.get_color())
        ax.fill_between(lengths, exact, bound, color=line.get_color(), alpha=0.15)
    ax.set(
        xlabel="context length n (tokens)",
        ylabel=f"window mass m_n(W = {window})",
        title=f"causal OT dilution (dashed: law; band: |s − c| ≤ {score_bound:g})",
    )
    ax.legend(fontsize=8)
    return fig


def plot_log_distance_window_mass(window=64, alphas=(0.9, 1.0, 1.02, 1.1, 1.3), score_bound=0.25, lengths=None):
    """Window mass of log-distance priors vs length (log axes), exponents around one.

    Solid: exact (Theorem 7). Band: the range over content scores within ``score_bound``
    (Theorem 10). The certified Euler–Maclaurin brackets (Theorem 8) are drawn as error
    bars; their relative width is below 1e-7, far below a pixel.
    """
    from .log_distance import distant_mass_bounds, window_mass, window_mass_bounds

    lengths = np.unique(np.geomspace(window, 1e15, 40).astype(np.int64)) if lengths is None else np.asarray(lengths)
    fig, (ax,) = _figure(1, width=6.0)
    for alpha in alphas:
        m = np.array([window_mass(window, int(n), alpha) for n in lengths])
        band = np.array([distant_mass_bounds(window, int(n), alpha, score_bound=score_bound) for n in lengths])
        brackets = np.array([window_mass_bounds(window, int(n), alpha) for n in lengths])
        (line,) = ax.loglog(lengths, m, label=f"α = {alpha:g}")
        ax.fill_between(lengths, 1 - band[:, 1], 1 - band[:, 0], color=line.get_color(), alpha=0.15)
        ax.errorbar(lengths[::6], m[::6], yerr=[m[::6] - brackets[::6, 0], brackets[::6, 1] - m[::6]], fmt="none", ecolor=line.get_color())
    ax.set(
        xlabel="context length n (tokens)",
        ylabel=f"window mass m_n(W = {window})",
        title=f"log-distance priors near α = 1 (band: content ±{score_bound:g})",
    )
    ax.legend(fontsize=8)
    return fig


def plot_margin_growth(window=64, lengths=(512, 8192), tol=0.05, growth="absolute"):
    """Distant-mass growth between two lengths vs the exponent margin, with the margin chosen
    by :func:`otprior.margin_for` marked (Theorem 9)."""
    from .log_distance import distant_mass
    from .margin import margin_for

    r = margin_for(window, lengths, tol, growth=growth)
    deltas = np.linspace(0.0, max(1.0, 2.5 * r.margin), 300)
    L0, L1 = lengths
    if growth == "absolute":
        g = [distant_mass(window, L1, 1 + x) - distant_mass(window, L0, 1 + x) for x in deltas]
    else:
        g = [distant_mass(window, L1, 1 + x) / distant_mass(window, L0, 1 + x) - 1 for x in deltas]
    fig, (ax,) = _figure(1, width=6.0)
    ax.plot(deltas, g, label=f"{growth} growth, W = {window}, L = {L0}→{L1}")
    ax.axhline(tol, color="gray", ls="--", label=f"tol = {tol:g}")
    ax.axvline(r.margin, color="C3", label=f"margin δ = {r.margin:.4f}")
    ax.set(xlabel="margin δ (exponent α = 1 + δ)", ylabel="growth of distant mass", title="choosing a margin from the prior alone")
    ax.legend(fontsize=8)
    return fig


def default_encodings():
    """The encodings shown by the report and the encoding map, one per family."""
    from . import encodings as E

    return [
        E.NoPE(),
        E.RoPE(1.0),
        E.YaRN(8.0, 1.0),
        E.ALiBi(2.0**-4),
        E.KerpleLog(0.9, 1.0),
        E.KerpleLog(1.3, 1.0),
        E.KerplePower(0.5, 0.5),
        E.T5Buckets(values=np.linspace(0.0, -4.0, 32)),
        E.FIRE(),
        E.CABLE(0.02),
        E.LogDistance(1.05),
        E.CausalOT(0.5),
    ]


def plot_encoding_map(window=64, encodings=None, lengths=None):
    """Distant mass D_n(W) vs length for each encoding: solid = bounded, dashed = diluting,
    with the limit D_∞(W) marked at the right edge (Theorem 11)."""
    from .encodings import classify

    encodings = default_encodings() if encodings is None else encodings
    lengths = np.unique(np.geomspace(2 * window, 2**17, 14).astype(int)) if lengths is None else np.asarray(lengths)
    import matplotlib

    fig, (ax,) = _figure(1, width=9.5)
    colors = matplotlib.colormaps["tab20"]
    for i, enc in enumerate(encodings):
        v = classify(enc)
        D = [enc.distant_mass(window, int(n)) for n in lengths]
        label = f"{type(enc).__name__}({', '.join(f'{k}={val:g}' for k, val in enc._params().items() if isinstance(val, float))}) – {v.kind}"
        (line,) = ax.semilogx(lengths, D, ls="-" if v.bounded else "--", color=colors(i % 20), lw=1.6, label=label)
        if v.bounded:
            ax.plot([lengths[-1] * 1.3], [v.limit_distant_mass(window)], marker="<", color=line.get_color())
    ax.set(xlabel="context length n (tokens)", ylabel=f"distant mass D_n(W = {window})", ylim=(0, 1.02), title="bounded (solid, ◁ = limit) vs diluting (dashed) encodings")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_dilution_constants(window=16):
    """Dilution exponent 1 - ρ and the law's constant H_W^(ρ) Z_q^(1-ρ) vs ρ (Theorems 4, 6)."""
    from ._power_sums import power_sum
    from .scale_invariant import scale_invariant_normaliser

    rhos = np.linspace(0.0, 0.99, 200)
    const = [power_sum(1, window, r) * np.exp((1 - r) * scale_invariant_normaliser(r, log=True)) for r in rhos]
    zpow = [np.exp((1 - r) * scale_invariant_normaliser(r, log=True)) for r in rhos]
    fig, (ax1, ax2) = _figure(2)
    ax1.plot(rhos, 1 - rhos)
    ax1.set(xlabel="balancing strength ρ", ylabel="dilution exponent 1 − ρ", title="m_t(W) ∝ t^-(1-ρ)")
    ax2.semilogy(rhos, const, label=f"H_W^(ρ) Z_q^(1-ρ), W = {window}")
    ax2.semilogy(rhos, zpow, label="Z_q^q")
    ax2.axhline(np.exp(-1), color="gray", ls=":", label="1/e (limit of Z_q^q)")
    ax2.set(xlabel="balancing strength ρ", ylabel="constant of the window law", title="m_t(W) ≈ C(ρ) t^-(1-ρ)")
    ax2.legend(fontsize=8)
    return fig
