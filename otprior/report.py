"""``otprior report``: the paper's tables and figures on built-in defaults, in one folder.

Tables: window masses of log-distance priors near exponent one with the width of their
certified brackets (Theorems 7, 8), margins for a grid of windows and length ranges with
their certified brackets (Theorem 9), the classification of encodings (Theorem 11), the
dilution of causal OT attention (Theorems 2, 4, 5) and the limits in rho (Theorem 6).
Figures: the functions of :mod:`otprior.plots`, each written as PNG (for the page) and PDF
(vector, for a paper). ``index.html`` shows everything; ``tables.json`` holds the numbers
and ``parameters.json`` the versions, the git commit (or "unknown") and every parameter used.
"""

from __future__ import annotations

import html
import json
import math
import platform
import re
import sys
import time
from pathlib import Path

from ._json import to_strict_json
from ._output import staged_folder

__all__ = ["build_report", "FIGURES", "TABLES"]


class _Progress:
    """Progress on stderr: one line per step as it starts (``[3/11] table encodings``), counted
    from 1. On a terminal the line is rewritten in place; anywhere else (a log file, a pipe)
    each step is its own line, with no carriage return."""

    def __init__(self, total, enabled, stream=None):
        self.total, self.done, self.enabled = total, 0, enabled
        self.stream = sys.stderr if stream is None else stream
        try:
            self.terminal = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.terminal = False
        self.width = 0

    def step(self, label):
        """Announce the next step, ``label``."""
        self.done += 1
        if not self.enabled:
            return
        line = f"[{self.done}/{self.total}] {label}"
        if self.terminal:
            self.stream.write("\r" + line.ljust(self.width))
            self.width = max(self.width, len(line))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self):
        if self.enabled and self.terminal and self.done:
            self.stream.write("\n")
            self.stream.flush()


# ----------------------------------------------------------------------------------------------
# Tables: each is (key, title, caption, parameters, function, columns). A column is
# (row key, header in HTML, formatter name). The JSON keeps every row key.
# ----------------------------------------------------------------------------------------------


def _lo_hi(bounds):
    """``(lo, hi)`` of a bounds result: an enclosure with ``lo``/``hi`` or a pair."""
    if hasattr(bounds, "lo") and hasattr(bounds, "hi"):
        return bounds.lo, bounds.hi
    lo, hi = bounds
    return lo, hi


def _log_distance_table(windows, alphas, lengths):
    from .log_distance import window_mass, window_mass_bounds

    rows = []
    for W in windows:
        for alpha in alphas:
            for n in lengths:
                lo, hi = _lo_hi(window_mass_bounds(W, n, alpha))
                m = window_mass(W, n, alpha)
                rows.append({"window": W, "alpha": alpha, "n": n, "window_mass": m, "lower": lo, "upper": hi, "relative_width": (hi - lo) / m})
    return rows


def _margin_table(windows, length_ranges, tols):
    from .margin import margin_for

    rows = []
    for W in windows:
        for L0, L1 in length_ranges:
            for tol in tols:
                r = margin_for(W, (L0, L1), tol)
                lo, hi = r.bracket
                rows.append({"window": W, "L0": L0, "L1": L1, "tol": tol, "margin": r.margin, "exponent": r.exponent, "growth": r.growth,
                             "bracket_lower": lo, "bracket_upper": hi, "bracket_width": hi - lo})
    return rows


def _encoding_table(window, n):
    from .encodings import classify
    from .plots import default_encodings

    rows = []
    for label, enc in default_encodings().items():
        v = classify(enc)
        rows.append(
            {
                "label": label,
                "encoding": repr(enc),
                "kind": v.kind,
                "limit_distant_mass": v.limit_distant_mass(window) if v.bounded else None,
                "distant_mass": enc.distant_mass(window, n),
                "rate": v.rate or "",
                "reason": v.reason,
            }
        )
    return rows


def _ot_table(window, rhos, lengths, score_bound):
    from .ot_prior import ot_dilution_bound, ot_window_law, ot_window_mass
    from .scale_invariant import scale_invariant_normaliser

    rows = []
    for rho in rhos:
        for n in lengths:
            rows.append(
                {
                    "rho": rho,
                    "n": n,
                    "exponent": 1 - rho,
                    "log_normaliser": scale_invariant_normaliser(rho, log=True),
                    "window_mass": ot_window_mass(window, n, rho),
                    "window_law": ot_window_law(window, n, rho),
                    "bounded_score_bound": ot_dilution_bound(window, n, rho, score_bound).bound,
                }
            )
    return rows


def _limits_table():
    from .symbolic import dilution_limits

    return [_limit_row(s) for s in dilution_limits().steps]


def _limit_row(s) -> dict:
    """One row of the limits table from a :class:`otprior.symbolic.Step`."""
    if isinstance(s.expression, (list, tuple)):
        value = ", ".join(f"{float(x):.3g}" for x in s.expression)
    else:
        value = str(s.expression)
    what = _LIMIT_COMPUTED.get(s.name)
    shown = _math(value) + _LIMIT_CONSEQUENCE.get(s.name, "")
    return {"limit": s.name.replace("_", " "), "claim": s.claim, "value": value,
            "computed": f"{what} = {shown}" if what else shown, "method": s.method, "verified": bool(s.verified)}


TABLES = [
    (
        "log_distance_window_mass",
        "Log-distance priors near exponent one",
        "Window mass m_n(W) of the prior (d+1)^(-α) (Theorem 7) and the relative width (upper − lower)/m of its "
        "certified Euler–Maclaurin bracket (Theorem 8). A summable exponent (α > 1) still keeps a shrinking share at every "
        "length one can evaluate.",
        {"windows": (16, 64), "alphas": (1.0, 1.01, 1.05, 1.1, 1.3), "lengths": (10**3, 10**6, 10**9, 10**12, 10**15)},
        _log_distance_table,
        [("window", "W", "int"), ("alpha", "α", "g"), ("n", "n", "n"), ("window_mass", "m<sub>n</sub>(W)", "6"),
         ("relative_width", "bracket width (relative)", "e")],
    ),
    (
        "margins",
        "Margins chosen from the prior alone",
        "Smallest δ such that every exponent α ≥ 1 + δ keeps the absolute growth D_L1(W) − D_L0(W) within tol (Theorem 9), "
        "with the width of its certified bracket.",
        {"windows": (16, 64, 256), "length_ranges": ((512, 8192), (2048, 32768), (4096, 131072), (8192, 10**6)), "tols": (0.02, 0.05)},
        _margin_table,
        [("window", "W", "int"), ("L0", "L<sub>0</sub>", "n"), ("L1", "L<sub>1</sub>", "n"), ("tol", "tol", "g"),
         ("margin", "margin δ", "6"), ("bracket_width", "bracket width", "e")],
    ),
    (
        "encodings",
        "Bounded and diluting positional encodings",
        "Verdict of each encoding (Theorem 11): bounded when the distant mass D_n(W) stays below one, diluting when it tends "
        "to one; the limit D_∞(W) of a bounded encoding and D_n(W) at one length.",
        {"window": 64, "n": 65536},
        _encoding_table,
        [("label", "encoding", "label"), ("kind", "verdict", "str"), ("limit_distant_mass", "D<sub>∞</sub>(64)", "4"),
         ("distant_mass", "D<sub>n</sub>(64), n = 65 536", "4"), ("rate", "rate", "math")],
    ),
    (
        "ot_dilution",
        "Dilution of causal OT attention",
        "Window mass m_n(W) of the constant-score prior (Theorem 2), the window law H_W (Z_q/n)^(1−ρ) (Theorem 4, asymptotic) and "
        "the rigorous upper bound for every score matrix within 0.25 of a constant (Theorem 5); W = 16.",
        {"window": 16, "rhos": (0.1, 0.3, 0.5, 0.7, 0.9), "lengths": (1024, 16384), "score_bound": 0.25},
        _ot_table,
        [("rho", "ρ", "g"), ("n", "n", "n"), ("exponent", "exponent 1 − ρ", "g"), ("window_mass", "exact m<sub>n</sub>(16)", "4"),
         ("window_law", "window law", "4"), ("bounded_score_bound", "bound, |s − c| ≤ 0.25", "4")],
    ),
    (
        "limits_in_rho",
        "Limits as ρ varies",
        "Each limit of Theorem 6, checked by sympy (symbolic) or numerically: the claim, and what was computed to check it.",
        {},
        _limits_table,
        [("limit", "limit", "math"), ("claim", "claim", "math"), ("computed", "computed", "html"), ("method", "method", "str"),
         ("verified", "verified", "str")],
    ),
]

FIGURES = [
    ("scale_invariant_prior", "plot_scale_invariant_prior", {"rhos": (0.0, 0.3, 0.5, 0.7, 0.9), "n": 2048},
     "Scale-invariant prior: CDF F_ρ and density f_ρ (solid) with the exact discrete prior at t = 2048 (dotted); Theorems 2, 3."),
    ("ot_dilution", "plot_ot_dilution", {"window": 16, "rhos": (0.3, 0.5, 0.7, 0.9), "score_bound": 0.25},
     "Window mass of causal OT attention against length: exact (markers), window law where it is below one (dashed), "
     "up to the bound for scores within 0.25 of a constant (band); Theorems 2, 4, 5."),
    ("log_distance_window_mass", "plot_log_distance_window_mass", {"window": 64, "alphas": (0.9, 1.0, 1.02, 1.1, 1.3), "score_bound": 0.25},
     "Log-distance priors near exponent one: summable priors (solid) still lose window mass at every length evaluated, "
     "far above their limits (triangles); band: content within ±0.25; Theorems 7, 8, 10."),
    ("margin_growth", "plot_margin_growth", {"window": 64, "lengths": (512, 8192), "tol": 0.05, "growth": "absolute"},
     "Growth of the distant mass from 512 to 8192 tokens against the margin, with the margin chosen by margin_for; Theorem 9."),
    ("encoding_map", "plot_encoding_map", {"window": 64},
     "Distant mass against length for each encoding: bounded (left, limit marked) and diluting (right); Theorem 11."),
    ("dilution_constants", "plot_dilution_constants", {"windows": (1, 4, 16, 64)},
     "Constant C_W(ρ) of the window law m_n(W) ≈ C_W n^−(1−ρ), and Z_q^q tending to 1/e as ρ → 1; Theorems 4, 6."),
]


# ----------------------------------------------------------------------------------------------
# Formatting
# ----------------------------------------------------------------------------------------------


def _fmt_n(n) -> str:
    """A length: ``10<sup>15</sup>`` for a power of ten from 10^4, else digits grouped by thin spaces."""
    n = int(n)
    if n >= 10**4:
        k = round(math.log10(n))
        if 10**k == n:
            return f"10<sup>{k}</sup>"
    return f"{n:,}".replace(",", "&#8239;")


def _plain(label: str) -> str:
    """A matplotlib mathtext label as HTML (the few commands the default labels use)."""
    text = html.escape(label)
    for tex, uni in (("\\leq", "≤"), ("\\alpha", "α"), ("\\rho", "ρ"), ("\\infty", "∞")):
        text = text.replace(tex, uni)
    text = re.sub(r"\^\{([^}]*)\}", r"<sup>\1</sup>", text)
    text = re.sub(r"_\{([^}]*)\}|_(\w)", lambda m: f"<sub>{m.group(1) or m.group(2)}</sub>", text)
    return text.replace("$", "")


_GREEK = {"alpha": "α", "delta": "δ", "rho": "ρ", "pi": "π", "Gamma": "Γ", "psi": "ψ", "epsilon": "ε", "tau": "τ"}


def _math(text: str) -> str:
    """Plain-text maths of the library (``D_oo(W)``, ``n^-(0.1)``, ``e^{2B}``, ``<=``, ``rho``) as
    HTML: subscripts and superscripts as ``<sub>``/``<sup>``, Unicode for Greek letters, ∞, ≤, ≥,
    ∼, → and the minus sign. Anything else is escaped, unchanged."""
    t = html.escape(str(text), quote=False)
    t = t.replace("-&gt;", "→").replace("&lt;=", "≤").replace("&gt;=", "≥").replace("~", "∼")
    t = re.sub(r"(?<![A-Za-z])(" + "|".join(_GREEK) + r")(?![A-Za-z])", lambda m: _GREEK[m.group(1)], t)
    t = re.sub(r"(?<![A-Za-z])oo(?![A-Za-z])", "∞", t)

    def sup(m):  # an exponent, its minus signs as minus signs
        return "<sup>" + "".join(m.groups()).replace("-", "−") + "</sup>"

    t = re.sub(r"\^(-?)\(([^()]*)\)", sup, t)  # n^-(0.1), e^(osc f), 2^(k-8)
    t = re.sub(r"\^(-?[\w.∞]+)", sup, t)  # n^0.5, n^r2
    t = re.sub(r"\^\{([^{}]*)\}", sup, t)  # e^{2B}, e^{-r1 n^r2} (the inner one done above)
    t = re.sub(r"_\{([^{}]*)\}", r"<sub>\1</sub>", t)
    t = re.sub(r"(?<=\w)_(\w|∞)(?!\w)", r"<sub>\1</sub>", t)  # D_n, r_1, F_ρ; not min_increment
    t = re.sub(r"(?<=[\s(>])-(?=[\w(.∞])", "−", t)  # a leading minus
    return t.replace(" - ", " − ")


# What each step of otprior.symbolic.dilution_limits computes, for the "computed" column.
_LIMIT_COMPUTED = {
    "exponent": "lim<sub>n→∞</sub> log m<sub>n</sub> / log n",
    "rho_to_zero": "F<sub>0</sub>(δ)",
    "rho_to_one": "lim<sub>q→0</sub> of the exponent (δ Γ(1/q + 1))<sup>q</sup>",
    "window_law_vanishes": "lim<sub>n→∞</sub> n<sup>−q</sup> (q = 1 − ρ &gt; 0)",
    "balanced_limit_at_fixed_n": "1 − π<sub>4</sub>(0) at ρ = 0.99, 0.999, 0.9999",
    "normaliser_power": "lim<sub>q→0</sub> Z<sub>q</sub><sup>q</sup>",
}
_LIMIT_CONSEQUENCE = {"rho_to_one": ", so the bound exp(−∞) = 0"}


def _fmt_param(value) -> str:
    """A parameter for reading (HTML): lengths as :func:`_fmt_n`, tuples in parentheses."""
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_fmt_param(v) for v in value) + ")"
    if isinstance(value, int) and not isinstance(value, bool):
        return _fmt_n(value)
    if isinstance(value, float):
        return f"{value:g}"
    return html.escape(str(value))


def _fmt(value, kind) -> str:
    if value is None:
        return "–"
    if kind == "n":
        return _fmt_n(value)
    if kind == "int":
        return f"{int(value)}"
    if kind == "label":
        return _plain(str(value))
    if kind == "math":
        return _math(value)
    if kind == "html":
        return str(value)  # built from escaped parts by the table's function
    if kind == "str" or isinstance(value, (str, bool)):
        return html.escape(str(value))
    if kind == "e":
        return "0" if value == 0 else f"{value:.1e}"
    if kind == "g":
        return f"{value:g}"
    return f"{value:.{int(kind)}g}"


def _html_table(rows, columns) -> str:
    head = "".join(f"<th>{header}</th>" for _, header, _ in columns)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(row[key], kind)}</td>" for key, _, kind in columns) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _versions() -> dict:
    from importlib.metadata import version as _dist_version

    import matplotlib
    import mpmath
    import numpy
    import scipy

    from . import __version__

    try:
        import flint

        flint_version = flint.__version__
    except (ImportError, AttributeError):  # pragma: no cover - python-flint is a dependency
        flint_version = None
    return {
        "otprior": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "mpmath": mpmath.__version__,
        "sympy": _dist_version("sympy"),  # the version without importing sympy
        "python-flint": flint_version,
        "matplotlib": matplotlib.__version__,
    }


def _commit() -> str:
    """The git commit of the otprior source that runs (``git rev-parse HEAD``, with ``+modified``
    when tracked files differ from it), or ``"unknown"`` outside a git checkout of otprior."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file() or not (root / ".git").exists():
        return "unknown"  # an installed copy, or a checkout of another project around it

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        modified = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        return "unknown"
    return commit + ("+modified" if modified else "")


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;font-size:13px;margin:0.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
    "td:first-child,th:first-child{text-align:left}figure{margin:1.5em 0}figcaption{font-size:14px;color:#333}"
    "code{font-size:13px}"
)


def build_report(out: Path, *, progress=True, force=False) -> Path:
    """Compute every table and render every figure into the folder ``out``; return ``out / 'index.html'``.

    Parameters
    ----------
    out : path-like
        Folder to write: a new or empty folder, or any folder when ``force`` is true. It
        receives ``index.html``, ``tables.json``, ``parameters.json`` and, per figure,
        ``<name>.png`` (200 dpi) and ``<name>.pdf``. Nothing is written outside it, and files
        of the report's names are replaced, never followed through links
        (:func:`otprior._output.staged_folder`).
    progress : bool
        Announce each step on stderr as it starts (``[3/11] table: ...``), counted from 1: one
        line per step in a log or pipe, one line rewritten in place on a terminal.
    force : bool
        Allow writing into an existing, non-empty folder.

    Returns
    -------
    pathlib.Path
        The ``index.html`` written.
    """
    with staged_folder(out, force=force) as staging:
        _write_report(Path(staging), progress)
    return Path(out) / "index.html"


def _table_step(title) -> str:
    return f"table: {title}"


def _figure_step(name, func_name) -> str:
    return f"figure: {name.replace('_', ' ')} ({func_name})"


def _write_report(out: Path, progress) -> Path:
    import matplotlib.pyplot as plt

    from . import plots

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    bar = _Progress(len(TABLES) + len(FIGURES), progress)
    tables = {}
    for key, title, _caption, params, func, _columns in TABLES:
        bar.step(_table_step(title))
        tables[key] = func(**params)
    for name, func_name, params, _caption in FIGURES:
        bar.step(_figure_step(name, func_name))
        fig = getattr(plots, func_name)(**params)
        try:
            fig.savefig(out / f"{name}.png", dpi=200)
            fig.savefig(out / f"{name}.pdf")
        finally:
            plt.close(fig)
    bar.close()
    parameters = {
        "versions": _versions(),
        "commit": _commit(),
        "created": started,
        "tables": {key: params for key, _t, _c, params, _f, _cols in TABLES},
        "figures": {name: {"function": f"otprior.plots.{func_name}", **params} for name, func_name, params, _ in FIGURES},
    }
    (out / "tables.json").write_text(json.dumps(to_strict_json(tables), indent=2))
    (out / "parameters.json").write_text(json.dumps(to_strict_json(parameters), indent=2))

    versions = ", ".join(f"{k} {v}" for k, v in parameters["versions"].items() if v and k != "otprior")
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>otprior report</title><style>{_STYLE}</style></head><body>",
        "<h1>Positional priors of causal attention: report</h1>",
        f"<p>Computed by otprior {html.escape(parameters['versions']['otprior'])} (commit "
        f"<code>{html.escape(parameters['commit'])}</code>) on {started} ({html.escape(versions)}). "
        "Each table and figure names the theorem of <code>proofs/</code> it computes. The numbers are in "
        "<a href='tables.json'><code>tables.json</code></a>, every parameter in "
        "<a href='parameters.json'><code>parameters.json</code></a>; each figure is also a PDF for print.</p>",
        "<h2>Figures</h2>",
    ]
    for name, func_name, params, caption in FIGURES:
        args = ", ".join(f"{k}={v!r}" for k, v in params.items())
        parts.append(
            f"<figure><img src='{name}.png' alt='{html.escape(caption)}' style='max-width:100%'><figcaption>{html.escape(caption)} "
            f"<a href='{name}.pdf'>PDF</a> · <code>plots.{func_name}({html.escape(args)})</code></figcaption></figure>"
        )
    parts.append("<h2>Tables</h2>")
    for key, title, caption, params, _func, columns in TABLES:
        args = ", ".join(f"{html.escape(k)} = {_fmt_param(v)}" for k, v in params.items())
        detail = f" Parameters: {args}." if args else ""
        parts.append(f"<h3>{html.escape(title)}</h3><p>{html.escape(caption)}{detail}</p>{_html_table(tables[key], columns)}")
    parts.append("</body></html>")
    index = out / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    return index
