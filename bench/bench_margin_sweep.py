"""``margin_for`` at every tolerance: CPU time per call against the 50 ms target, and its values on ordinary
inputs against a committed version loaded in the same process.

Grid: growth absolute and relative; windows 1, 4, 64, 4096; ``Lrange`` (512, 8192), (1e4, 1e6), (1e6, 1e18) and
(8192, 1e18); ``tol`` 0.05, 1e-2, 1e-4, 1e-8, 1e-16, 1e-38, 1e-39, 1e-64, 1e-100, 1e-200, 1e-300 (offset 1). Each
point: the median CPU time (``time.process_time``) of ``--reps`` calls after one untimed call (the first call in
a process also imports flint: about 0.1 s, not counted), the number of balls evaluated, the margin or the
refusal (``NoMarginError``).

Values: ``margin_for`` on ordinary inputs (offset 1, tol 0.05, windows 4..64, lengths up to 1e4; absolute and
relative growth) from this tree and from ``otprior/`` of commit ``--against`` (default f4d93e7), loaded from
git into a temporary package in this process; margin, bracket, growth and evaluations must be identical.

Run: ``python bench/bench_margin_sweep.py [--quick]`` (writes ``bench/results/margin_sweep.json`` and ``.md``
unless ``--quick``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import otprior

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_S = 0.050
TOLS = (0.05, 1e-2, 1e-4, 1e-8, 1e-16, 1e-38, 1e-39, 1e-64, 1e-100, 1e-200, 1e-300)
WINDOWS = (1, 4, 64, 4096)
LRANGES = ((512, 8192), (10**4, 10**6), (10**6, 10**18), (8192, 10**18))
ORDINARY = [(W, (L0, L1)) for W in (4, 8, 16, 32, 64) for L0, L1 in ((128, 1024), (512, 8192), (1000, 10**4))]


def _package_at(commit):
    """``otprior`` of ``commit`` as a temporary package ``otprior_at_<commit>`` in this process."""
    tmp = tempfile.mkdtemp(prefix="otprior_at_")
    root = os.path.dirname(HERE)
    archive = subprocess.run(["git", "-C", root, "archive", commit, "otprior"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
    name = f"otprior_at_{commit}"
    os.rename(os.path.join(tmp, "otprior"), os.path.join(tmp, name))
    sys.path.insert(0, tmp)
    return importlib.import_module(f"{name}.margin")


def sweep(reps, quick):
    rows = []
    windows = (4, 64) if quick else WINDOWS
    lranges = LRANGES[:1] + LRANGES[2:3] if quick else LRANGES
    tols = (0.05, 1e-39, 1e-300) if quick else TOLS
    for growth in ("absolute", "relative"):
        for W in windows:
            for L in lranges:
                if W >= L[0]:
                    continue
                for tol in tols:
                    def call(W=W, L=L, tol=tol, growth=growth):
                        try:
                            return otprior.margin_for(W, L, tol, growth=growth)
                        except otprior.NoMarginError as err:
                            return err

                    res = call()
                    times = []
                    for _ in range(reps):
                        c0 = time.process_time()
                        call()
                        times.append(time.process_time() - c0)
                    row = {"growth": growth, "W": W, "L0": L[0], "L1": L[1], "tol": tol, "cpu_s": statistics.median(times)}
                    if isinstance(res, Exception):
                        row.update(margin=None, evaluations=None, refused=str(res)[:120])
                    else:
                        row.update(margin=res.margin, evaluations=res.evaluations, refused=None)
                    rows.append(row)
    return rows


def same_values(commit):
    """Ordinary inputs: this tree's margin_for against ``commit``'s, field by field (bit for bit)."""
    base = _package_at(commit)
    now = importlib.import_module("otprior.margin")
    checked, differ = 0, []
    for growth in ("absolute", "relative"):
        for W, L in ORDINARY:
            a = now.margin_for(W, L, 0.05, growth=growth)
            b = base.margin_for(W, L, 0.05, growth=growth)
            checked += 1
            ka = (a.margin, tuple(a.bracket), a.growth, a.evaluations)
            kb = (b.margin, tuple(b.bracket), b.growth, b.evaluations)
            if ka != kb:
                differ.append({"growth": growth, "W": W, "L": L, "now": repr(ka), "base": repr(kb)})
    return {"commit": commit, "checked": checked, "differ": differ}


def markdown(rows, same, load_before, load_after, reps):
    worst = max(rows, key=lambda r: r["cpu_s"])
    over = [r for r in rows if r["cpu_s"] > TARGET_S]
    lines = [
        "# margin_for at every tolerance (bench/bench_margin_sweep.py)",
        "",
        f"Load average (1, 5, 15 min) before: {load_before}, after: {load_after}. CPU time: median of {reps} calls "
        "(`time.process_time`) after one untimed call; offset 1.",
        "",
        f"{len(rows)} points; worst {1e3 * worst['cpu_s']:.1f} ms ({worst['growth']}, W = {worst['W']}, "
        f"Lrange = ({worst['L0']:.0e}, {worst['L1']:.0e}), tol = {worst['tol']:g}); median "
        f"{1e3 * statistics.median(r['cpu_s'] for r in rows):.1f} ms; over the 50 ms target: {len(over)}.",
        f"Ordinary inputs (offset 1, tol 0.05, windows 4..64, lengths up to 1e4, both growths) against commit "
        f"{same['commit']} in this process: {same['checked']} checked, {len(same['differ'])} differ.",
        "",
        "| growth | W | Lrange | tol | CPU ms | balls | margin |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        margin = "NoMarginError" if r["refused"] else f"{r['margin']:.6g}"
        lines.append(
            f"| {r['growth']} | {r['W']} | ({r['L0']:.0e}, {r['L1']:.0e}) | {r['tol']:g} | {1e3 * r['cpu_s']:.1f} | "
            f"{r['evaluations'] if r['evaluations'] is not None else '-'} | {margin} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few points, one repetition (seconds); writes nothing")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--against", default="f4d93e7", help="commit whose margin_for the ordinary inputs are compared with")
    args = ap.parse_args(argv)
    reps = args.reps or (1 if args.quick else 3)
    load_before = os.getloadavg()
    rows = sweep(reps, args.quick)
    same = same_values(args.against)
    load_after = os.getloadavg()
    text = markdown(rows, same, load_before, load_after, reps)
    print(text)
    if not args.quick:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "margin_sweep.json"), "w") as fh:
            json.dump({"load_before": load_before, "load_after": load_after, "reps": reps, "rows": rows, "same": same}, fh, indent=1)
        with open(os.path.join(HERE, "results", "margin_sweep.md"), "w") as fh:
            fh.write(text)
    over = [r for r in rows if r["cpu_s"] > TARGET_S]
    return 1 if over or same["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
