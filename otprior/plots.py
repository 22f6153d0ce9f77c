"""Figures (matplotlib, imported on first use). Each function returns a Figure."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_scale_invariant_prior", "plot_ot_prior", "plot_ot_dilution"]


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
