"""Narrow bumps on a log-decay: the float route of a user's ``Bias`` against an exact direct sum and mpmath.

Two families (``proofs/closed_form_tails.md``, Theorems 15g(vii)-(viii) and 15l): a bump ``5 e^{-((d - c)/w)^2}`` next
to the end of the range (``c = n - 2, n - 5``, widths 5 and 3; windows 1-3 from ``n``), where ``b`` read in double
cancels (``d/w - c/w``), at ``n = 1e5, 1e6, 3e6``; and two to four narrow bumps at ``n = 2e6`` with windows 64, 1e6 and
``n - 10``. Each point records the process CPU time of a first call of ``distant_mass`` (the per-range memos cleared)
and of the exact O(n) route timed interleaved with it in this process (every ``b(k)``, ``k < n``, by numpy, then a
log-sum-exp: what Theorem 13's direct fallback does at least), their ratio, whether the float answered without that
fallback, and the relative error against mpmath in a private context (Hurwitz zeta for the log-decay, the bumps'
terms one by one).

Run: ``python bench/bench_bias_bumps.py`` (a few minutes; writes ``bench/results/bias_bumps.json`` and ``.md``) or
``--quick`` (n = 1e5 and two multi-bump points; prints only).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import mpmath
import numpy as np

from otprior import DomainError
from otprior.encodings import Bias, _bias_tail
from otprior.encodings import bias as _bias_module

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared timing
from _timing import interleaved  # noqa: E402


def text_of(alpha, bumps):
    return f"-{alpha}*log(d+1)" + "".join(f" + {h}*exp(-((d-{c})/{w})**2)" for h, c, w in bumps)


def reference(alpha, bumps, W, n, ctx):
    """``D_n(W)`` at 40 digits: Hurwitz zeta, and each bump's terms within 60 widths of its centre."""
    a = ctx.mpf(alpha)

    def b(k):
        k = ctx.mpf(k)
        return -a * ctx.log(k + 1) + ctx.fsum(ctx.mpf(h) * ctx.exp(-((k - ctx.mpf(c)) / ctx.mpf(w)) ** 2) for h, c, w in bumps)

    def side(lo, hi):
        total = ctx.zeta(a, lo + 1) - ctx.zeta(a, hi + 2)
        ks = set()
        for _, c, w in bumps:
            r = int(60 * float(w)) + 2
            ks.update(range(max(lo, int(c) - r), min(hi, int(c) + r) + 1))
        return total + ctx.fsum(ctx.exp(b(k)) - ctx.exp(-a * ctx.log(ctx.mpf(k) + 1)) for k in ks)

    S, T = side(0, W - 1), side(W, n - 1)
    return T / (S + T)


def points(quick):
    out = []
    for n in (10**5,) if quick else (10**5, 10**6, 3 * 10**6):
        for c, w in ((n - 2, 5), (n - 5, 3)):
            for off in (1, 2, 3):
                out.append(("1.1", [(5, c, w)], n - off, n))
    multi = [("1.1", [(5, 999995, 5), (3, 500000, 7)]), ("1.1", [(5, 999995, 5), (3, 500000, 7), (4, 1500000, 3)]),
             ("0.7", [(5, 1999995, 5), (3, 1000003, 7), (4, 250000, 3)]),
             ("1.1", [(6, 999999, 2), (5, 1000001, 2), (4, 1999999, 1), (3, 333333, 4)])]
    for alpha, bumps in multi[:1] if quick else multi:
        for W in (64, 10**6) if quick else (64, 10**6, 2 * 10**6 - 10):
            out.append((alpha, bumps, W, 2 * 10**6))
    return out


def run(quick, reps):
    ctx = mpmath.MPContext()
    ctx.dps = 40
    rows = []
    used = []
    original = _bias_module.Bias._monotone_masses

    def watched(self, *args, **kwargs):  # records Theorem 13's O(n) fallback
        used.append(True)
        return original(self, *args, **kwargs)

    _bias_module.Bias._monotone_masses = watched
    try:
        for alpha, bumps, W, n in points(quick):
            text = text_of(alpha, bumps)
            B = Bias(text)
            fn = _bias_module._numpy_fns(*reversed(B._sym))[0]

            def first_call(B=B, W=W, n=n):
                _bias_tail._PROOFS.clear()
                _bias_module._without_negligible_terms.cache_clear()
                return B.distant_mass(W, n)

            def exact(fn=fn, W=W, n=n):  # every term in numpy, then a log-sum-exp of each side
                v = np.asarray(fn(np.arange(n, dtype=float)), dtype=float)
                top = v.max()
                s, t = np.sum(np.exp(v[:W] - top)), np.sum(np.exp(v[W:] - top))
                return float(t / (s + t))

            used.clear()
            try:
                times, out = interleaved({"float": first_call, "exact": exact}, reps)
            except DomainError as exc:
                rows.append(dict(bias=text, n=n, W=W, refused=str(exc)[:120]))
                print(json.dumps(rows[-1]), flush=True)
                continue
            ref = reference(alpha, bumps, W, n, ctx)
            rows.append(dict(bias=text, n=n, W=W, float_s=times["float"], exact_s=times["exact"],
                             ratio=times["float"] / times["exact"], fallback=bool(used),
                             rel_error=abs(float((out["float"] - ref) / ref)),
                             exact_rel_error=abs(float((out["exact"] - ref) / ref))))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        _bias_module.Bias._monotone_masses = original
    return rows


def markdown(rows):
    head = ("| bias | n | W | float ms | exact ms | float/exact | O(n) fallback | float rel. error | exact rel. error |\n"
            + "|---" * 9 + "|\n")
    lines = []
    for r in rows:
        if "refused" in r:
            lines.append(f"| `{r['bias']}` | {r['n']} | {r['W']} | refused: {r['refused']} | | | | | |")
            continue
        lines.append(f"| `{r['bias']}` | {r['n']} | {r['W']} | {1e3 * r['float_s']:.1f} | {1e3 * r['exact_s']:.1f} | "
                     f"{r['ratio']:.2f} | {'yes' if r['fallback'] else 'no'} | {r['rel_error']:.1e} | "
                     f"{r['exact_rel_error']:.1e} |")
    return head + "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=None)
    args = p.parse_args(argv)
    rows = run(args.quick, args.reps or (1 if args.quick else 3))
    timed = [r for r in rows if "float_s" in r]
    print(f"points {len(rows)}, refused {len(rows) - len(timed)}, O(n) fallback {sum(r['fallback'] for r in timed)}; "
          f"worst float error {max(r['rel_error'] for r in timed):.2e}; float/exact median "
          f"{float(np.median([r['ratio'] for r in timed])):.3f}, max {max(r['ratio'] for r in timed):.3f}")
    if not args.quick:
        Path("bench/results/bias_bumps.json").write_text(json.dumps(rows, indent=1))
        Path("bench/results/bias_bumps.md").write_text(markdown(rows))
    return 1 if any(r["rel_error"] > 2.0**-37 for r in timed) else 0


if __name__ == "__main__":
    sys.exit(main())
