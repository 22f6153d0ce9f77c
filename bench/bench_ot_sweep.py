"""The OT prior at any length: the sweep of ``ot_window_mass`` / ``ot_dilution_bound`` over n and rho.

For n = 10^k (k = 3..18) and 1e300, rho in {0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-6} and windows
W = 64 and 4096 (every point with W < n), 10^5 (rho in {0.5, 0.99}), and windows next to n (n/2, n - 10^6, n - 1000,
n - 10, n - 1 at every n >= 1e6 and every rho; written ``n-k``), each point records:

* the route of the float and of the certified value (``exact`` or ``bounds``);
* CPU time (``time.process_time``) and wall time of the float call, the certified call and
  ``ot_dilution_bound(W, n, rho, 1.0)``: medians over repetitions run interleaved (float,
  certified, dilution, float, ...), so the three see the same machine load;
* the certified enclosure's relative width;
* an independent reference where one can be computed: Theorem 2's root bisected by the sign
  test of Lemma 2.1 in mpmath (private context, ``n = 1000``, and ``n = 1e4`` where the certified value
  takes the exact route itself, rho <= 0.5), or the exact certified route
  (``method="exact"``, Arb, ``n <= 1e5``, rho <= 0.9; near rho = 1, ``4096 < n <= 1e5``, the exact
  route is Lemma 4.6's certified prior, another theorem than Lemma 4.3); ``contains`` says whether the
  certified enclosure holds it;
* the float's error in units of its documented bound: ``|float - ref| / (width + (min(W, 4096) + D + ln n /
  (1 - rho)) eps m)`` with ``ref`` the reference (or, where there is none, the distance of the
  float outside the certified enclosure), ``D = min(512, n/8)`` (``ot_window_mass``'s Notes).

Near rho = 1 (``near_one``): ``ot_prior`` at n = 10 .. 1e5 and 1 - rho in {1e-4 .. 1e-9, 1e-15}: the
route (Lemma 4.6 or the recurrence at Lemma 4.7's precision), CPU time, the widest relative radius of
its balls, the measured loss ``log10_condition`` against Lemma 4.7's bound, and, for n <= 30, whether
every ball contains Theorem 2's root bisected in mpmath (private context) at more digits than the
recurrence loses; refusals are timed too (they are decided before any work).

``--baseline`` (full mode) also times the exact OT prior at n = 1e6 (rho = 0.5 and 0.99) and the
float window mass there against the code of commit 393fb4b (before the any-length work),
loaded from git into a temporary package in this same process, interleaved.

``--compare REV`` (alone: no sweep) times the float value ``ot_window_mass(W, n, rho)`` of this checkout against
the code of git revision ``REV`` (loaded into a temporary package in this same process, interleaved, each call
cold), at every n = 10^k (k = 6..18) and 1e300, rho in RHOS, W in {64, 4096, 1e5, n/2, n - 1e6, n - 1000, n - 10,
n - 1}: the CPU-time ratio (now / REV) per class of W (median, worst), the largest difference of the values (absolute
and relative) and the load; windows answered before any work (Corollary 4.8: ``(n - W) 2^54 <= n``) form their own
class. Writes ``bench/results/ot_float_compare.json`` and ``.md``.

Run: ``python bench/bench_ot_sweep.py --quick`` (seconds; a few points) or
``python bench/bench_ot_sweep.py [--baseline]`` (writes ``bench/results/ot_sweep.json`` and
``bench/results/ot_sweep.md``), or ``python bench/bench_ot_sweep.py --compare cdeccc2 [--reps 7]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import otprior

RHOS = (0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-6)
EPS = 2.0**-52
BASELINE_COMMIT = "393fb4b"
HERE = os.path.dirname(os.path.abspath(__file__))


def _load():
    try:
        return os.getloadavg()
    except OSError:
        return None


def _cold():
    """Forget the near-one priors ``ot_prior`` keeps (a small cache per ``(n, rho, dps)``): every timed call
    computes its answer, as a user's first call does."""
    cached = getattr(importlib.import_module("otprior.ot_prior"), "_near_one_cached", None)
    if cached is not None:
        cached.cache_clear()


def _timed(funcs, reps):
    """CPU and wall seconds (medians) of each callable, run interleaved ``reps`` times, each call cold
    (:func:`_cold`)."""
    out = {name: f() for name, f in funcs.items()}  # warm, and the values
    cpu = {name: [] for name in funcs}
    wall = {name: [] for name in funcs}
    for _ in range(reps):
        for name, f in funcs.items():
            _cold()
            c0, w0 = time.process_time(), time.perf_counter()
            f()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return out, {k: statistics.median(v) for k, v in cpu.items()}, {k: statistics.median(v) for k, v in wall.items()}


def mp_window_mass(W, n, rho, dps):
    """m_n(W) from Theorem 2's root bisected by the sign test of Lemma 2.1 (mpmath, private context): the sum of
    the W newest entries of :func:`_mp_prior`."""
    prior, ctx = _mp_prior(n, rho, dps)
    return ctx.fsum(prior[:W])


def _reference(W, n, rho, quick, croute=None):
    if n == 1000 and rho <= (0.5 if quick else 0.999):
        # the recurrence loses log10(Phi_n/Phi_1) digits; 40 more than the certified route measures
        cond = otprior.ot_prior(n, rho).log10_condition
        return float(mp_window_mass(W, n, rho, int(40 + 1.2 * cond))), "mpmath"
    if not quick and croute == "exact" and n <= 10**4 and rho <= 0.5:
        # the certified value took the exact route itself (n <= 1e4): the reference is mpmath's bisection,
        # not that route again (30 digits more than the recurrence loses; about 20 s a point)
        cond = otprior.ot_prior(n, rho).log10_condition
        return float(mp_window_mass(W, n, rho, int(30 + 1.2 * cond))), "mpmath"
    if not quick and n <= 10**5 and rho <= 0.9:
        e = otprior.ot_window_mass(W, n, rho, certified=True, method="exact")
        return (e.lo, e.hi), "exact-certified"
    if not quick and 4096 < n <= 10**5 and 1 - rho < 1e-4:
        # near rho = 1 the exact route is Lemma 4.6's certified prior (another theorem than the
        # bounds route's Lemma 4.3); up to n = 4096 it is the route itself
        e = otprior.ot_window_mass(W, n, rho, certified=True, method="exact")
        return (e.lo, e.hi), "lemma-4.6"
    return None, None


def sweep_point(W, n, rho, reps, quick):
    funcs = {
        "float": lambda: otprior.ot_window_mass(W, n, rho, return_route=True),
        "cert": lambda: otprior.ot_window_mass(W, n, rho, certified=True, return_route=True),
        "dilution": lambda: otprior.ot_dilution_bound(W, n, rho, 1.0),
    }
    out, cpu, wall = _timed(funcs, reps)
    (f, froute), (e, croute) = out["float"], out["cert"]
    ref, ref_kind = _reference(W, n, rho, quick, croute)
    D = max(64, min(512, n // 8))
    # the double steps are at most 4096 (larger windows continue them by the count, or by the recurrence from the
    # oldest key): W + D capped there, else W = n - 1 at n = 1e300 made the unit 1e284
    rounding = (min(W, 4096) + D + math.log(n) / (1 - rho)) * EPS * max(f, 0.0)
    width = e.hi - e.lo
    unit = width + rounding
    if ref is None:
        err = max(0.0, e.lo - f, f - e.hi)
        contains = None
    elif isinstance(ref, tuple):
        err = max(0.0, ref[0] - f, f - ref[1])  # distance of the float from the exact route's enclosure
        contains = bool(e.lo <= ref[0] and ref[1] <= e.hi)
    else:
        err = abs(f - ref)
        contains = bool(e.lo <= ref <= e.hi)
    return {
        "W": _fmt_w(W, n),
        "n": n if n < 10**19 else "1e300",
        "rho": rho,
        "route_float": froute,
        "route_cert": croute,
        "float": f,
        "lo": e.lo,
        "hi": e.hi,
        "rel_width": width / e.hi if e.hi > 0 else 0.0,
        "cpu_float_ms": 1e3 * cpu["float"],
        "cpu_cert_ms": 1e3 * cpu["cert"],
        "cpu_dilution_ms": 1e3 * cpu["dilution"],
        "wall_float_ms": 1e3 * wall["float"],
        "wall_cert_ms": 1e3 * wall["cert"],
        "wall_dilution_ms": 1e3 * wall["dilution"],
        "reference": ref_kind,
        "contains": contains,
        "float_error_units": err / unit if unit > 0 else (0.0 if err == 0 else math.inf),
    }


def _mp_prior(n, rho, dps):
    """pi_n(d), d = 0..n-1, from the bisected root of Theorem 2 (mpmath, private context)."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = dps
    r = ctx.mpf(rho)

    def run(c):
        phi, psi, vs = c, ctx.mpf(0), []
        for k in range(n, 0, -1):
            psi += 1 / phi
            v = psi ** (-r)
            vs.append(v)
            phi -= v
            if k > 1 and phi <= 0:
                return False, vs
        return phi > 0, vs

    lo, hi = ctx.mpf(n), ctx.mpf(n)
    while not run(hi)[0]:
        lo, hi = hi, hi * 2
    for _ in range(int(3.33 * dps) + 8):
        mid = (lo + hi) / 2
        if run(mid)[0]:
            hi = mid
        else:
            lo = mid
    _, vs = run(hi)
    return [v / hi for v in vs], ctx


NEAR_ONE = [(n, 1 - q) for q in (1e-4, 1e-6, 1e-9) for n in (10, 100, 1000, 10**4, 10**5)]
NEAR_ONE += [(10, 1 - 1e-15), (20, 1 - 1e-15), (30, 1 - 1e-15), (10**6, 1 - 1e-6)]


def near_one(reps, quick):
    ot = importlib.import_module("otprior.ot_prior")
    rows = []
    pts = [(n, r) for n, r in NEAR_ONE if n <= 1000] if quick else NEAR_ONE
    for n, rho in pts:
        newton = ot._newton_applies(n, rho)  # Lemma 4.6 planned first (it falls back to 4.7's recurrence)
        times, res, refused = [], None, None
        for _ in range(max(1, reps if n <= 10**4 else 1)):
            _cold()
            c0 = time.process_time()
            try:
                res = otprior.ot_prior(n, rho)
            except ValueError as err:
                refused = str(err)
            times.append(time.process_time() - c0)
        row = {
            "n": n,
            "one_minus_rho": 1 - rho,
            "route": "refused" if refused else ("lemma-4.6" if newton else "recurrence-lemma-4.7"),
            "cpu_s": statistics.median(times),
            "lemma_4_7_digits": ot._recurrence_condition_bound(n, rho) / math.log(10),
        }
        if refused:
            row["refusal"] = refused[:160]
        else:
            row["log10_condition"] = res.log10_condition
            normal = [(lo, h) for lo, h in zip(res.lo, res.hi, strict=True) if lo >= 2.2250738585072014e-308]
            # entries below the smallest normal double (pi_n(n-1) ~ 1e-944 at n = 1000, 1 - rho = 1e-6) are
            # carried by log_prior; their double enclosures [0, tiny] say nothing of the balls' width
            row["max_rel_radius"] = float(max((h - lo) / (h + lo) for lo, h in normal))
            row["underflowed"] = n - len(normal)
            row["log_error_bound"] = res.log_error_bound
            if n <= 30:
                ref, ctx = _mp_prior(n, rho, int(40 + 1.2 * res.log10_condition))
                row["contains"] = all(ctx.mpf(lo) <= x <= ctx.mpf(h) for lo, h, x in zip(res.lo, res.hi, ref, strict=True))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _baseline_module():
    """otprior.ot_prior as of BASELINE_COMMIT, as a temporary package ``otprior_base`` in this process."""
    tmp = tempfile.mkdtemp(prefix="otprior_base_")
    root = os.path.dirname(HERE)
    archive = subprocess.run(["git", "-C", root, "archive", BASELINE_COMMIT, "otprior"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
    os.rename(os.path.join(tmp, "otprior"), os.path.join(tmp, "otprior_base"))
    sys.path.insert(0, tmp)
    return importlib.import_module("otprior_base.ot_prior")


def baseline(reps):
    base = _baseline_module()
    now = importlib.import_module("otprior.ot_prior")
    rows = []
    n = 10**6
    for rho in (0.5, 0.99):
        for what, call in (
            ("ot_prior", lambda mod, rho=rho: mod.ot_prior(n, rho)),
            ("ot_window_mass float W=64", lambda mod, rho=rho: mod.ot_window_mass(64, n, rho)),
        ):
            funcs = {"base": lambda call=call: call(base), "now": lambda call=call: call(now)}
            cpu = {k: [] for k in funcs}
            wall = {k: [] for k in funcs}
            for _ in range(reps):
                for k, f in funcs.items():
                    _cold()
                    c0, w0 = time.process_time(), time.perf_counter()
                    f()
                    cpu[k].append(time.process_time() - c0)
                    wall[k].append(time.perf_counter() - w0)
            med = {k: statistics.median(v) for k, v in cpu.items()}
            medw = {k: statistics.median(v) for k, v in wall.items()}
            rows.append(
                {
                    "what": what,
                    "n": n,
                    "rho": rho,
                    "cpu_base_s": med["base"],
                    "cpu_now_s": med["now"],
                    "cpu_ratio": med["base"] / med["now"],
                    "wall_base_s": medw["base"],
                    "wall_now_s": medw["now"],
                    "wall_ratio": medw["base"] / medw["now"],
                    "reps": reps,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _revision_module(rev):
    """The package ``otprior`` as of git revision ``rev``, as a temporary package in this process."""
    tmp = tempfile.mkdtemp(prefix="otprior_rev_")
    root = os.path.dirname(HERE)
    archive = subprocess.run(["git", "-C", root, "archive", rev, "otprior"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
    name = "otprior_rev_" + "".join(ch for ch in rev if ch.isalnum())
    os.rename(os.path.join(tmp, "otprior"), os.path.join(tmp, name))
    sys.path.insert(0, tmp)
    return importlib.import_module(name)


COMPARE_WINDOWS = ("64", "4096", "1e5", "n/2", "n-1e6", "n-1000", "n-10", "n-1")


def _compare_window(label, n):
    return {"64": 64, "4096": 4096, "1e5": 10**5, "n/2": n // 2, "n-1e6": n - 10**6, "n-1000": n - 1000,
            "n-10": n - 10, "n-1": n - 1}[label]


def compare(rev, reps):
    """The float value against revision ``rev``: ratios of CPU-time medians, interleaved in one process."""
    old = _revision_module(rev)
    old_mod = importlib.import_module(old.__name__ + ".ot_prior")
    now_mod = importlib.import_module("otprior.ot_prior")

    def cold(mod):
        cached = getattr(mod, "_near_one_cached", None)
        if cached is not None:
            cached.cache_clear()

    load_before = _load()
    rows = []
    for n in [10**k for k in range(6, 19)] + [int(1e300)]:
        for rho in RHOS:
            for label in COMPARE_WINDOWS:
                W = _compare_window(label, n)
                if not 0 < W < n:
                    continue
                calls = {"rev": (old_mod, lambda W=W, n=n, rho=rho: old.ot_window_mass(W, n, rho)),
                         "now": (now_mod, lambda W=W, n=n, rho=rho: otprior.ot_window_mass(W, n, rho))}
                vals = {k: f() for k, (_, f) in calls.items()}
                cpu = {k: [] for k in calls}
                for _ in range(reps):
                    for k, (mod, f) in calls.items():
                        cold(mod)
                        c0 = time.process_time()
                        f()
                        cpu[k].append(time.process_time() - c0)
                med = {k: statistics.median(v) for k, v in cpu.items()}
                diff = abs(vals["now"] - vals["rev"])
                rows.append({
                    "W": label, "n": _fmt_n(n), "rho": rho,
                    "class": "pinned" if (n - W) << 54 <= n else label,
                    "cpu_rev_ms": med["rev"] * 1e3, "cpu_now_ms": med["now"] * 1e3,
                    "ratio": med["now"] / med["rev"] if med["rev"] > 0 else float("nan"),
                    "abs_diff": diff, "rel_diff": diff / abs(vals["rev"]) if vals["rev"] else diff,
                    "same_bits": vals["now"] == vals["rev"],
                })
                print(json.dumps(rows[-1]), flush=True)
    load_after = _load()
    lines = [
        f"# The OT float value against revision {rev} (bench/bench_ot_sweep.py --compare)",
        "",
        f"`ot_window_mass(W, n, rho)` (float), n = 1e6..1e18 and 1e300, rho in {list(RHOS)}; ratio = CPU-time median of "
        f"this checkout / that of {rev}, interleaved in one process, {reps} cold calls each. Load average (1, 5, 15 min) "
        f"before: {load_before}, after: {load_after}.",
        "",
        "| class of W | rho | points | ratio median | ratio worst | now ms (worst) | max abs diff | max rel diff | "
        "same bits |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cls in (*COMPARE_WINDOWS, "pinned"):
        for rho in (*RHOS, None):
            sel = [r for r in rows if r["class"] == cls and (rho is None or r["rho"] == rho)]
            if not sel or (cls == "pinned" and rho is not None):
                continue
            ratios = [r["ratio"] for r in sel]
            lines.append(
                f"| {cls} | {'all' if rho is None else f'{rho:.6g}'} | {len(sel)} | {statistics.median(ratios):.2f} | "
                f"{max(ratios):.2f} | {max(r['cpu_now_ms'] for r in sel):.3f} | {max(r['abs_diff'] for r in sel):.1e} | "
                f"{max(r['rel_diff'] for r in sel):.1e} | {sum(r['same_bits'] for r in sel)}/{len(sel)} |"
            )
    work = [r for r in rows if r["class"] != "pinned"]
    ratios = [r["ratio"] for r in work]
    lines += [
        "",
        f"All {len(work)} points with work: ratio median {statistics.median(ratios):.2f}, worst {max(ratios):.2f}; "
        f"{sum(x <= 0.6 for x in ratios)} at or below 0.6; worst float CPU now {max(r['cpu_now_ms'] for r in work):.3f} ms "
        f"(before {max(r['cpu_rev_ms'] for r in work):.3f} ms); largest relative difference "
        f"{max(r['rel_diff'] for r in rows):.1e}; same bits at {sum(r['same_bits'] for r in rows)} of {len(rows)} points.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "ot_float_compare.json"), "w") as fh:
        json.dump({"rev": rev, "reps": reps, "load_before": load_before, "load_after": load_after, "points": rows}, fh,
                  indent=1)
    with open(os.path.join(HERE, "results", "ot_float_compare.md"), "w") as fh:
        fh.write(text)
    return 0


def _fmt_w(W, n):
    """``W`` as an int, or ``"n-k"`` / ``"n/2"`` for windows next to ``n`` (a 300-digit int says nothing)."""
    if W > 4096 and W == n // 2:
        return "n/2"
    if W > 4096 and n - W <= 10**6 and 2 * W > n:
        return f"n-{n - W}"
    return W


def _near_n_windows(n):
    return [w for w in (n // 2, n - 10**6, n - 1000, n - 10, n - 1) if w > 4096]


def _fmt_n(n):
    return n if isinstance(n, str) else f"1e{round(math.log10(n))}"


def markdown(points, base_rows, load_before, load_after, near=()):
    lines = [
        "# OT prior sweep (bench/bench_ot_sweep.py)",
        "",
        f"Load average (1, 5, 15 min) before: {load_before}, after: {load_after}. CPU times are "
        "`time.process_time` medians, interleaved; wall times in the JSON.",
        "",
        "| W | n | rho | route (float/cert) | float ms | cert ms | dilution ms | rel. width | reference | contains | "
        "float err / bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        lines.append(
            f"| {p['W']} | {_fmt_n(p['n'])} | {p['rho']:.6g} | {p['route_float']}/{p['route_cert']} | "
            f"{p['cpu_float_ms']:.2f} | {p['cpu_cert_ms']:.1f} | {p['cpu_dilution_ms']:.1f} | {p['rel_width']:.2e} | "
            f"{p['reference'] or '-'} | {'-' if p['contains'] is None else p['contains']} | {p['float_error_units']:.3g} |"
        )
    big = [p for p in points if p["n"] == "1e300" or p["n"] >= 10**6]
    if big:
        lines += [
            "",
            f"n >= 1e6: worst float CPU {max(p['cpu_float_ms'] for p in big):.2f} ms, worst certified CPU "
            f"{max(p['cpu_cert_ms'] for p in big):.1f} ms, worst dilution CPU {max(p['cpu_dilution_ms'] for p in big):.1f} ms "
            f"(W = 64: {max(p['cpu_cert_ms'] for p in big if p['W'] == 64):.1f} ms certified).",
            f"Windows next to n (n/2 .. n - 1): worst float CPU "
            f"{max([p['cpu_float_ms'] for p in big if isinstance(p['W'], str)] or [0.0]):.2f} ms, certified "
            f"{max([p['cpu_cert_ms'] for p in big if isinstance(p['W'], str)] or [0.0]):.1f} ms, dilution "
            f"{max([p['cpu_dilution_ms'] for p in big if isinstance(p['W'], str)] or [0.0]):.1f} ms.",
            f"Worst float error in units of its documented bound: {max(p['float_error_units'] for p in points):.3g}; "
            f"references contained: {sum(p['contains'] is True for p in points)} of "
            f"{sum(p['contains'] is not None for p in points)}.",
        ]
    if near:
        lines += [
            "",
            "ot_prior near rho = 1 (CPU seconds; radius = widest relative radius of the enclosures of entries above "
            "the smallest normal double, whose count is `below`; log err = the stated log_error_bound; digits lost by "
            "the recurrence, measured / Lemma 4.7's bound; contains = every ball holds the mpmath bisection):",
            "",
            "| n | 1 - rho | route | CPU s | radius | below | log err | digits lost / bound | contains |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in near:
            lost = f"{r['log10_condition']:.4g} / {r['lemma_4_7_digits']:.4g}" if "log10_condition" in r else f"- / {r['lemma_4_7_digits']:.4g}"
            lines.append(
                f"| {r['n']} | {r['one_minus_rho']:.3g} | {r['route']} | {r['cpu_s']:.3g} | "
                f"{r.get('max_rel_radius', float('nan')):.2e} | {r.get('underflowed', '-')} | "
                f"{r.get('log_error_bound', float('nan')):.2e} | {lost} | {r.get('contains', '-')} |"
            )
    if base_rows:
        lines += ["", f"Against commit {BASELINE_COMMIT} (same process, interleaved, CPU seconds):", ""]
        lines += ["| what | n | rho | base s | now s | ratio (CPU) | ratio (wall) |", "|---|---|---|---|---|---|---|"]
        for r in base_rows:
            lines.append(
                f"| {r['what']} | 1e6 | {r['rho']} | {r['cpu_base_s']:.3f} | {r['cpu_now_s']:.3f} | "
                f"{r['cpu_ratio']:.1f}x | {r['wall_ratio']:.1f}x |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few points, one repetition (seconds)")
    ap.add_argument("--baseline", action="store_true", help="also time n = 1e6 against commit " + BASELINE_COMMIT)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--compare", metavar="REV", default=None, help="time the float value against git revision REV")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(args.compare, args.reps or 5)
    load_before = _load()
    if args.quick:
        ns = [10**3, 10**6, 10**18, int(1e300)]
        grid = [(64, n, rho) for n in ns for rho in (0.5, 0.99, 1 - 1e-6)]
        grid += [(n - k, n, rho) for n, k, rho in ((10**6, 10, 0.5), (10**18, 1000, 0.9), (int(1e300), 1, 0.5))]
        reps = args.reps or 1
    else:
        ns = [10**k for k in range(3, 19)] + [int(1e300)]
        grid = [(64, n, rho) for n in ns for rho in RHOS]
        grid += [(4096, n, rho) for n in ns for rho in RHOS if 4096 < n]
        grid += [(10**5, n, rho) for n in ns for rho in (0.5, 0.99) if 10**5 < n]
        # windows next to n (Corollary 4.8, the old-end estimate and Lemma 4.9, proofs/ot_asymptotics.md), every n >= 1e6
        grid += [(W, n, rho) for n in ns if n >= 10**6 for rho in RHOS for W in _near_n_windows(n)]
        reps = args.reps or 3
    points = []
    for W, n, rho in grid:
        p = sweep_point(W, n, rho, reps, args.quick)
        points.append(p)
        print(json.dumps(p), flush=True)
    near = near_one(reps, args.quick)
    base_rows = baseline(max(1, min(reps, 2))) if args.baseline and not args.quick else []
    load_after = _load()
    text = markdown(points, base_rows, load_before, load_after, near)
    print(text)
    if not args.quick:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "ot_sweep.json"), "w") as fh:
            json.dump(
                {"load_before": load_before, "load_after": load_after, "points": points, "near_one": near, "baseline": base_rows},
                fh,
                indent=1,
            )
        with open(os.path.join(HERE, "results", "ot_sweep.md"), "w") as fh:
            fh.write(text)
    bad = [p for p in points if p["contains"] is False] + [r for r in near if r.get("contains") is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
