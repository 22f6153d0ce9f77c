"""Every quantity at any length: time, width and route over n = 10^k (k = 3..18) and 1e300.

For the OT prior's window mass (float and certified, rho in {0.1, 0.5, 0.9, 0.99, 0.999,
1 - 1e-6}), every registered encoding's window mass, and three user biases, each point
records the time of one call (the best of a few, in this process), the relative width of a
proved enclosure where the route gives one, and the route that answered (or the refusal).
Ratios against the exact OT route are taken in the same process where both run.

Run: ``python bench/bench_any_length.py --quick`` (the sweep, about a minute on one core) or
without ``--quick`` (adds the exact OT route at n = 1e6 for the before/after ratio).
"""

from __future__ import annotations

import argparse
import json
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
    "yarn": dict(scale=4.0, logit_bound=1.0),
    "t5": {},
}
BIASES = ("-0.7*log(1+d) - 0.01*sqrt(d)", "-1.5*log(1+d)", "-0.05*d + 0.3*log(1+d)")
W = 64


def timed(func, repeat=3):
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = func()
        best = min(best, time.perf_counter() - start)
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


def sweep_encodings(ns):
    rows = []
    for name, kw in ENCODINGS.items():
        enc = get(name, **kw)
        for n in ns:
            try:
                t, m = timed(lambda n=n, enc=enc: enc.window_mass(W, n), 1)
                route, width = "answered", None
                if name == "log-distance":
                    e = otprior.window_mass_bounds(W, n, 1.3)
                    width = (e.hi - e.lo) / e.hi
                    route = "O(1) Euler-Maclaurin"
                elif name == "kerple-power":
                    ball = enc._mass_balls(W, n)[0]
                    width = float(2 * ball.rad() / ball.mid())
                    route = "Theorem 12"
                rows.append(dict(what=name, n=label(n), route=route, float_s=t, width=width, value=float(np.ravel(m)[0])))
            except (ValueError, otprior.PrecisionError) as err:
                rows.append(dict(what=name, n=label(n), route=f"refused: {str(err)[:70]}", float_s=None, width=None))
    return rows


def sweep_biases(ns, quick):
    rows = []
    for expr in BIASES:
        enc = get("bias", expr=expr)
        for n in ns:
            if quick and n > 1 << 22 and n not in (10**7, 10**9, 10**18, int(1e300)):
                continue
            try:
                t, m = timed(lambda n=n, enc=enc: enc.window_mass(W, n), 1)
                route = "direct" if n <= 1 << 16 else "direct head + Theorem 13 tail (direct where the head reaches n)"
                rows.append(dict(what=f"bias {expr}", n=label(n), route=route, float_s=t, value=float(m)))
            except (ValueError, otprior.PrecisionError) as err:
                rows.append(dict(what=f"bias {expr}", n=label(n), route=f"refused: {str(err)[:70]}", float_s=None))
    return rows


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
    args = parser.parse_args()
    ns = lengths(args.quick)
    results = dict(
        ot=sweep_ot(ns),
        encodings=sweep_encodings(ns),
        biases=sweep_biases(ns, args.quick),
        vectorised=vectorised_ratio(),
        exact_vs_auto=exact_ratio(not args.quick),
    )
    for group in ("ot", "encodings", "biases"):
        print(f"\n== {group} (W = {W}) ==")
        for r in results[group]:
            fs = "-" if r.get("float_s") is None else f"{r['float_s'] * 1e3:8.2f} ms"
            cs = f" cert {r['cert_s'] * 1e3:7.2f} ms" if r.get("cert_s") is not None else ""
            cs += f" dil {r['dil_s'] * 1e3:7.2f} ms" if r.get("dil_s") is not None else ""
            wd = f" width {r['width']:.2g}" if r.get("width") is not None else ""
            wd += f" float-err {r['err_units']:.2g} w" if r.get("err_units") is not None else ""
            print(f"{r['what']:<48} n={r['n']:<6} {fs}{cs}{wd}  [{r['route']}]")
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
