"""A user's Bias, float route, first call: this checkout against commit ``cdeccc2`` interleaved in one process.

The float routes of Theorem 15 (the long-range float with Theorem 15i's proof), 15f (the twisted sums) and 15k (terms
left out) were rewritten for less Python and numpy overhead per call (``proofs/closed_form_tails.md``). This compares
``Bias.window_mass`` at the points of ``bench_bias_any_length.py`` (n = 10^k, k = 6..18 step 3, and 1e300; W = 64, n/10,
n - 1e5 from n = 1e9, n - 1) for the biases whose first calls were above 1 ms there, against the package as it was at
``cdeccc2`` (extracted with ``git archive`` into a temporary directory and imported as ``otprior_base``). Every timed
call starts with the per-range memos of its own package cleared (Theorem 15i's proofs and the floats' answers in
``_PROOFS``, Theorem 15k's reductions and proved ranges), as the other bench's first call does; the two packages' calls
alternate, so both see the same load. Each point records the medians of the CPU times, their ratio, and the largest
relative difference of ``window_mass`` and ``distant_mass`` between the two (0: the same bits).

Run: ``python bench/bench_bias_float_overhead.py [--reps 9] [--quick]`` (writes ``bench/results/bias_float_overhead.md``
and ``.json`` unless ``--quick``: n = 1e6, 1e18, 1e300 only).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = "cdeccc2"
BIASES = (
    "-1.2*log(1+d) + 0.5*sin(d)",
    "-1.1*log(d+1) + exp(-exp(d/1000))",
    "-1.1*log(1+d)",
    "-1.2*log(1+d)",
    "-0.7*log(1+d) - 0.01*sqrt(d)",
)


def base_package(tmp):
    """``otprior`` at ``BASE`` as the package ``otprior_base`` under ``tmp`` (its imports are relative)."""
    raw = subprocess.run(["git", "archive", BASE, "otprior"], cwd=ROOT, capture_output=True, check=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        tar.extractall(tmp, filter="data")
    os.rename(os.path.join(tmp, "otprior"), os.path.join(tmp, "otprior_base"))
    sys.path.insert(0, tmp)
    import otprior_base

    return otprior_base


def label(n):
    return "1e300" if n > 10**18 else f"1e{len(str(n)) - 1}"


def wlabel(W, n):
    if W == n - 1:
        return "n - 1"
    if W == n - 10**5:
        return "n - 1e5"
    return "64" if W == 64 else "n/10"


def run(quick, reps):
    sys.path.insert(0, str(ROOT))
    from otprior.encodings import Bias, _bias_tail
    from otprior.encodings import bias as new_bias

    tmp = tempfile.mkdtemp(prefix="otprior_base_")
    base_package(tmp)
    from otprior_base.encodings import Bias as BaseBias
    from otprior_base.encodings import _bias_tail as base_tail
    from otprior_base.encodings import bias as base_bias

    def clear_new():
        _bias_tail._PROOFS.clear()
        new_bias._without_negligible_terms.cache_clear()

    def clear_base():
        base_tail._PROOFS.clear()
        base_bias._without_negligible_terms.cache_clear()

    ks = [6, 18, 300] if quick else [6, 9, 12, 15, 18, 300]
    rows = []
    for text in BIASES:
        new, old = Bias(text), BaseBias(text)
        for k in ks:
            n = 10**k if k < 300 else int(1e300)
            for W in sorted({64, n // 10, n - 1} | ({n - 10**5} if n >= 10**9 else set())):
                values = []
                for B, clear in ((new, clear_new), (old, clear_base)):
                    clear()
                    values.append((B.window_mass(W, n), B.distant_mass(W, n)))
                times = {"new": [], "old": []}
                for _ in range(reps):
                    for name, B, clear in (("old", old, clear_base), ("new", new, clear_new)):
                        clear()
                        start = time.process_time()
                        B.window_mass(W, n)
                        times[name].append(time.process_time() - start)
                t_new, t_old = statistics.median(times["new"]), statistics.median(times["old"])
                diff = max(abs(a - b) / abs(b) if b else abs(a) for a, b in zip(values[0], values[1], strict=True))
                rows.append(dict(bias=text, n=label(n), W=wlabel(W, n), new_ms=1e3 * t_new, old_ms=1e3 * t_old,
                                 ratio=t_old / t_new, rel_diff=diff))
                print(json.dumps(rows[-1]), flush=True)
    return rows


def summary(rows, load):
    lines = [f"load average during the run: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} (two cores, shared)", ""]
    lines.append("| bias | points | ratio median | ratio worst | ratio best | new ms median | new ms max | max rel. diff |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for text in BIASES:
        rs = [r for r in rows if r["bias"] == text]
        ratios = [r["ratio"] for r in rs]
        lines.append(f"| `{text}` | {len(rs)} | {statistics.median(ratios):.2f} | {min(ratios):.2f} | {max(ratios):.2f} | "
                     f"{statistics.median(r['new_ms'] for r in rs):.3f} | {max(r['new_ms'] for r in rs):.3f} | "
                     f"{max(r['rel_diff'] for r in rs):.1e} |")
    return "\n".join(lines) + "\n"


def markdown(rows, load):
    head = summary(rows, load) + "\n| bias | n | W | cdeccc2 ms | now ms | ratio | rel. diff |\n|---|---|---|---|---|---|---|\n"
    return head + "\n".join(f"| `{r['bias']}` | {r['n']} | {r['W']} | {r['old_ms']:.3f} | {r['new_ms']:.3f} | {r['ratio']:.2f} | "
                            f"{r['rel_diff']:.1e} |" for r in rows) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=9)
    args = p.parse_args(argv)
    rows = run(args.quick, args.reps)
    load = os.getloadavg()
    print(summary(rows, load))
    if not args.quick:
        out = ROOT / "bench" / "results"
        (out / "bias_float_overhead.json").write_text(json.dumps(dict(load=load, rows=rows), indent=1))
        (out / "bias_float_overhead.md").write_text(markdown(rows, load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
