"""The float window mass beyond the exact steps (Lemma 4.11, proofs/ot_asymptotics.md) against the code of a git
revision, in this same process, interleaved.

For ``W`` in {4096, 1e5}, rho in {0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-6} and n = 10^k (k = 6..18) and 1e300, each point
records the CPU time (``time.process_time``, median over ``--reps`` interleaved cold calls: the near-one priors
``ot_prior`` keeps are forgotten before each) of ``ot_window_mass(W, n, rho)`` here and at ``REV`` (the module
``otprior/ot_prior.py`` of ``REV`` loaded from git into a temporary module, its relative imports resolved to this
checkout's helpers), the two values, and for ``W = 1e5`` on the bounds route of Lemma 4.3 (rho <= 0.99) the distance of
each from ``f_W`` at the same estimate of ``c_n`` by the full double recurrence (1e5 one-step iterations), in units of the
documented rounding ``(min(W, 4096) + D + ln n / (1 - rho)) eps m``.

Run: ``python bench/bench_ot_continued.py [--rev e931d64] [--reps 5]``; writes ``bench/results/ot_continued.md``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import time

import otprior

HERE = os.path.dirname(os.path.abspath(__file__))
RHOS = (0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-6)
EPS = 2.0**-52


def _module_at(rev):
    src = subprocess.run(
        ["git", "show", f"{rev}:otprior/ot_prior.py"], cwd=os.path.dirname(HERE), capture_output=True, text=True,
        check=True,
    ).stdout
    spec = importlib.util.spec_from_loader("otprior._ot_prior_rev", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "otprior"
    sys.modules[spec.name] = mod
    exec(compile(src, f"{rev}:otprior/ot_prior.py", "exec"), mod.__dict__)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rev", default="e931d64")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    new = importlib.import_module("otprior.ot_prior")
    old = _module_at(args.rev)
    load0 = os.getloadavg()
    rows = []
    for W in (4096, 10**5):
        for rho in RHOS:
            for n in [10**k for k in range(6, 19)] + [int(1e300)]:
                fs = {"new": new, "old": old}
                vals = {k: m.ot_window_mass(W, n, rho) for k, m in fs.items()}  # warm
                cpu = {k: [] for k in fs}
                for _ in range(args.reps):
                    for k, m in fs.items():
                        m._near_one_cached.cache_clear()
                        t = time.process_time()
                        m.ot_window_mass(W, n, rho)
                        cpu[k].append(time.process_time() - t)
                med = {k: statistics.median(v) for k, v in cpu.items()}
                ref = None
                D = max(64, min(512, n // 8))
                if W > 2048 and rho <= 0.99 and n >= 2 * W:
                    x, est = new._bulk_solve_float(n, rho, D, D, with_est=True, fast=True)
                    if x is not None and est is not None:
                        st = new._bulk_steps_float(x, rho, W, W, start=est[4], ) if est[4] is not None else None
                        ref = None if st is None else st[2]
                unit = (min(W, 4096) + D + math.log(n) / (1 - rho)) * EPS * vals["new"]
                rows.append({
                    "W": W, "n": n, "rho": rho, "new_ms": 1e3 * med["new"], "old_ms": 1e3 * med["old"],
                    "new": vals["new"], "old": vals["old"],
                    "err_new": None if ref is None else abs(vals["new"] - ref) / unit,
                    "err_old": None if ref is None else abs(vals["old"] - ref) / unit,
                })
                r = rows[-1]
                print(W, f"{float(n):.0e}", rho, f"{r['old_ms']:.3f} -> {r['new_ms']:.3f} ms", r["err_old"], r["err_new"],
                      flush=True)
    load1 = os.getloadavg()
    lines = [
        "# Float window mass beyond the exact steps (bench/bench_ot_continued.py)",
        "",
        f"Against `{args.rev}` in one process, interleaved, each call cold; CPU time medians of {args.reps}. "
        f"Load average before {tuple(round(v, 2) for v in load0)}, after {tuple(round(v, 2) for v in load1)}. "
        "`err` is the distance from f_W at the same estimate of c_n by the full double recurrence, in units of the "
        "documented rounding (min(W, 4096) + D + ln n/(1 - rho)) eps m (bounds route of Lemma 4.3, rho <= 0.99).",
        "",
    ]
    for W in (4096, 10**5):
        sub = [r for r in rows if r["W"] == W]
        ratios = [r["new_ms"] / r["old_ms"] for r in sub]
        lines.append(f"W = {W}: CPU ratio new/old median {statistics.median(ratios):.2f}, "
                     f"worst new {max(r['new_ms'] for r in sub):.3f} ms (old worst {max(r['old_ms'] for r in sub):.3f} ms), "
                     f"points over 1 ms: new {sum(r['new_ms'] > 1 for r in sub)}, old {sum(r['old_ms'] > 1 for r in sub)}")
    lines += ["", "Per rho (median CPU ratio new/old over n; worst new ms; worst err new / old where computed):", ""]
    for W in (4096, 10**5):
        for rho in RHOS:
            sub = [r for r in rows if r["W"] == W and r["rho"] == rho]
            errs_n = [r["err_new"] for r in sub if r["err_new"] is not None]
            errs_o = [r["err_old"] for r in sub if r["err_old"] is not None]
            err = f"{max(errs_n):.3g} / {max(errs_o):.3g}" if errs_n else "-"
            lines.append(f"- W = {W}, rho = {rho}: {statistics.median(r['new_ms'] / r['old_ms'] for r in sub):.2f}, "
                         f"{max(r['new_ms'] for r in sub):.3f} ms, err {err}")
    lines += ["", "| W | n | rho | old ms | new ms | ratio | old err | new err |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def f(v):
            return "-" if v is None else f"{v:.3g}"
        lines.append(f"| {r['W']} | {float(r['n']):.0e} | {r['rho']} | {r['old_ms']:.3f} | {r['new_ms']:.3f} | "
                     f"{r['new_ms'] / r['old_ms']:.2f} | {f(r['err_old'])} | {f(r['err_new'])} |")
    with open(os.path.join(HERE, "results", "ot_continued.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines[:8]))


if __name__ == "__main__":
    otprior  # noqa: B018 (the package imported first: its helpers are what REV's module resolves to)
    main()
