"""Every quantity at any length: time, width and route over n = 10^k (k = 3..18) and 1e300.

For the OT prior's window mass (float and certified, rho in {0.1, 0.5, 0.9, 0.99, 0.999,
1 - 1e-6}), every registered encoding's window mass, and three user biases, each point
records the time of one call (the best of a few, in this process), the relative width of a
proved enclosure where the route gives one, and the route that answered (or the refusal).
Ratios against the exact OT route are taken in the same process where both run.

Run: ``python bench/bench_any_length.py --quick`` (the sweep, about a minute on one core) or
without ``--quick`` (adds the exact OT route at n = 1e6 for the before/after ratio);
``--only-encodings`` runs the encodings, user biases and ``margin_for`` alone (process CPU time, best
of 3; references from mpmath in a private context) and prints a summary per family.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import otprior
from otprior.encodings import get

RHOS = (0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-6)
ENCODINGS = {
    "alibi": dict(slope=0.3),
    "cable": dict(min_increment=0.05),
    "fire": {},
    "log-distance": dict(alpha=1.3),
    "kerple-log": dict(r1=1.5, r2=0.5),
    "kerple-power": dict(r1=0.05, r2=0.4),
    "causal-ot": dict(rho=0.5),
    "nope": {},
    "rope": dict(logit_bound=1.0),
    "yarn": dict(factor=4.0, logit_bound=1.0),
    "t5": dict(values=tuple(-0.25 * k for k in range(32))),  # a learned-looking decreasing bucket table
}
BIASES = ("-0.7*log(1+d) - 0.01*sqrt(d)", "-1.2*log(1+d)", "-0.05*d + 0.3*log(1+d)")
W = 64


def timed(func, repeat=3):
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = func()
        best = min(best, time.perf_counter() - start)
    return best, out


def cpu_timed(func, repeat=3):
    """Like :func:`timed` but the process's CPU time (best of ``repeat``): the encoding, bias and
    margin rows are measured on a shared machine whose load makes wall time a measure of the load."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        out = func()
        best = min(best, time.process_time() - start)
    return best, out


def lengths(quick):
    ks = list(range(3, 19))
    return [10**k for k in ks] + [int(1e300)]


def label(n):
    return "1e300" if n > 10**200 else f"1e{len(str(n)) - 1}"


def sweep_ot(ns):
    """OT window mass (float and certified) and dilution bound. ``err_units``: the float value's
    distance to the certified enclosure's midpoint in units of the enclosure's width (the
    documented bound of the float value on the bounds route is that width: at most 0.5 means
    the float lies inside the enclosure)."""
    rows = []
    for rho in RHOS:
        for n in ns:
            t_f, (m, route) = timed(lambda n=n, rho=rho: otprior.ot_window_mass(W, n, rho, return_route=True), 3)
            t_c, e = timed(lambda n=n, rho=rho: otprior.ot_window_mass(W, n, rho, certified=True), 1)
            t_d, _ = timed(lambda n=n, rho=rho: otprior.ot_dilution_bound(W, n, rho, 0.1), 1)
            width = (e.hi - e.lo) / e.hi if e.hi > 0 else 0.0
            err_units = abs(m - 0.5 * (e.lo + e.hi)) / (e.hi - e.lo) if e.hi > e.lo else (0.0 if m == e.lo else float("inf"))
            rows.append(
                dict(what=f"ot rho={rho:g}", n=label(n), route=route, float_s=t_f, cert_s=t_c, dil_s=t_d, width=width,
                     value=m, lo=e.lo, hi=e.hi, err_units=err_units)
            )
    return rows


def _ulps_rel(x, ref):
    """|x - ref| / (eps |ref|): the float route's error in units of the double spacing."""
    return abs(x - ref) / (np.finfo(float).eps * abs(ref)) if ref else abs(x) / np.finfo(float).tiny


def _mp_reference(name, kw, n, ctx):
    """An independent value of m_n(64) at 30 digits (mpmath, private context), or None.

    log-distance: Hurwitz zeta; kerple-power: direct terms to 4096 then mpmath's own Euler-Maclaurin
    (sumem); alibi: geometric closed form. Nothing of otprior is called."""
    if name == "log-distance":
        a = ctx.mpf(kw["alpha"])
        H = ctx.zeta(a, 1) - ctx.zeta(a, 1 + W)
        return float(H / (ctx.zeta(a, 1) - ctx.zeta(a, 1 + n)))
    if name == "alibi":
        q = ctx.exp(-ctx.mpf(kw["slope"]))
        return float((1 - q**W) / (1 - q ** ctx.mpf(n)))
    if name == "kerple-power" and n <= 10**18:
        r1, r2 = ctx.mpf(kw["r1"]), ctx.mpf(kw["r2"])

        def f(x):
            return ctx.exp(-r1 * ctx.mpf(x) ** r2)

        H = ctx.fsum(f(k) for k in range(W))
        head = ctx.fsum(f(k) for k in range(W, min(n, 4096)))
        tail = ctx.sumem(f, [4096, n - 1]) if n > 4096 else 0
        return float(H / (H + head + tail))
    return None


def _certified(name, enc, kw, n):
    """(enclosure lo, hi, route) of m_n(64) where the family has a proved route, else None."""
    if name == "log-distance":
        e = otprior.window_mass_bounds(W, n, kw["alpha"])
        return e.lo, e.hi, "Hurwitz/Euler-Maclaurin balls (Theorem 8)"
    if name == "kerple-power":
        from otprior._balls import arb_precision, enclosure_from_arb

        m = enc._mass_balls(W, n)[0]
        with arb_precision(128):
            e = enclosure_from_arb(m)  # outward-rounded float ends
        return e.lo, e.hi, "Theorem 12 / 15 balls"
    return None


def sweep_encodings(ns):
    """Every registered encoding: float window and distant mass, the certified enclosure where the
    family has one, an independent mpmath reference where it is computable, and D_oo(64)."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = 30
    rows = []
    for name, kw in ENCODINGS.items():
        print(f"  {name} ...", file=sys.stderr, flush=True)
        enc = get(name, **kw)
        try:
            t_lim, lim = timed(lambda enc=enc: otprior.classify(enc).limit_distant_mass(W), 1)
        except (ValueError, otprior.PrecisionError) as err:
            t_lim, lim = None, f"refused: {str(err)[:60]}"
        for n in ns:
            try:
                t, m = cpu_timed(lambda n=n, enc=enc: enc.window_mass(W, n), 3)
                t_d, _ = cpu_timed(lambda n=n, enc=enc: enc.distant_mass(W, n), 3)
                m = float(np.ravel(m)[0])
                row = dict(what=name, n=label(n), route="float", float_s=max(t, t_d), value=m, limit=lim, limit_s=t_lim)
                cert = _certified(name, enc, kw, n)
                if cert is not None:
                    t_c, (lo, hi, croute) = cpu_timed(lambda n=n, enc=enc, name=name, kw=kw: _certified(name, enc, kw, n), 3)
                    row.update(cert_s=t_c, width=(hi - lo) / hi if hi > 0 else 0.0, route=croute, float_in=bool(lo <= m <= hi))
                ref = _mp_reference(name, kw, n, ctx) if n <= 10**18 or name != "kerple-power" else None
                if ref is not None:
                    row.update(ref=ref, float_ulps=_ulps_rel(m, ref))
                    if cert is not None:
                        row["ref_in"] = bool(cert[0] <= ref <= cert[1])
                rows.append(row)
            except (ValueError, otprior.PrecisionError) as err:
                rows.append(dict(what=name, n=label(n), route=f"refused: {str(err)[:70]}", float_s=None, width=None))
    return rows


NASTY = "-0.5*log(1+d) + 2*exp(-d/10)*sin(d/3) - 0.02*sqrt(d)"  # not monotone at the start; sqrt/exp/sin mix


def _bias_reference(expr, n, ctx):
    """m_n(64) of a user bias at 30 digits: 4096 direct terms, then mpmath's sumem (private context),
    from the expression text evaluated on mpmath numbers (the bench's own constant strings)."""
    env = {"log": ctx.log, "sqrt": ctx.sqrt, "exp": ctx.exp, "sin": ctx.sin, "cos": ctx.cos}
    code = compile(expr, "<bias>", "eval")

    def f(x):
        return ctx.exp(eval(code, {"__builtins__": {}}, {**env, "d": ctx.mpf(x)}))  # noqa: S307

    H = ctx.fsum(f(k) for k in range(W))
    head = ctx.fsum(f(k) for k in range(W, min(n, 4096)))
    tail = ctx.sumem(f, [4096, n - 1]) if n > 4096 else 0
    return float(H / (H + head + tail))


def sweep_biases(ns, quick):
    """Three user biases and a nasty one: float and certified (Theorem 15) window mass, width, route,
    against an mpmath reference up to n = 1e18."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = 30
    rows = []
    for expr in BIASES + (NASTY,):
        print(f"  bias {expr} ...", file=sys.stderr, flush=True)
        enc = get("bias", expr=expr)
        enc.window_mass(W, 10**7)  # sympy's derivatives lambdified once per expression (cached)
        try:  # D_oo(64): wall time (the verdict and the limit run in a budgeted child process)
            t_lim, lim = timed(lambda enc=enc: otprior.classify(enc).limit_distant_mass(W), 1)
        except (ValueError, otprior.PrecisionError) as err:
            t_lim, lim = None, f"refused: {str(err)[:60]}"
        rows.append(dict(what=f"bias {expr}", n="oo", route=f"D_oo(64) = {lim} (wall {t_lim})", float_s=None, limit=lim, limit_s=t_lim))
        for n in ns:
            what = f"bias {expr}"
            try:
                t, m = cpu_timed(lambda n=n, enc=enc: enc.window_mass(W, n), 3)
                t_c, out = cpu_timed(lambda n=n, enc=enc: enc.mass_enclosures(W, n), 3)
                e = out.window_mass
                row = dict(what=what, n=label(n), route=out.route, float_s=t, cert_s=t_c, value=float(m),
                           width=(e.hi - e.lo) / e.hi, float_in=bool(e.lo <= m <= e.hi), float_ulps_vs_cert=_ulps_rel(m, e.mid))
                if n <= (10**9 if quick else 10**18):
                    ref = _bias_reference(expr, n, ctx)
                    row.update(ref=ref, ref_in=bool(e.lo <= ref <= e.hi), float_ulps=_ulps_rel(m, ref))
                rows.append(row)
            except (ValueError, otprior.PrecisionError) as err:
                rows.append(dict(what=what, n=label(n), route=f"refused: {str(err)[:70]}", float_s=None))
    return rows


def sweep_margin():
    """margin_for over offsets 1e-300 .. 1e300, tol 0.05 .. 1e-300, both growths (Lemma 9d)."""
    rows = []
    for offset in (1e-300, 1.0, 1e15, 1e23, 1e300):
        for tol in (0.05, 1e-16, 1e-300):
            for growth in ("absolute", "relative"):
                what = f"margin o={offset:g} tol={tol:g} {growth}"
                try:
                    t, r = cpu_timed(lambda o=offset, tol=tol, g=growth: otprior.margin_for(W, (512, 8192), tol, growth=g, offset=o), 3)
                    rows.append(dict(what=what, n="-", route=f"margin {r.margin:.6g} ({r.evaluations} balls)", float_s=t))
                except otprior.NoMarginError as err:
                    t, _ = cpu_timed(lambda o=offset, tol=tol, g=growth: _no_margin(tol, g, o), 3)
                    rows.append(dict(what=what, n="-", route=f"NoMarginError: {str(err)[-70:]}", float_s=t))
    return rows


def summary(results):
    """Worst float / certified time and width per family, misses, and the float error against the
    references (in ulps, and for log-distance in units of its stated bound 8 eps (1 + |ln m|))."""
    print("\n== summary ==")
    fams = {}
    for group in ("encodings", "biases", "margin"):
        for r in results.get(group, []):
            fam = r["what"] if group != "margin" else "margin_for"
            f = fams.setdefault(fam, dict(float=0.0, cert=0.0, width=0.0, refused=0, ref_out=0, float_out=0, ulps=0.0, units=0.0))
            if r.get("float_s") is None:
                f["refused"] += r.get("n") != "oo"
                if r.get("limit_s") is not None:
                    f["limit"] = r["limit_s"]
                continue
            f["float"] = max(f["float"], r["float_s"])
            f["cert"] = max(f["cert"], r.get("cert_s") or 0.0)
            f["width"] = max(f["width"], r.get("width") or 0.0)
            f["ref_out"] += r.get("ref_in") is False
            f["float_out"] += r.get("float_in") is False
            if r.get("float_ulps") is not None:
                f["ulps"] = max(f["ulps"], r["float_ulps"])
                if r["what"] == "log-distance":
                    bound = 8 * (1 + abs(np.log(r["ref"])))
                    f["units"] = max(f["units"], r["float_ulps"] / bound)
    for fam, f in fams.items():
        units = f" = {f['units']:.3f} of the stated bound" if f["units"] else ""
        units += f"  D_oo {f['limit'] * 1e3:.0f} ms wall" if f.get("limit") else ""
        print(
            f"{fam:<60} float <= {f['float'] * 1e3:7.2f} ms  cert <= {f['cert'] * 1e3:7.2f} ms  width <= {f['width']:.2g}  "
            f"refused {f['refused']}  ref outside {f['ref_out']}  float outside {f['float_out']}  float err <= {f['ulps']:.1f} ulp{units}"
        )


def _no_margin(tol, growth, offset):
    try:
        otprior.margin_for(W, (512, 8192), tol, growth=growth, offset=offset)
    except otprior.NoMarginError:
        return None


def vectorised_ratio():
    """window_mass over 1e5 lengths against a direct Hurwitz-zeta route (scipy), same process."""
    from scipy.special import zeta

    n = np.arange(64, 64 + 10**5)

    def direct():
        H = zeta(1.3, 1) - zeta(1.3, 65)
        T = zeta(1.3, 65) - zeta(1.3, n + 1)
        return H / (H + T)

    t_ref, _ = timed(direct, 5)
    t_ours, _ = timed(lambda: otprior.window_mass(64, n, 1.3), 5)
    return dict(zeta_s=t_ref, ours_s=t_ours, ratio=t_ours / t_ref)


def exact_ratio(full):
    """The exact OT route (certified, an independent algorithm: Theorem 2's root bisected in Arb)
    against the bounds route (Lemma 4.3) where both run: containment, widths and times (same process)."""
    out = []
    points = [(10**4, 0.1), (10**4, 0.5), (10**4, 0.9), (10**4, 0.99), (10**4, 0.999)]
    points += [(10**5, 0.5), (10**5, 0.9)] if full else []
    for n, rho in points:
        t_exact, ex = timed(lambda n=n, rho=rho: otprior.ot_window_mass(W, n, rho, certified=True, method="exact"), 1)
        t_bnd, e = timed(lambda n=n, rho=rho: otprior.ot_window_mass(W, n, rho, certified=True, method="bounds"), 1)
        f = otprior.ot_window_mass(W, n, rho, method="bounds")
        out.append(
            dict(n=n, rho=rho, exact_s=t_exact, bounds_s=t_bnd, exact=(ex.lo, ex.hi), bounds=(e.lo, e.hi),
                 exact_inside_bounds=bool(e.lo <= ex.lo and ex.hi <= e.hi), float_inside_exact_width=abs(f - ex.mid) / (e.hi - e.lo))
        )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the sweep only (no exact OT route at n = 1e6)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--only-encodings", action="store_true", help="encodings, user biases and margin_for only")
    args = parser.parse_args()
    ns = lengths(args.quick)
    if args.only_encodings:
        results = dict(encodings=sweep_encodings(ns), biases=sweep_biases(ns, args.quick), margin=sweep_margin())
    else:
        results = dict(
            ot=sweep_ot(ns),
            encodings=sweep_encodings(ns),
            biases=sweep_biases(ns, args.quick),
            margin=sweep_margin(),
            vectorised=vectorised_ratio(),
            exact_vs_auto=exact_ratio(not args.quick),
        )
    groups = ("encodings", "biases", "margin") if args.only_encodings else ("ot", "encodings", "biases", "margin")
    for group in groups:
        print(f"\n== {group} (W = {W}) ==")
        for r in results[group]:
            fs = "-" if r.get("float_s") is None else f"{r['float_s'] * 1e3:8.2f} ms"
            cs = f" cert {r['cert_s'] * 1e3:7.2f} ms" if r.get("cert_s") is not None else ""
            cs += f" dil {r['dil_s'] * 1e3:7.2f} ms" if r.get("dil_s") is not None else ""
            wd = f" width {r['width']:.2g}" if r.get("width") is not None else ""
            wd += f" float-err {r['err_units']:.2g} w" if r.get("err_units") is not None else ""
            rf = ""
            if r.get("ref") is not None:
                rf = f" ref {'in' if r.get('ref_in', True) else 'OUT'} ({r['float_ulps']:.1f} ulp)"
            print(f"{r['what']:<48} n={r['n']:<6} {fs}{cs}{wd}{rf}  [{r['route']}]")
    if args.only_encodings:
        summary(results)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=1, default=str)
        return
    print("\nvectorised window_mass over 1e5 lengths / direct Hurwitz zeta:", results["vectorised"])
    ot = results["ot"]
    slow_f, slow_c, slow_d = (max(r[k] for r in ot) * 1e3 for k in ("float_s", "cert_s", "dil_s"))
    print("OT: worst float error in units of the certified width:", max(r["err_units"] for r in ot),
          f"| slowest float {slow_f:.2f} ms, certified {slow_c:.2f} ms, dilution {slow_d:.2f} ms")
    print("exact OT route (certified) vs the bounds route where both run:")
    for r in results["exact_vs_auto"]:
        print(" ", r)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
