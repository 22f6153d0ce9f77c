"""``otprior report``: the paper's tables and figures on built-in defaults."""

from __future__ import annotations

import html
import json
import sys
import time
from pathlib import Path

from .ot_prior import ot_dilution_bound, ot_window_law, ot_window_mass
from .scale_invariant import scale_invariant_normaliser
from .symbolic import dilution_limits

__all__ = ["build_report"]


class _Progress:
    """A one-line progress bar on stderr for steps slower than a second."""

    def __init__(self, total, enabled):
        self.total, self.done, self.enabled, self.start = total, 0, enabled, time.perf_counter()

    def step(self, label):
        self.done += 1
        if self.enabled and time.perf_counter() - self.start > 1.0:
            bar = "#" * int(30 * self.done / self.total)
            sys.stderr.write(f"\r[{bar:<30}] {self.done}/{self.total} {label:<40}")
            sys.stderr.flush()

    def close(self):
        if self.enabled and time.perf_counter() - self.start > 1.0:
            sys.stderr.write("\n")


def _ot_table():
    rows = []
    for rho in (0.3, 0.5, 0.7, 0.9):
        for n in (1024, 16384):
            rows.append(
                {
                    "rho": rho,
                    "n": n,
                    "window": 16,
                    "exact": ot_window_mass(16, n, rho),
                    "law": ot_window_law(16, n, rho),
                    "bound_B_0.25": ot_dilution_bound(16, n, rho, 0.25),
                    "Z_q": scale_invariant_normaliser(rho),
                }
            )
    return rows


def build_report(out: Path, *, progress=True) -> Path:
    """Compute the tables and render every figure into ``out``; return ``out / 'index.html'``."""
    from . import plots

    out.mkdir(parents=True, exist_ok=True)
    figures = [
        ("scale_invariant_prior.png", plots.plot_scale_invariant_prior, "Scale-invariant prior F_ρ, f_ρ (solid) and the exact discrete prior (dotted)."),
        ("ot_dilution.png", plots.plot_ot_dilution, "Window mass of causal OT attention vs length: exact, law (dashed), bounded-score bound (band)."),
    ]
    bar = _Progress(len(figures) + 2, progress)
    tables = {"ot_window_mass": _ot_table()}
    bar.step("OT window masses")
    limits = dilution_limits()
    tables["dilution_limits"] = [
        {"name": s.name, "claim": s.claim, "value": str(s.expression), "method": s.method, "verified": s.verified} for s in limits.steps
    ]
    bar.step("dilution limits")
    for name, func, _ in figures:
        fig = func()
        fig.savefig(out / name, dpi=120)
        bar.step(name)
    bar.close()
    (out / "tables.json").write_text(json.dumps(tables, indent=2, default=float))
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>otprior report</title></head><body>", "<h1>otprior report</h1>"]
    for key, rows in tables.items():
        parts.append(f"<h2>{html.escape(key)}</h2><table border='1' cellpadding='3'><tr>")
        parts += [f"<th>{html.escape(str(k))}</th>" for k in rows[0]]
        parts.append("</tr>")
        for row in rows:
            cells = [f"{v:.6g}" if isinstance(v, float) else html.escape(str(v)) for v in row.values()]
            parts.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        parts.append("</table>")
    for name, _, caption in figures:
        parts.append(f"<figure><img src='{name}' width='720'><figcaption>{html.escape(caption)}</figcaption></figure>")
    parts.append("</body></html>")
    index = out / "index.html"
    index.write_text("\n".join(parts))
    return index
