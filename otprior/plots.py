"""Figures for papers: every function draws one result, names its theorem, returns the Figure.

Conventions shared by every function here:

* ``ax=None`` creates a new figure through :mod:`matplotlib.pyplot` (so ``plt.show()``, the
  notebook inline backend and ``savefig`` work as usual); pass ``ax=`` (an Axes, or a pair
  of Axes for the two-panel figures) to draw into your own layout. The Figure is returned.
* Nothing global changes: the backend is never selected and ``matplotlib.rcParams`` is
  never written. The house style (a colour-blind-safe palette, light grid) applies only
  inside :func:`style`, a context manager you may also use for your own figures.
* Labels are mathtext; length axes are labelled with integers (``64``, ``1024``) or powers
  (:math:`2^{17}`, :math:`10^{12}`), mass axes with decimals.
* Asymptotic laws are drawn only on their domain (a mass law is not drawn above one).

matplotlib is imported on first use, so ``import otprior`` does not need it.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from ._validation import DomainError, PrecisionError

__all__ = [
    "style",
    "plot_scale_invariant_prior",
    "plot_ot_prior",
    "plot_ot_dilution",
    "plot_dilution_constants",
    "plot_log_distance_window_mass",
    "plot_margin_growth",
    "plot_distant_mass",
    "plot_encoding_map",
    "plot_head_exponents",
    "plot_head_distant_mass",
    "plot_extrapolation",
    "default_encodings",
]

#: Okabe & Ito's colour-blind-safe palette (black moved last), then two extra distinct hues.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000", "#882255", "#999933")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")

_RC = {
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "legend.fontsize": 8.0,
    "legend.frameon": False,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.0,
    "mathtext.fontset": "dejavusans",
}


@contextmanager
def style():
    """Context manager: otprior's figure style, its rcParams restored on exit.

    Inside the block a few rcParams are set (grid, font sizes, the colour cycle
    :data:`PALETTE`); on exit exactly those keys get their previous values back, so nothing
    global changes.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from otprior import plots
    >>> with plots.style():
    ...     fig, ax = plt.subplots()
    >>> plt.close(fig)
    """
    import matplotlib
    from cycler import cycler

    rc = dict(_RC)
    rc["axes.prop_cycle"] = cycler(color=list(PALETTE))
    params = matplotlib.rcParams
    # Save and restore only these keys. matplotlib.rc_context would restore every key, undoing
    # what a first figure inside the block sets up (IPython's inline backend turns on
    # interactive mode when pyplot first creates a figure; restoring it hides later figures).
    old = {key: params[key] for key in rc}
    params.update(rc)
    try:
        yield
    finally:
        params.update(old)


def _axes(ax, ncols=1, width=5.0, height=3.6):
    """``(fig, [axes])``: new axes (pyplot, constrained layout) or the caller's, checked."""
    if ax is None:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), layout="constrained")
        return fig, list(np.atleast_1d(axes))
    axes = [ax] if hasattr(ax, "plot") else list(ax)
    if len(axes) != ncols or not all(hasattr(a, "plot") for a in axes):
        raise DomainError("ax", ax, f"{'an Axes' if ncols == 1 else f'a sequence of {ncols} Axes'}")
    return axes[0].figure, axes


def _pow_label(v, base):
    k = round(math.log(v, base))
    return f"$10^{{{k}}}$" if base == 10 else f"$2^{{{k}}}$"


def _exact_power(v, base) -> bool:
    """``v`` is ``base**k`` for an integer ``k >= 0`` (exact integer arithmetic)."""
    try:
        v = int(v)
    except (TypeError, ValueError, OverflowError):
        return False
    if v < 1:
        return False
    while v % base == 0:
        v //= base
    return v == 1


def _one_format(base, plain_ok, plain):
    """Tick labels in one format per axis: ``plain(v)`` when every visible major tick passes
    ``plain_ok``, otherwise every label a power of ``base`` (``2^17``, ``10^-4``)."""
    from matplotlib.ticker import Formatter

    class _OneFormat(Formatter):
        ticks = ()

        def set_locs(self, locs):  # the ticks about to be labelled (Formatter.locs is deprecated)
            self.ticks = tuple(float(x) for x in locs)

        def __call__(self, v, pos=None):
            if not v > 0:
                return ""
            visible = [v]
            if self.axis is not None:
                lo, hi = sorted(self.axis.get_view_interval())
                visible = [x for x in self.ticks if x > 0 and lo * (1 - 1e-9) <= x <= hi * (1 + 1e-9)] or [v]
            if all(plain_ok(x) for x in visible):
                return plain(v)
            k = math.log(v, base)
            return _pow_label(v, base) if abs(k - round(k)) < 1e-9 else f"{v:.3g}"

    return _OneFormat()


def _length_formatter(base):
    """Token counts: integers while every visible tick is at most 65536, else powers of ``base``."""
    return _one_format(base, lambda x: x <= 65536 and abs(x - round(x)) < 1e-9, lambda v: f"{int(round(v))}")


def _mass_formatter():
    """Masses and ratios: decimals (``0.01``, ``0.5``, ``1``) while every visible tick lies in
    ``[1e-3, 1e5)``, else powers of ten."""
    return _one_format(10, lambda x: 1e-3 * (1 - 1e-9) <= x < 1e5, lambda v: f"{v:g}")


def _log_length_axis(ax, which="x", lengths=None):
    """Log axis of token counts with readable ticks in one format (see :func:`_length_formatter`).

    Ticks at powers of ten when the ``lengths`` drawn are all powers of ten, at powers of two
    when they are all powers of two, otherwise by range (powers of two up to a ratio of
    :math:`2^{20}`, powers of ten beyond).
    """
    from matplotlib.ticker import LogLocator, NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = ax.get_xlim() if which == "x" else ax.get_ylim()
    values = [] if lengths is None else [v for v in np.ravel(np.asarray(lengths, dtype=object)) if v > 0]
    if values and all(_exact_power(v, 10) for v in values):
        base = 10
    elif values and all(_exact_power(v, 2) for v in values):
        base = 2
    else:
        base = 2 if hi / max(lo, 1e-300) <= 2.0**20 else 10
    axis.set_major_locator(LogLocator(base=base, numticks=10))
    axis.set_minor_locator(LogLocator(base=base, subs="auto", numticks=10) if base == 10 else LogLocator(base=10, subs=(1.0,)))
    axis.set_major_formatter(_length_formatter(base))
    axis.set_minor_formatter(NullFormatter())


def _log_mass_axis(ax, which="y"):
    """Log axis of masses: decimal tick labels; 1-2-5 ticks when the range is short."""
    from matplotlib.ticker import LogLocator, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if which == "y" else ax.get_xlim()
    decades = math.log10(hi / max(lo, 1e-300))
    subs = (1.0, 2.0, 5.0) if decades < 2.5 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12 if decades < 2.5 else 7))
    axis.set_major_formatter(_mass_formatter())
    axis.set_minor_formatter(NullFormatter())


def _lo_hi(bounds):
    """``(lo, hi)`` of a bounds result: an object with ``lo``/``hi`` or a pair."""
    if hasattr(bounds, "lo") and hasattr(bounds, "hi"):
        return bounds.lo, bounds.hi
    lo, hi = bounds
    return lo, hi


def _prior_array(n, rho):
    """The constant-score prior of causal OT attention as a float array (Theorem 2)."""
    from .ot_prior import ot_prior

    r = ot_prior(n, rho)
    for name in ("prior", "values", "pi"):
        if not isinstance(r, np.ndarray) and hasattr(r, name):
            r = getattr(r, name)
            break
    return np.asarray(r, dtype=float)


def _default_lengths(lo, hi, num):
    return np.unique(np.geomspace(lo, hi, num).round().astype(np.int64))


# ----------------------------------------------------------------------------------------------
# Causal OT attention: the scale-invariant prior and its dilution (Theorems 2-6)
# ----------------------------------------------------------------------------------------------


def plot_scale_invariant_prior(rhos=(0.0, 0.3, 0.5, 0.7, 0.9), n=2048, *, ax=None):
    """CDF :math:`F_\\rho` and density :math:`f_\\rho` of the scale-invariant prior (Theorem 3),
    with the exact discrete prior of query ``n`` (Theorem 2) dotted.

    Parameters
    ----------
    rhos : sequence of float
        Balancing strengths in ``[0, 1)``, one colour each.
    n : int
        Context length of the exact prior :math:`\\pi_n`, drawn as :math:`F_n(\\delta)` at
        :math:`\\delta = (d+1)/n` and as the density :math:`n\\,\\pi_n(d)` at :math:`(d+1/2)/n`.
    ax : pair of Axes, optional
        Left: CDF; right: density (log scale).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .scale_invariant import scale_invariant_cdf, scale_invariant_density

    with style():
        fig, (ax_cdf, ax_pdf) = _axes(ax, 2, width=4.4)
        delta = np.linspace(0.0, 1.0, 801)[1:-1]
        d = np.arange(n)
        for i, rho in enumerate(rhos):
            color = PALETTE[i % len(PALETTE)]
            prior = _prior_array(n, rho)
            ax_cdf.plot(delta, scale_invariant_cdf(delta, rho), color=color, label=f"$\\rho = {rho:g}$")
            ax_cdf.plot((d + 1) / n, np.cumsum(prior), ls=":", lw=1.8, color=color)
            ax_pdf.plot(delta, scale_invariant_density(delta, rho), color=color, label=f"$\\rho = {rho:g}$")
            ax_pdf.plot((d + 0.5) / n, n * prior, ls=":", lw=1.8, color=color)
        ax_cdf.set(xlabel="distance fraction $\\delta = d/t$", ylabel="mass within $\\delta$", xlim=(0, 1), ylim=(0, 1.01))
        ax_cdf.set_title("CDF $F_\\rho(\\delta)$")
        ax_pdf.set_yscale("log")
        ax_pdf.set(xlabel="distance fraction $\\delta = d/t$", ylabel="density", xlim=(0, 1))
        ax_pdf.set_title("density $f_\\rho(\\delta)$")
        _log_mass_axis(ax_pdf)
        ax_cdf.legend(loc="lower right")
        from matplotlib.lines import Line2D

        ax_pdf.legend(
            handles=[
                Line2D([], [], color="0.3", label="limit $t \\to \\infty$ (Theorem 3)"),
                Line2D([], [], color="0.3", ls=":", lw=1.8, label=f"exact, $t = {n}$ (Theorem 2)"),
            ],
            loc="upper right",
        )
    return fig


def plot_ot_prior(n, rho, *, ax=None):
    """The exact constant-score prior :math:`\\pi_n(d)` of causal OT attention against distance
    (Theorem 2), with the scale-invariant density :math:`f_\\rho((d+1/2)/n)/n` (Theorem 3).

    Parameters
    ----------
    n : int
        Query position (context length).
    rho : float
        Balancing strength in ``[0, 1)``.
    ax : Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .scale_invariant import scale_invariant_density

    with style():
        fig, (ax,) = _axes(ax, 1)
        prior = _prior_array(n, rho)
        d = np.arange(n)
        ax.loglog(d + 1, prior, color=PALETTE[0], label=f"exact $\\pi_n(d)$, $n = {n}$")
        ax.loglog(d + 1, scale_invariant_density((d + 0.5) / n, rho) / n, color=PALETTE[1], ls="--", label="scale-invariant $f_\\rho((d+\\frac{1}{2})/n)\\,/\\,n$")
        ax.set(xlabel="distance $d + 1$ (tokens)", ylabel="attention share")
        _log_mass_axis(ax, "y")
        ax.set_title(f"constant-score prior of causal OT attention, $\\rho = {rho:g}$")
        _log_length_axis(ax, "x")
        ax.legend()
    return fig


def plot_ot_dilution(window=16, rhos=(0.3, 0.5, 0.7, 0.9), lengths=None, score_bound=0.25, *, ax=None):
    """Window mass of causal OT attention against context length (log-log).

    Markers: the exact constant-score mass :math:`m_n(W)` (Theorem 2). Dashed: the window law
    :math:`H_W^{(\\rho)}(Z_q/n)^{1-\\rho}` (Theorem 4), an asymptotic law drawn only where it
    is at most one. Band: from the exact mass up to the rigorous bound for every score matrix
    within ``score_bound`` of a constant (Theorem 5).

    Parameters
    ----------
    window : int
    rhos : sequence of float
    lengths : sequence of int, optional
        Default: 11 lengths from ``max(window, 32)`` to :math:`2^{15}`.
    score_bound : float
        ``B`` of Theorem 5.
    ax : Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from .ot_prior import ot_dilution_bound, ot_window_law, ot_window_mass

    lengths = _default_lengths(max(window, 32), 2**15, 11) if lengths is None else np.asarray(lengths, dtype=np.int64)
    with style():
        fig, (ax,) = _axes(ax, 1, width=5.6, height=3.9)
        for i, rho in enumerate(rhos):
            color = PALETTE[i % len(PALETTE)]
            exact = np.array([ot_window_mass(window, int(n), rho) for n in lengths])
            law = np.array([ot_window_law(window, int(n), rho) for n in lengths])
            bound = np.array([ot_dilution_bound(window, int(n), rho, score_bound) for n in lengths])
            ax.plot(lengths, exact, marker=MARKERS[i % len(MARKERS)], color=color, label=f"$\\rho = {rho:g}$, exponent ${1 - rho:g}$")
            ax.plot(lengths, np.where(law <= 1.0, law, np.nan), ls="--", lw=1.2, color=color)
            ax.fill_between(lengths, exact, bound, color=color, alpha=0.13, lw=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        lo = ax.get_ylim()[0]
        ax.set_ylim(lo / 30.0, 1.05)  # room for the legend below the curves
        ax.set(xlabel="context length $n$ (tokens)", ylabel=f"window mass $m_n(W)$, $W = {window}$")
        ax.set_title("causal OT attention dilutes: $m_n(W) \\propto n^{-(1-\\rho)}$")
        _log_length_axis(ax, "x", lengths)
        _log_mass_axis(ax, "y")
        handles, _ = ax.get_legend_handles_labels()
        handles += [
            Line2D([], [], color="0.3", marker="o", label="exact (Theorem 2)"),
            Line2D([], [], color="0.3", ls="--", lw=1.2, label="window law (Theorem 4)"),
            Patch(color="0.3", alpha=0.2, label=f"to the bound, $|s - c| \\leq {score_bound:g}$ (Thm 5)"),
        ]
        ax.legend(handles=handles, loc="lower left", ncols=2, fontsize=7)
    return fig


def plot_dilution_constants(windows=(1, 4, 16, 64), *, ax=None):
    """The constant of the window law and the normaliser's limit, against :math:`\\rho`.

    Left: :math:`C_W(\\rho) = H_W^{(\\rho)} Z_q^{1-\\rho}`, so that
    :math:`m_n(W) \\approx C_W(\\rho)\\, n^{-(1-\\rho)}` (Theorem 4); it is read off
    :func:`otprior.ot_window_law` as ``ot_window_law(W, n, rho) * n**(1 - rho)``. Right:
    :math:`Z_q^{\\,q}` with :math:`q = 1 - \\rho`, which equals one at :math:`\\rho = 0`
    and tends to :math:`1/e` as :math:`\\rho \\to 1` (Theorem 6).

    Parameters
    ----------
    windows : sequence of int
    ax : pair of Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .ot_prior import ot_window_law
    from .scale_invariant import scale_invariant_normaliser

    rhos = np.linspace(0.0, 0.995, 240)
    n_ref = 1 << 20
    with style():
        fig, (ax1, ax2) = _axes(ax, 2, width=4.4)
        for i, W in enumerate(windows):
            const = [ot_window_law(W, n_ref, r) * n_ref ** (1.0 - r) for r in rhos]
            ax1.plot(rhos, const, color=PALETTE[i % len(PALETTE)], label=f"$W = {W}$")
        ax1.set_yscale("log")
        ax1.set(xlabel="balancing strength $\\rho$", ylabel="$C_W(\\rho) = H_W^{(\\rho)} Z_q^{\\,1-\\rho}$", xlim=(0, 1))
        ax1.set_title("constant of the window law $m_n(W) \\approx C_W\\, n^{-(1-\\rho)}$")
        _log_mass_axis(ax1)
        handles, labels = ax1.get_legend_handles_labels()  # listed top to bottom, as the curves lie
        ax1.legend(handles[::-1], labels[::-1], loc="upper right")  # the curves fall to the right: that corner is empty
        zq = [math.exp((1.0 - r) * scale_invariant_normaliser(r, log=True)) for r in rhos]
        ax2.plot(rhos, zq, color=PALETTE[0], label="$Z_q^{\\,q}$, $q = 1 - \\rho$")
        ax2.axhline(math.exp(-1.0), color="0.4", ls=":", lw=1.2, label="limit $1/e$ as $\\rho \\to 1$ (Theorem 6)")
        ax2.set(xlabel="balancing strength $\\rho$", ylabel="$Z_q^{\\,q}$", xlim=(0, 1), ylim=(0.3, 1.02))
        ax2.set_title("normaliser $Z_q = q^{1/q - 1}\\,\\Gamma(1/q)$")
        ax2.legend(loc="upper right")
    return fig


# ----------------------------------------------------------------------------------------------
# Log-distance priors and margins (Theorems 7-10)
# ----------------------------------------------------------------------------------------------


def plot_log_distance_window_mass(window=64, alphas=(0.9, 1.0, 1.02, 1.1, 1.3), score_bound=0.25, lengths=None, *, ax=None):
    """Window mass of log-distance priors against length (log-log), exponents around one.

    Lines: the exact mass :math:`m_n(W;\\alpha)` (Theorem 7), solid for summable exponents
    (:math:`\\alpha > 1`, bounded) and dashed otherwise (diluting). Band: every content score
    within ``score_bound`` of a constant (Theorem 10, certified through Theorem 8's brackets).
    Triangles at the right edge: the limit :math:`m_\\infty(W) = H_W^{(\\alpha)}/\\zeta(\\alpha)`
    of each bounded prior. The certified Euler–Maclaurin brackets of the exact mass
    (Theorem 8) are narrower than :math:`10^{-7}` relative, far below a pixel, so they are
    not drawn; :func:`otprior.window_mass_bounds` returns them.

    Parameters
    ----------
    window : int
    alphas : sequence of float
    score_bound : float
        ``B`` of the band; ``0`` draws no band.
    lengths : sequence of int, optional
        Default: 40 lengths from ``window`` to :math:`10^{15}`.
    ax : Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .encodings import LogDistance, classify
    from .log_distance import distant_mass_bounds, window_mass

    lengths = _default_lengths(window, 1e15, 40) if lengths is None else np.asarray(lengths, dtype=np.int64)
    with style():
        fig, (ax,) = _axes(ax, 1, width=5.6, height=3.9)
        edge = lengths[-1] * 2.5
        for i, alpha in enumerate(alphas):
            color = PALETTE[i % len(PALETTE)]
            m = np.array([window_mass(window, int(n), alpha) for n in lengths])
            bounded = alpha > 1.0
            kind = "bounded" if bounded else "diluting"
            ax.plot(lengths, m, color=color, ls="-" if bounded else "--", label=f"$\\alpha = {alpha:g}$ ({kind})")
            if score_bound > 0:
                band = np.array([_lo_hi(distant_mass_bounds(window, int(n), alpha, score_bound=score_bound)) for n in lengths], dtype=float)
                ax.fill_between(lengths, 1.0 - band[:, 1], 1.0 - band[:, 0], color=color, alpha=0.13, lw=0)
            if bounded:
                limit = 1.0 - classify(LogDistance(alpha)).limit_distant_mass(window)
                ax.plot([edge], [limit], marker="<", ms=6, color=color, clip_on=False)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lengths[0], edge * 1.6)
        ax.set(xlabel="context length $n$ (tokens)", ylabel=f"window mass $m_n(W)$, $W = {window}$")
        band = f"; band: content within $\\pm{score_bound:g}$" if score_bound > 0 else ""
        ax.set_title(f"log-distance priors $(d+1)^{{-\\alpha}}$ near $\\alpha = 1${band}")
        _log_length_axis(ax, "x", lengths)
        _log_mass_axis(ax, "y")
        ax.legend(loc="lower left", title="$\\lhd$: limit $n \\to \\infty$", title_fontsize=8, alignment="left")
    return fig


def plot_margin_growth(window=64, lengths=(512, 8192), tol=0.05, growth="absolute", *, ax=None):
    """Growth of the distant mass between two lengths against the exponent margin, with the
    margin chosen by :func:`otprior.margin_for` marked (Theorem 9).

    The growth is :math:`D_{L_1}(W;1+\\delta) - D_{L_0}(W;1+\\delta)` (``growth="absolute"``)
    or :math:`D_{L_1}/D_{L_0} - 1` (``"relative"``), computed by :func:`otprior.distant_mass`.
    Every exponent to the right of the margin keeps it within ``tol`` (shaded).

    Parameters
    ----------
    window : int
    lengths : pair of int
        Training length :math:`L_0` and longest evaluation length :math:`L_1`.
    tol : float
    growth : {"absolute", "relative"}
    ax : Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .log_distance import distant_mass
    from .margin import margin_for

    r = margin_for(window, lengths, tol, growth=growth)
    L0, L1 = (int(x) for x in lengths)
    deltas = np.linspace(0.0, max(1.0, 2.5 * r.margin), 300)
    D0 = np.array([distant_mass(window, L0, 1.0 + x) for x in deltas])
    D1 = np.array([distant_mass(window, L1, 1.0 + x) for x in deltas])
    g = D1 - D0 if growth == "absolute" else D1 / D0 - 1.0
    ylabel = f"$D_{{{L1}}}(W) - D_{{{L0}}}(W)$" if growth == "absolute" else f"$D_{{{L1}}}(W)\\,/\\,D_{{{L0}}}(W) - 1$"
    with style():
        fig, (ax,) = _axes(ax, 1, width=5.6, height=3.6)
        ax.axvspan(r.margin, deltas[-1], color=PALETTE[2], alpha=0.1, lw=0, label="every exponent here keeps growth $\\leq$ tol")
        ax.plot(deltas, g, color=PALETTE[0], label=f"{growth} growth, $W = {window}$")
        ax.axhline(tol, color="0.4", ls="--", lw=1.2, label=f"tol $= {tol:g}$")
        ax.axvline(r.margin, color=PALETTE[1], lw=1.4, label=f"margin $\\delta = {r.margin:.4f}$ (certified)")
        ax.set(xlabel="margin $\\delta$ (exponent $\\alpha = 1 + \\delta$)", ylabel=ylabel, xlim=(0, deltas[-1]))
        ax.set_ylim(bottom=min(0.0, float(np.min(g))))
        ax.set_title(f"choosing a margin from the prior alone: $L = {L0} \\to {L1}$")
        ax.legend(loc="upper right")
    return fig


# ----------------------------------------------------------------------------------------------
# Encodings (Theorem 11)
# ----------------------------------------------------------------------------------------------


def default_encodings():
    """The encodings shown by the report and the encoding map, one per family, with labels.

    Returns
    -------
    dict
        ``{label: encoding}``, labels in mathtext.
    """
    from . import encodings as E

    return {
        "NoPE": E.NoPE(),
        "RoPE, logits $\\leq 1$": E.RoPE(1.0),
        "YaRN $s = 8$, logits $\\leq 1$": E.YaRN(8.0, 1.0),
        "ALiBi, slope $2^{-4}$": E.ALiBi(2.0**-4),
        "KERPLE-log, $r_1 = 0.9$": E.KerpleLog(0.9, 1.0),
        "KERPLE-log, $r_1 = 1.3$": E.KerpleLog(1.3, 1.0),
        "KERPLE-power, $r_1 = r_2 = 0.5$": E.KerplePower(0.5, 0.5),
        "T5 buckets, linear values": E.T5Buckets(values=np.linspace(0.0, -4.0, 32)),
        "FIRE (log-scaled, untrained)": E.FIRE(),
        "CABLE, increment $0.02$": E.CABLE(0.02),
        "log-distance, $\\alpha = 1.05$": E.LogDistance(1.05),
        "causal OT, $\\rho = 0.5$": E.CausalOT(0.5),
    }


def _encoding_items(encodings):
    if encodings is None:
        encodings = default_encodings()
    if isinstance(encodings, dict):
        return list(encodings.items())
    return [(repr(e), e) for e in encodings]


def _known_limit(verdict, window):
    """:math:`D_\\infty(W)` of a verdict, or ``None`` where it is not known (not computable,
    not certified, or no limit): the figure then leaves the limit marker out."""
    try:
        return verdict.limit_distant_mass(window)
    except (DomainError, PrecisionError):
        return None


def plot_distant_mass(encoding, window=64, lengths=None, *, label=None, ax=None, limit=True, **line_kw):
    """Distant mass :math:`D_n(W)` of one encoding against length, with its verdict (Theorem 11).

    Solid when the encoding is bounded, dashed when it dilutes; a triangle at the right edge
    marks the limit :math:`D_\\infty(W)` of a bounded encoding. Call it repeatedly on one
    Axes to compare encodings, including your own :class:`otprior.encodings.Bias`.

    Parameters
    ----------
    encoding : otprior.encodings.Encoding
    window : int
    lengths : sequence of int, optional
        Default: 14 lengths from ``2 * window`` to :math:`2^{17}`.
    label : str, optional
        Legend label; default ``repr(encoding)``. The verdict is appended.
    ax : Axes, optional
    limit : bool
        Mark :math:`D_\\infty(W)` of a bounded encoding.
    **line_kw
        Passed to ``Axes.plot`` (``color``, ``marker``, ...).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .encodings import classify

    lengths = _default_lengths(2 * window, 2**17, 14) if lengths is None else np.asarray(lengths, dtype=np.int64)
    v = classify(encoding)
    D = np.array([encoding.distant_mass(window, int(n)) for n in lengths])
    with style():
        fig, (ax,) = _axes(ax, 1, width=5.6, height=3.8)
        kw = {"ls": "-" if v.bounded else "--"}
        kw.update(line_kw)
        (line,) = ax.plot(lengths, D, label=f"{label or repr(encoding)} ({v.kind})", **kw)
        if limit and v.bounded:
            D_inf = _known_limit(v, window)
            if D_inf is not None:
                ax.plot([lengths[-1] * 1.5], [D_inf], marker="<", ms=6, color=line.get_color(), clip_on=False, ls="none")
        ax.set_xscale("log")
        # labels and limits only where the caller's axes have none (the caller's own win)
        if not ax.get_xlabel():
            ax.set_xlabel("context length $n$ (tokens)")
        if not ax.get_ylabel():
            ax.set_ylabel(f"distant mass $D_n(W)$, $W = {window}$")
        if ax.get_yscale() == "linear" and ax.get_autoscaley_on():
            ax.set_ylim(0, 1.02)
        if not ax.get_title():
            ax.set_title("distant mass: bounded (solid, $\\lhd$ limit) or diluting (dashed)")
        _log_length_axis(ax, "x", lengths)
        ax.legend(loc="best")  # rebuilt on each call, so it lists every encoding drawn so far
    return fig


def plot_encoding_map(window=64, encodings=None, lengths=None, *, ax=None):
    """Distant mass :math:`D_n(W)` against length for many encodings, split by verdict (Theorem 11).

    Every curve has its own colour and marker. Encodings whose constant-content curves
    coincide (NoPE, RoPE and YaRN all give :math:`D_n = 1 - W/n`; they differ only in the
    content bound) are drawn once, with one legend entry naming them all.

    Parameters
    ----------
    window : int
    encodings : dict or sequence, optional
        ``{label: encoding}`` or a list of encodings (labelled by ``repr``); default
        :func:`default_encodings`.
    lengths : sequence of int, optional
    ax : Axes or pair of Axes, optional
        A pair: bounded encodings on the left, diluting on the right (the default layout).
        One Axes: everything in it.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .encodings import classify

    items = _encoding_items(encodings)
    lengths = _default_lengths(2 * window, 2**17, 14) if lengths is None else np.asarray(lengths, dtype=np.int64)
    curves = []  # [labels, D, verdict]
    for label, enc in items:
        v = classify(enc)
        D = np.array([enc.distant_mass(window, int(n)) for n in lengths])
        for c in curves:
            if c[2].bounded == v.bounded and np.allclose(c[1], D, rtol=1e-12, atol=1e-12):
                c[0].append(label)
                break
        else:
            curves.append([[label], D, v])
    single = ax is not None and hasattr(ax, "plot")
    with style():
        if single:
            fig, axes = ax.figure, {True: ax, False: ax, None: ax}
        else:
            fig, (ax_b, ax_d) = _axes(ax, 2, width=4.9, height=3.9)
            axes = {True: ax_b, False: ax_d, None: ax_d}
            ax_b.set_title("bounded: $\\limsup D_n(W) < 1$")
            ax_d.set_title("diluting: $D_n(W) \\to 1$")
        count = {}
        for labels, D, v in curves:
            target = axes[v.bounded]
            i = count.get(id(target), 0)
            count[id(target)] = i + 1
            color, marker = PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]
            ls = "-" if v.bounded else "--"
            target.plot(lengths, D, color=color, marker=marker, ls=ls, markevery=2, label="\n".join(labels) + ("\n(identical curves)" if len(labels) > 1 else ""))
            D_inf = _known_limit(v, window) if v.bounded else None
            if D_inf is not None:
                target.plot([lengths[-1] * 1.5], [D_inf], marker="<", ms=6, color=color, clip_on=False, ls="none")
        for a in set(axes.values()):
            a.set_xscale("log")
            a.set(xlabel="context length $n$ (tokens)", ylabel=f"distant mass $D_n(W)$, $W = {window}$", ylim=(0, 1.02))
            a.set_xlim(lengths[0] * 0.8, lengths[-1] * 1.9)
            _log_length_axis(a, "x", lengths)
            if a.lines:
                a.legend(loc="lower right" if a is axes[False] and not single else "best", fontsize=7)
        if single and not ax.get_title():
            ax.set_title("bounded (solid, $\\lhd$ limit) vs diluting (dashed) encodings")
    return fig


# ----------------------------------------------------------------------------------------------
# Checkpoints and training runs
# ----------------------------------------------------------------------------------------------


def _head_label(row):
    return f"layer {row['layer']}, head {row['head']}"


def plot_head_exponents(rows, margin=None, *, key="exponent", ax=None):
    """Per-head exponents of a checkpoint against the summability boundary :math:`\\alpha = 1`.

    Parameters
    ----------
    rows : sequence of dict
        One per head, with ``"layer"`` and ``"head"`` (integers) and the exponent under
        ``key`` (``None`` rows are skipped), as in :mod:`otprior.torch` checkpoint analyses.
    margin : float, optional
        Draws :math:`1 + \\delta`, the exponent the margin requires (Theorem 9).
    key : str or callable
        Where a row holds its exponent: a key, or a function of the row.
    ax : Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
        Head index on the x axis (integer ticks), one colour and marker per layer.
    """
    from matplotlib.ticker import MaxNLocator

    value = key if callable(key) else (lambda row: row.get(key))
    rows = [dict(r, exponent=value(r)) for r in rows]
    rows = [r for r in rows if r["exponent"] is not None]
    with style():
        fig, (ax,) = _axes(ax, 1, width=5.6, height=3.6)
        layers = sorted({int(r["layer"]) for r in rows})
        for i, layer in enumerate(layers):
            sel = [r for r in rows if int(r["layer"]) == layer]
            ax.plot([int(r["head"]) for r in sel], [r["exponent"] for r in sel], ls="none", marker=MARKERS[i % len(MARKERS)], ms=6,
                    color=PALETTE[i % len(PALETTE)], label=f"layer {layer}")
        ax.axhline(1.0, color="0.2", lw=1.2, label="boundary $\\alpha = 1$ (Theorem 7)")
        if margin is not None:
            ax.axhline(1.0 + margin, color="0.45", ls="--", lw=1.2, label=f"$1 + \\delta = {1 + margin:.3f}$ (Theorem 9)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlabel="head", ylabel="exponent $\\alpha$")
        ax.set_title("per-head exponents against the summability boundary")
        ax.legend(loc="best")
    return fig


def plot_head_distant_mass(rows, window, *, ax=None):
    """Predicted distant mass :math:`D_n(W)` of every head against length, one legend entry per head.

    Parameters
    ----------
    rows : sequence of dict
        One per head: ``"layer"``, ``"head"``, ``"kind"`` (``"bounded"``/``"diluting"``) and
        ``"distant_mass"``, a mapping from length (int or str) to :math:`D_n(W)`.
    window : int
    ax : Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    with style():
        fig, (ax,) = _axes(ax, 1, width=6.4, height=3.9)
        layers = sorted({r["layer"] for r in rows}, key=str)
        for i, r in enumerate(rows):
            pairs = sorted((int(k), float(v)) for k, v in r["distant_mass"].items())
            ax.plot([p[0] for p in pairs], [p[1] for p in pairs], color=PALETTE[i % len(PALETTE)], marker=MARKERS[layers.index(r["layer"]) % len(MARKERS)],
                    ls="-" if r.get("kind") == "bounded" else "--", label=f"{_head_label(r)} ({r.get('kind', '?')})")
        ax.set_xscale("log")
        ax.set(xlabel="context length $n$ (tokens)", ylabel=f"predicted distant mass $D_n(W)$, $W = {window}$", ylim=(0, 1.02))
        ax.set_title("per-head predicted distant mass (solid: bounded, dashed: diluting)")
        _log_length_axis(ax, "x", sorted({int(k) for r in rows for k in r["distant_mass"]}))
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), ncols=1 if len(rows) <= 16 else 2, fontsize=7)
    return fig


def plot_extrapolation(runs, train_length=None, *, unit="token", ax=None):
    """Loss against evaluation length per scheme: mean over seeds with the seed spread.

    Parameters
    ----------
    runs : sequence of dict
        One per trained model: ``"scheme"``, ``"seed"``, ``"loss"`` (a mapping from length to
        loss) and optionally ``"verdict"`` (``"bounded"``/``"diluting"``, drawn solid/dashed).
    train_length : int, optional
        Drawn as a vertical line.
    unit : str
        What a position is (``"token"``, ``"byte"``): the axes read "length (tokens)" and
        "loss (nats per token)".
    ax : Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
        Error bars: one standard deviation across seeds (sample, ``ddof = 1``); a scheme
        with one seed has none. The legend gives the number of seeds.
    """
    schemes = list(dict.fromkeys(r["scheme"] for r in runs))
    with style():
        fig, (ax,) = _axes(ax, 1, width=5.6, height=3.8)
        all_lengths = set()
        for i, scheme in enumerate(schemes):
            sel = [r for r in runs if r["scheme"] == scheme]
            lengths = sorted({int(k) for r in sel for k in r["loss"]})
            all_lengths.update(lengths)
            values = [[float(r["loss"][k]) for r in sel for k in r["loss"] if int(k) == n] for n in lengths]
            mean = np.array([np.mean(v) for v in values])
            err = np.array([np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in values])
            verdict = str(sel[0].get("verdict", "")).split(" ")[0]
            seeds = len({r.get("seed") for r in sel})
            label = f"{scheme}" + (f" ({verdict})" if verdict else "") + f", {seeds} seed{'s' if seeds > 1 else ''}"
            ax.errorbar(lengths, mean, yerr=err if seeds > 1 else None, color=PALETTE[i % len(PALETTE)], marker=MARKERS[i % len(MARKERS)],
                        ls="-" if verdict == "bounded" else "--", capsize=3, label=label)
        if train_length is not None:
            ax.axvline(train_length, color="0.4", ls=":", lw=1.2, label=f"training length {train_length}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(all_lengths))
        ax.xaxis.set_major_formatter(_length_formatter(2))
        ax.xaxis.set_minor_formatter(_formatter(lambda v, p=None: ""))
        ax.set(xlabel=f"evaluation length ({unit}s)", ylabel=f"loss (nats per {unit})")
        ax.set_title("extrapolation: mean over seeds, bars = one standard deviation")
        ax.legend(loc="best")
    return fig


def _formatter(func):
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(func)
