"""A user's ``Bias`` at any length and window: time, width, route and an independent reference per point.

The biases cover every route of ``Bias.mass_enclosures`` beyond direct summation (``proofs/closed_form_tails.md``):
Euler-Maclaurin (Theorem 15), dominance bounds (15d: ``sqrt(d)``, ``exp(d/1000)``, ``-exp(d)``), the Jacobi-Anger
closed form (15e: ``0.5*sin(d)``, ``2*cos(pi*d/3 + 1)``, ``149*sin(d)``) and its twisted sums (15f: ``-1.2*log(1+d) + 0.5*sin(d)``),
a growing bias next to ``n`` (15j: ``sqrt(d)``), a term that dies out left out of the tails (15k:
``-1.1*log(d+1) + exp(-exp(d/1000))``),
at n = 10^k (k = 3, 6, 9, 12, 15, 18) and 1e300, with windows W = 64, n/10 (far), n - 1e5 (from n = 1e9: a distant range
short against its start, Theorem 15h) and n - 1.

Each point records the process CPU time of the float call (``window_mass``, median of ``reps``) and of the
certified one (``mass_enclosures``), both also as ratios to a baseline timed interleaved with them in this
process (a 4096-term numpy log-sum-exp, the cost of one short direct mass), so that a loaded machine's
seconds can be read against it. Every timed call starts with the memos of a range forgotten (Theorem 15i's
verdicts and Theorem 15k's reductions, kept per exact range): the times are those of a first call at that
``(W, n)``, with the expression already compiled; the enclosure's relative width; the route; and, where an independent
reference exists (mpmath in a private context: Hurwitz zeta for ``-1.1*log(1+d)``, sums of whole periods for
the period-6 bias, mpmath's own bounds for the dominance points), whether the enclosure contains it and the
float's error in units of the double spacing.

Run: ``python bench/bench_bias_any_length.py --quick`` (n = 1e6, 1e18, 1e300; seconds), or without ``--quick``
(every point; writes ``bench/results/bias_any_length.json`` and ``bench/results/bias_any_length.md``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import mpmath
import numpy as np

from otprior.encodings import Bias, _bias_tail
from otprior.encodings import bias as _bias_module

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared timing
from _timing import interleaved  # noqa: E402

BIASES = (
    "-0.7*log(1+d) - 0.01*sqrt(d)",
    "-1.1*log(1+d)",
    "sqrt(d)",
    "exp(d/1000)",
    "-exp(d)",
    "0.5*sin(d)",
    "2*cos(pi*d/3 + 1)",
    "-1.2*log(1+d) + 0.5*sin(d)",
    "149*sin(d)",  # the largest amplitude the Jacobi-Anger routes take (Bessel terms by backward recurrence)
    "-1.1*log(d+1) + exp(-exp(d/1000))",  # a term below e^-60 beyond d = 4096, left out of the tails (Theorem 15k)
)


def label(x):
    s = str(x)
    if s.rstrip("0") == "1":
        return f"1e{len(s) - 1}"
    if s.rstrip("9") == "":
        return f"1e{len(s)} - 1"
    return f"{float(x):.3g}"


def wlabel(W, n):
    """The window's label: ``n - 1e5`` spelt so (``label`` would print 999900000 as 1e9)."""
    return f"{label(n)} - 1e5" if W == n - 10**5 else label(W)


_HEADS = {}


def reference(text, W, n, ctx):
    """``(m, D)`` from mpmath alone (private context), or ``None``."""
    if text == "-1.1*log(d+1) + exp(-exp(d/1000))":  # 8000 terms one by one (the second term < e^-2980 beyond), then zeta
        s = ctx.mpf("1.1")
        if "head" not in _HEADS:
            _HEADS["head"] = [ctx.exp(-s * ctx.log(k + 1) + ctx.exp(-ctx.exp(ctx.mpf(k) / 1000))) for k in range(8000)]
        head = _HEADS["head"]

        def part(a, c):  # sum_{a <= k <= c}
            out = ctx.fsum(head[a:min(c, 7999) + 1]) if a < 8000 else ctx.mpf(0)
            if c >= max(a, 8000):
                out += ctx.zeta(s, max(a, 8000) + 1) - ctx.zeta(s, c + 2)
            return out

        S, T = part(0, W - 1), part(W, n - 1)
        return S / (S + T), T / (S + T)
    if text == "-1.1*log(1+d)":
        s = ctx.mpf("1.1")  # the decimal as written (what the certified route encloses)
        z, zw, zn = ctx.zeta(s), ctx.zeta(s, W + 1), ctx.zeta(s, n + 1)
        return (z - zw) / (z - zn), (zw - zn) / (z - zn)
    if text == "2*cos(pi*d/3 + 1)":  # period 6: each residue's weight times its exact count in the range
        w = [ctx.exp(2 * ctx.cos(ctx.pi * k / 3 + 1)) for k in range(6)]

        def part(a, c):  # sum over a <= k < c, without the cancellation of total(c) - total(a)
            return ctx.fsum(w[r] * ((c - 1 - r) // 6 - (a - 1 - r) // 6) for r in range(6))

        S, T = part(0, W), part(W, n)
        return S / (S + T), T / (S + T)
    if text in ("sqrt(d)", "exp(d/1000)") and n > 10**5 and W < n // 2:  # increasing: bounds of the two sides
        b = (lambda x: ctx.sqrt(x)) if text == "sqrt(d)" else (lambda x: ctx.exp(x / 1000))
        log_S_max = ctx.log(W) + b(ctx.mpf(W - 1))
        log_T_min = b(ctx.mpf(min(n - 1, 10**6)))  # one term of T (b increases)
        if log_T_min - log_S_max > 746:
            return ctx.mpf(0), ctx.mpf(1)  # the masses lie within 2^-1074 of these
    return None


def first_call(f):
    """``f`` timed as a first call at its range: the per-range memos are cleared before it runs."""

    def call():
        _bias_tail._PROOFS.clear()
        _bias_module._without_negligible_terms.cache_clear()
        return f()

    return call


def run(quick, reps):
    ctx = mpmath.MPContext()
    ctx.dps = 40
    ks = [6, 18] if quick else [3, 6, 9, 12, 15, 18]
    ns = [10**k for k in ks] + [int(1e300)]
    base_row = np.linspace(-30.0, 0.0, 4096)

    def baseline():
        top = base_row.max()
        return float(top + np.log(np.sum(np.exp(base_row - top))))

    rows = []
    for text in BIASES:
        B = Bias(text)
        for n in ns:
            # n - 1e5: a distant range short against its start (Theorem 15h), from n = 1e9 on
            for W in sorted({64, max(1, n // 10), n - 1} | ({n - 10**5} if n >= 10**9 else set())):
                if W >= n:
                    continue
                funcs = {"baseline": baseline}
                funcs["float"] = first_call(lambda B=B, W=W, n=n: B.window_mass(W, n))
                funcs["cert"] = first_call(lambda B=B, W=W, n=n: B.mass_enclosures(W, n))
                try:
                    times, out = interleaved(funcs, reps)
                except ValueError as exc:  # a refusal (DomainError), recorded with its first words
                    rows.append(dict(bias=text, n=label(n), W=wlabel(W, n), route="refused: " + str(exc)[:160]))
                    print(json.dumps(rows[-1]), flush=True)
                    continue
                enc = out["cert"]
                m = enc.window_mass
                width = (m.hi - m.lo) / m.hi if m.hi > 0 else 0.0
                ref = reference(text, W, n, ctx)
                row = dict(bias=text, n=label(n), W=wlabel(W, n), route=enc.route, float_s=times["float"],
                           cert_s=times["cert"], float_ratio=times["float"] / times["baseline"],
                           cert_ratio=times["cert"] / times["baseline"], width=width, value=out["float"])
                if ref is not None:
                    mr, Dr = (float(x) for x in ref)
                    row["contains"] = bool(m.lo <= mr <= m.hi and enc.distant_mass.lo <= Dr <= enc.distant_mass.hi)
                    row["float_ulps"] = abs(out["float"] - mr) / (np.finfo(float).eps * abs(mr)) if mr else abs(out["float"])
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def markdown(rows):
    head = "| bias | n | W | route | float ms | cert ms | float/base | cert/base | rel. width | ref |\n" + "|---" * 10 + "|\n"
    lines = []
    for r in rows:
        if "float_s" not in r:
            lines.append(f"| `{r['bias']}` | {r['n']} | {r['W']} | {r['route']} | | | | | | |")
            continue
        ref = "" if "contains" not in r else ("inside" if r["contains"] else "**OUTSIDE**")
        lines.append(f"| `{r['bias']}` | {r['n']} | {r['W']} | {r['route']} | {1e3 * r['float_s']:.2f} | {1e3 * r['cert_s']:.1f} | "
                     f"{r['float_ratio']:.1f} | {r['cert_ratio']:.0f} | {r['width']:.1e} | {ref} |")
    return head + "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=None)
    args = p.parse_args(argv)
    reps = args.reps or (1 if args.quick else 3)
    rows = run(args.quick, reps)
    timed = [r for r in rows if "float_s" in r]
    worst_f = max(timed, key=lambda r: r["float_s"])
    worst_c = max(timed, key=lambda r: r["cert_s"])
    outside = [r for r in rows if r.get("contains") is False]
    refused = [r for r in rows if "float_s" not in r]
    print(f"points {len(rows)}, refused {len(refused)}, references outside {len(outside)}; slowest float "
          f"{1e3 * worst_f['float_s']:.2f} ms ({worst_f['bias']}, n={worst_f['n']}, W={worst_f['W']}), slowest certified "
          f"{1e3 * worst_c['cert_s']:.1f} ms ({worst_c['bias']}, n={worst_c['n']}, W={worst_c['W']})")
    ulps = [r["float_ulps"] for r in rows if "float_ulps" in r and math.isfinite(r["float_ulps"])]
    if ulps:
        print(f"worst float error against a reference: {max(ulps):.1f} ulps")
    if not args.quick:
        with open("bench/results/bias_any_length.json", "w") as fh:
            json.dump(rows, fh, indent=1)
        with open("bench/results/bias_any_length.md", "w") as fh:
            fh.write(markdown(rows))
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
