"""How loose the certified OT window mass is next to n: the enclosure of 1 - m_n(n - k) against the truth.

For windows W = n - k (k = 1, 10, 1000, n/2), the certified enclosure's ends turned into an enclosure of
``1 - m_n(W)`` (the mass of the k oldest keys, Corollary 4.8(d), (e)) are compared with an independent value:
the exact certified route (``method="exact"``: Theorem 2's root bisected in Arb, another algorithm than the
bounds route's Lemma 4.3) where it runs (n = 2e4, 1e5), and otherwise with the float's old-end estimate (an
estimate, printed for scale only). ``hi / true`` and ``lo / true`` say how far each end is from the truth.

Run: ``python bench/bench_ot_near_n.py`` (about a minute; writes ``bench/results/ot_near_n.json`` and ``.md``).
"""

from __future__ import annotations

import json
import os
import sys
import time

import otprior

HERE = os.path.dirname(os.path.abspath(__file__))
EXACT = ((2 * 10**4, 0.9), (10**5, 0.9), (2 * 10**4, 0.99), (10**5, 0.99))
LARGE = ((10**6, 0.9), (10**9, 0.9), (10**6, 0.95), (10**6, 0.99))


def _windows(n):
    return [n - 1, n - 10, n - 1000, n // 2]


def main():
    load = os.getloadavg()
    rows = []
    for n, rho in EXACT + LARGE:
        ws = _windows(n)
        c0 = time.process_time()
        b = otprior.ot_window_mass(ws, n, rho, certified=True)
        t_b = time.process_time() - c0
        ex = otprior.ot_window_mass(ws, n, rho, certified=True, method="exact") if (n, rho) in EXACT else None
        f = otprior.ot_window_mass(ws, n, rho)
        for k, W in enumerate(ws):
            lo, hi = 1 - b.hi[k], 1 - b.lo[k]  # the enclosure of 1 - m, as doubles rounded from the mass's ends
            true = None if ex is None else 1 - ex.mid[k]
            rows.append({"n": n, "rho": rho, "k": n - W, "one_minus_lo": lo, "one_minus_hi": hi, "true": true,
                         "true_kind": "exact certified route" if ex is not None else None, "float": 1 - f[k],
                         "hi_over_true": hi / true if true else None, "lo_over_true": lo / true if true else None,
                         "cpu_cert_ms": 1e3 * t_b / len(ws)})
            print(json.dumps(rows[-1]), flush=True)
    lines = ["# The certified OT window mass next to n (bench/bench_ot_near_n.py)", "",
             f"Load average before: {load}. Enclosure of 1 - m_n(n - k) from the certified ends; `true`: the exact "
             "certified route (Arb), where it runs; `float`: the float's 1 - m (an estimate).", "",
             "| n | rho | k | 1 - m enclosure | true | float | hi / true | lo / true |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = "—" if r["true"] is None else f"{r['true']:.3e}"
        ho = "—" if r["hi_over_true"] is None else f"{r['hi_over_true']:.3g}"
        lo_ = "—" if r["lo_over_true"] is None else f"{r['lo_over_true']:.3g}"
        lines.append(f"| {r['n']:.0e} | {r['rho']} | {r['k']} | [{r['one_minus_lo']:.3e}, {r['one_minus_hi']:.3e}] | {t} | "
                     f"{r['float']:.3e} | {ho} | {lo_} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(HERE, "results", "ot_near_n.json"), "w") as fh:
        json.dump({"load": load, "rows": rows}, fh, indent=1)
    with open(os.path.join(HERE, "results", "ot_near_n.md"), "w") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
