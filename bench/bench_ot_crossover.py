"""The OT window mass across its route switch near rho = 1: float, certified enclosure and an independent reference.

``ot_window_mass`` answers by the exact route up to a length decided from ``(n, rho)`` alone and by the bounds route
beyond (``ot_window_mass``'s Notes): up to ``n = 256`` for ``rho`` in (0.9, 0.9995] and up to ``n = 8192`` for
``1 - rho < 5e-4`` (Lemma 4.6's certified prior). For rho in {0.99, 0.999, 1 - 1e-4, 1 - 1e-6} and W in {1, 64,
4096} this records, at the last exact length ``n0`` and at ``n0 + 1``:

* the float and its route, the certified enclosure and its route;
* an independent reference: Theorem 2's recurrence in ``M = Phi Psi`` and ``log(Psi c)`` solved in mpmath (a private
  context, 30 digits; ``tests/_ot_reference.py::reference_masses_mx``: nothing of otprior is used, and nothing cancels
  near rho = 1, where the recurrence in ``Phi`` loses thousands of digits);
* the float's error ``|float - ref|``, the documented bound (the certified width plus ``(min(W, 4096) + D + ln n /
  (1 - rho)) eps m``, ``ot_window_mass``'s Notes) and the error in its units; for the near-one estimate
  (Lemma 4.9, ``1 - rho < 5e-4`` beyond ``n = 8192``) also the error of ``1 - m`` relative to ``1 - ref``;
* the jump ``float(n0 + 1) - float(n0)`` against the true change ``ref(n0 + 1) - ref(n0)``, and the jump's excess
  ``|jump - true change|`` in units of the larger of the two points' documented bounds;
* ``contains``: whether each enclosure holds the reference.

The floats before this change are taken from the code of commit ``--before`` (default ``01e0032``), loaded from git
into a temporary package in this process, where that commit is at hand.

Run: ``python bench/bench_ot_crossover.py`` (about a minute per rho; writes ``bench/results/ot_crossover.json`` and
``bench/results/ot_crossover.md``); ``--quick``: W = 1 at rho = 1 - 1e-4 only, nothing written.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import otprior  # noqa: E402
from tests._ot_reference import reference_masses_mx  # noqa: E402

EPS = 2.0**-52
RHOS = (0.99, 0.999, 1 - 1e-4, 1 - 1e-6)
WINDOWS = (1, 64, 4096)


def _switch(rho):
    """The last length ``n0`` at which the float takes the exact route (found from the routes themselves)."""
    for n0 in (256, 8192):
        _, r0 = otprior.ot_window_mass(1, n0, rho, return_route=True)
        _, r1 = otprior.ot_window_mass(1, n0 + 1, rho, return_route=True)
        if r0 == "exact" and r1 == "bounds":
            return n0
    raise SystemExit(f"no route switch found at rho = {rho}")


def _before_module(commit):
    """``otprior.ot_prior`` as of ``commit`` in a temporary package (``None`` where git cannot give it)."""
    try:
        archive = subprocess.run(["git", "-C", ROOT, "archive", commit, "otprior"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    tmp = tempfile.mkdtemp(prefix="otprior_before_")
    subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
    os.rename(os.path.join(tmp, "otprior"), os.path.join(tmp, "otprior_before"))
    sys.path.insert(0, tmp)
    return importlib.import_module("otprior_before.ot_prior")


def _bound(f, width, W, n, rho):
    D = max(64, min(512, n // 8))
    return width + (min(W, 4096) + D + math.log(n) / (1 - rho)) * EPS * max(f, 0.0)


def point(rho, W, n, ref, before):
    c0 = time.process_time()
    f, route = otprior.ot_window_mass(W, n, rho, return_route=True)
    t_f = time.process_time() - c0
    c0 = time.process_time()
    e, croute = otprior.ot_window_mass(W, n, rho, certified=True, return_route=True)
    t_c = time.process_time() - c0
    ref_f = float(ref)
    err = abs(f - ref_f)
    bound = _bound(f, e.hi - e.lo, W, n, rho)
    row = {
        "rho": rho, "W": W, "n": n, "float": f, "route": route, "lo": e.lo, "hi": e.hi, "route_cert": croute,
        "ref": ref_f, "one_minus_ref": float(1 - ref), "contains": bool(e.lo <= ref <= e.hi), "error": err,
        "bound": bound, "units": err / bound if bound > 0 else (0.0 if err == 0 else math.inf),
        # relative to 1 - m where 1 - m is above the doubles' spacing near 1 (else the rounding to 1.0 is all there is)
        "rel_error_one_minus": float(abs(f - ref) / (1 - ref)) if 1 - ref >= EPS else None, "cpu_float_ms": 1e3 * t_f,
        "cpu_cert_ms": 1e3 * t_c,
    }
    if before is not None:
        fb = before.ot_window_mass(W, n, rho)
        row.update(before=fb, before_error=abs(fb - ref_f),
                   before_rel_error_one_minus=float(abs(fb - ref) / (1 - ref)) if 1 - ref >= EPS else None)
    return row


def run(quick, before_commit):
    before = None if quick else _before_module(before_commit)
    rows, jumps = [], []
    for rho in ((1 - 1e-4,) if quick else RHOS):
        n0 = _switch(rho)
        wins = (1,) if quick else tuple(w for w in WINDOWS if w < n0)
        refs = {}
        for n in (n0, n0 + 1):
            c0 = time.process_time()
            refs[n], _ = reference_masses_mx(n, rho, wins, dps=30)
            print(f"reference rho={rho} n={n}: {time.process_time() - c0:.1f} s", file=sys.stderr, flush=True)
        for W in wins:
            a, b = (point(rho, W, n, refs[n][W], before) for n in (n0, n0 + 1))
            rows += [a, b]
            jump, true = b["float"] - a["float"], float(refs[n0 + 1][W] - refs[n0][W])
            j = {"rho": rho, "W": W, "n0": n0, "jump": jump, "true_change": true, "excess": abs(jump - true),
                 "excess_units": abs(jump - true) / max(a["bound"], b["bound"]) if max(a["bound"], b["bound"]) > 0 else 0.0}
            if before is not None:
                j["jump_before"] = b["before"] - a["before"]
            jumps.append(j)
            print(json.dumps(j), flush=True)
    return rows, jumps


def _e(x):
    return "—" if x is None else f"{x:.2e}"


def markdown(rows, jumps, load_before, load_after, before_commit):
    lines = [
        "# The OT window mass across its route switch near rho = 1 (bench/bench_ot_crossover.py)",
        "",
        f"Load average before: {load_before}, after: {load_after}. Reference: Theorem 2 in (M, log(Psi c)), mpmath at "
        "30 digits in a private context (tests/_ot_reference.py). bound = the documented bound of the float "
        "(certified width + (min(W, 4096) + D + ln n/(1 - rho)) eps m); rel. err of 1 - m = |float - ref| / (1 - ref). "
        f"`before` = the float of commit {before_commit}.",
        "",
        "| rho | W | n | route (float/cert) | float | before | reference | enclosure | contains | error | bound | units | "
        "rel. err of 1 - m (before) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['rho']:.6g} | {r['W']} | {r['n']} | {r['route']}/{r['route_cert']} | {r['float']!r} | "
            f"{r.get('before', float('nan'))!r} | {r['ref']!r} | [{r['lo']:.6g}, {r['hi']:.6g}] | {r['contains']} | "
            f"{r['error']:.2e} | {r['bound']:.2e} | {r['units']:.3g} | {_e(r['rel_error_one_minus'])} "
            f"({_e(r.get('before_rel_error_one_minus'))}) |"
        )
    lines += ["", "| rho | W | n0 -> n0 + 1 | jump | jump before | true change | excess | excess / bound |",
              "|---|---|---|---|---|---|---|---|"]
    for j in jumps:
        lines.append(
            f"| {j['rho']:.6g} | {j['W']} | {j['n0']} -> {j['n0'] + 1} | {j['jump']:.3e} | {j.get('jump_before', float('nan')):.3e} | "
            f"{j['true_change']:.3e} | {j['excess']:.2e} | {j['excess_units']:.3g} |"
        )
    lines += ["", f"Worst float error in units of its documented bound: {max(r['units'] for r in rows):.3g}; "
              f"references inside the enclosures: {sum(r['contains'] for r in rows)} of {len(rows)}; worst jump excess "
              f"in units of the bound: {max(j['excess_units'] for j in jumps):.3g}."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="W = 1 at rho = 1 - 1e-4 only; nothing written")
    ap.add_argument("--before", default="01e0032", help="the commit whose floats are shown as `before`")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    rows, jumps = run(args.quick, args.before)
    text = markdown(rows, jumps, load_before, os.getloadavg(), args.before)
    print(text)
    if not args.quick:
        with open(os.path.join(HERE, "results", "ot_crossover.json"), "w") as fh:
            json.dump({"load_before": load_before, "rows": rows, "jumps": jumps}, fh, indent=1)
        with open(os.path.join(HERE, "results", "ot_crossover.md"), "w") as fh:
            fh.write(text)
    bad = [r for r in rows if not r["contains"] or r["units"] > 1.0]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
