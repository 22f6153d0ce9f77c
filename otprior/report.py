"""``otprior report``: the paper's tables and figures on built-in defaults.

Tables: window masses of log-distance priors near exponent one (with certified bounds),
margins for a grid of windows and length ranges, the classification of encodings,
the dilution constants of causal OT attention, and the limits in rho. Figures: every
function of :mod:`otprior.plots`. Everything lands in one folder with ``index.html``.
"""

from __future__ import annotations

import html
import json
import sys
import time
from pathlib import Path

from ._output import staged_folder

__all__ = ["build_report"]


class _Progress:
    """A one-line progress bar on stderr, shown once the work has taken over a second."""

    def __init__(self, total, enabled):
        self.total, self.done, self.enabled, self.start = total, 0, enabled, time.perf_counter()

    def step(self, label):
        self.done += 1
        if self.enabled and time.perf_counter() - self.start > 1.0:
            bar = "#" * int(30 * self.done / self.total)
            sys.stderr.write(f"\r[{bar:<30}] {self.done}/{self.total} {label:<45}")
            sys.stderr.flush()

    def close(self):
        if self.enabled and time.perf_counter() - self.start > 1.0:
            sys.stderr.write("\n")


def _log_distance_table():
    from .log_distance import window_mass, window_mass_bounds

    rows = []
    for W in (16, 64):
        for alpha in (1.0, 1.01, 1.05, 1.1, 1.3):
            for n in (10**3, 10**6, 10**9, 10**12, 10**15):
                lo, hi = window_mass_bounds(W, n, alpha)
                rows.append({"window": W, "alpha": alpha, "n": n, "window_mass": window_mass(W, n, alpha), "lower": lo, "upper": hi})
    return rows


def _margin_table():
    from .margin import margin_for

    rows = []
    for W in (16, 64, 256):
        for L0, L1 in ((512, 8192), (2048, 32768), (4096, 131072), (8192, 10**6)):
            for tol in (0.02, 0.05):
                r = margin_for(W, (L0, L1), tol)
                rows.append({"window": W, "L0": L0, "L1": L1, "tol": tol, "margin": r.margin, "exponent": r.exponent, "growth": r.growth})
    return rows


def _encoding_table(window=64):
    from .encodings import classify
    from .plots import default_encodings

    rows = []
    for enc in default_encodings():
        v = classify(enc)
        rows.append(
            {
                "encoding": repr(enc),
                "kind": v.kind,
                "D_oo(64)": v.limit_distant_mass(window),
                "D_n(64), n=65536": enc.distant_mass(window, 65536),
                "rate": v.rate or "",
                "reason": v.reason,
            }
        )
    return rows


def _ot_table():
    from .ot_prior import ot_dilution_bound, ot_window_law, ot_window_mass
    from .scale_invariant import scale_invariant_normaliser

    rows = []
    for rho in (0.1, 0.3, 0.5, 0.7, 0.9):
        for n in (1024, 16384):
            rows.append(
                {
                    "rho": rho,
                    "n": n,
                    "exponent 1-rho": 1 - rho,
                    "log Z_q": scale_invariant_normaliser(rho, log=True),
                    "exact m_n(16)": ot_window_mass(16, n, rho),
                    "law": ot_window_law(16, n, rho),
                    "bound, |s-c|<=0.25": ot_dilution_bound(16, n, rho, 0.25),
                }
            )
    return rows


def _limits_table():
    from .symbolic import dilution_limits

    return [
        {"limit": s.name, "claim": s.claim, "value": str(s.expression), "method": s.method, "verified": s.verified}
        for s in dilution_limits().steps
    ]


_TABLES = [
    ("log_distance_window_mass", "Window masses of log-distance priors near exponent one, with certified bounds (Theorems 7, 8).", _log_distance_table),
    ("margins", "Margins chosen from the prior alone: every exponent above 1 + margin keeps absolute distant-mass growth within tol (Theorem 9).", _margin_table),
    ("encodings", "Bounded vs diluting positional encodings (Theorem 11).", _encoding_table),
    ("ot_dilution", "Dilution of causal OT attention: exact window mass, the law H_W (Z_q/n)^(1-rho), and the bound for bounded scores (Theorems 2, 4, 5).", _ot_table),
    ("limits_in_rho", "Limits as rho varies, checked by sympy or numerically with stated error (Theorem 6).", _limits_table),
]


def _figures():
    from . import plots

    return [
        ("scale_invariant_prior.png", plots.plot_scale_invariant_prior, "Scale-invariant prior F_ρ and f_ρ (solid) with the exact discrete prior at t = 2048 (dotted); Theorem 3."),
        ("ot_dilution.png", plots.plot_ot_dilution, "Window mass of causal OT attention vs length: exact (markers), law (dashed), bound for scores within 0.25 of a constant (band); Theorems 4, 5."),
        ("log_distance_window_mass.png", plots.plot_log_distance_window_mass, "Log-distance priors near exponent one: summable priors still dilute at every length evaluated; band = content within ±0.25; Theorems 7, 8, 10."),
        ("margin_growth.png", plots.plot_margin_growth, "Growth of distant mass from 512 to 8192 tokens vs the margin, with the margin chosen by margin_for; Theorem 9."),
        ("encoding_map.png", plots.plot_encoding_map, "Distant mass vs length for each encoding: bounded (solid, limit marked) and diluting (dashed); Theorem 11."),
        ("dilution_constants.png", plots.plot_dilution_constants, "Dilution exponent 1 − ρ and the constant of the window law vs ρ; Theorems 4, 6."),
    ]


def _html_table(rows):
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = []
    for row in rows:
        cells = [f"{v:.6g}" if isinstance(v, float) else html.escape(str(v)) for v in row.values()]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def build_report(out: Path, *, progress=True, force=False) -> Path:
    """Compute every table and render every figure into the folder ``out``; return ``out / 'index.html'``.

    ``out`` must be a new or empty folder unless ``force`` is true; nothing is written
    outside it, and files of the report's names are replaced, never followed through
    links (:func:`otprior._output.staged_folder`).
    """
    with staged_folder(out, force=force) as staging:
        _write_report(staging, progress)
    return Path(out) / "index.html"


def _write_report(out: Path, progress) -> Path:
    figures = _figures()
    bar = _Progress(len(_TABLES) + len(figures), progress)
    tables = {}
    for key, _, func in _TABLES:
        tables[key] = func()
        bar.step(key)
    for name, func, _ in figures:
        fig = func()
        fig.savefig(out / name, dpi=120)
        import matplotlib.pyplot as plt

        plt.close(fig)
        bar.step(name)
    bar.close()
    (out / "tables.json").write_text(json.dumps(tables, indent=2, default=float))
    style = "body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}figcaption{font-size:13px;color:#333}"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>otprior report</title><style>{style}</style></head><body>",
        "<h1>otprior report</h1>",
        "<p>Positional priors of causal attention, on built-in defaults. Each table and figure names the theorem in <code>proofs/</code> it computes; the numbers are in <code>tables.json</code>.</p>",
        "<h2>Figures</h2>",
    ]
    for name, _, caption in figures:
        parts.append(f"<figure><img src='{name}' style='max-width:100%'><figcaption>{html.escape(caption)}</figcaption></figure>")
    parts.append("<h2>Tables</h2>")
    for key, caption, _ in _TABLES:
        parts.append(f"<h3>{html.escape(key)}</h3><p>{html.escape(caption)}</p>{_html_table(tables[key])}")
    parts.append("</body></html>")
    index = out / "index.html"
    index.write_text("\n".join(parts))
    return index
