"""A user's ``Bias`` on the routes of Theorem 15j (a bias growing towards ``n``) and of Theorem 15i's interval bounds,
against the library as it was at a baseline commit, interleaved in this process.

The baseline's ``otprior`` is read from git (``git archive``) into a temporary directory and imported under another
name, so both versions run under the same machine load; each call is a first call at its range (the per-range memos
of both versions cleared before it, as in ``bench_bias_any_length.py``). Per point: the median CPU ms of each, the ratio
of the medians and the smallest ratio of a back-to-back pair, and whether the floats are the same bits (else their
relative difference, the larger of the window mass's and the distant mass's).

Run: ``python bench/bench_bias_anchored_speed.py [--reps 15] [--base cdeccc2]``; writes
``bench/results/bias_anchored_speed.md``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIG = int(1e300)
SQRT, MIXED = "sqrt(d)", "-0.7*log(1+d) - 0.01*sqrt(d)"
POINTS = ([(SQRT, 10**5, 10**6), (SQRT, 10**6 - 1, 10**6)]
          + [(SQRT, W, n) for n in (10**9, 10**12, 10**15, 10**18, BIG) for W in (n - 10**5, n - 1)]
          + [(MIXED, 64, BIG), (MIXED, 64, 10**6), (MIXED, 64, 10**9), (MIXED, 10**8, 10**9), (MIXED, 10**9 - 10**5, 10**9),
             (MIXED, 10**9 - 1, 10**9), (MIXED, 64, 10**12), (MIXED, 64, 10**18)])


def label(x):
    if BIG - x == 1:
        return "1e300 - 1"
    if BIG - x == 10**5:
        return "1e300 - 1e5"
    s = str(x)
    if s.rstrip("0") == "1":
        return f"1e{len(s) - 1}"
    if s.rstrip("9") == "":
        return f"1e{len(s)} - 1"
    for k in range(5, 301):
        if x + 10**5 == 10**k:
            return f"1e{k} - 1e5"
    return f"{float(x):.3g}"


def baseline(commit):
    """The package at ``commit`` as ``otprior_base`` (its relative imports resolve inside it)."""
    tmp = Path(tempfile.mkdtemp(prefix="otprior_base_"))
    archive = subprocess.run(["git", "archive", commit, "otprior"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    (tmp / "otprior").rename(tmp / "otprior_base")
    sys.path.insert(0, str(tmp))
    return importlib.import_module("otprior_base.encodings")


def first_call(enc_mod, text, W, n):
    B = enc_mod.Bias(text)
    tail, bias = enc_mod._bias_tail, enc_mod.bias

    def call():
        tail._PROOFS.clear()
        bias._without_negligible_terms.cache_clear()
        return B.window_mass(W, n)

    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--base", default="cdeccc2")
    args = ap.parse_args()
    import otprior.encodings as new

    old = baseline(args.base)
    load0 = os.getloadavg()
    rows = []
    for text, W, n in POINTS:
        fb, fn = first_call(old, text, W, n), first_call(new, text, W, n)
        vb = (old.Bias(text).window_mass(W, n), old.Bias(text).distant_mass(W, n))
        vn = (new.Bias(text).window_mass(W, n), new.Bias(text).distant_mass(W, n))
        tb, tn = [], []
        for _ in range(args.reps):
            for f, acc in ((fb, tb), (fn, tn)):
                t = time.process_time()
                f()
                acc.append(time.process_time() - t)
        mb, mn = statistics.median(tb), statistics.median(tn)
        worst = min(b / c for b, c in zip(tb, tn, strict=True))
        same = "same bits" if vb == vn else f"{max(abs(x - y) / abs(x) if x else abs(y) for x, y in zip(vb, vn, strict=True)):.1e} relative"
        rows.append(f"| `{text}` | {label(n)} | {label(W)} | {mb * 1e3:.3f} | {mn * 1e3:.3f} | {mb / mn:.2f} | {worst:.2f} | {same} |")
        print(rows[-1], flush=True)
    load1 = os.getloadavg()
    head = [f"# A user's Bias on Theorem 15j's routes and Theorem 15i's interval bounds: against {args.base}",
            "",
            f"First calls (per-range memos cleared), CPU ms, medians of {args.reps} interleaved pairs; load average "
            f"{load0[0]:.1f} before, {load1[0]:.1f} after (two cores shared with other work: read the ratios, not the ms).",
            "",
            f"| bias | n | W | {args.base} ms | now ms | ratio | worst pair | floats (m, D) |",
            "|---|---|---|---|---|---|---|---|"]
    out = ROOT / "bench" / "results" / "bias_anchored_speed.md"
    out.write_text("\n".join(head + rows) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
