"""One summary of the any-length sweeps, written from their JSON results (nothing is measured here).

Reads ``bench/results/ot_sweep.json`` (``bench_ot_sweep.py``: the OT prior's window mass, float and certified, and
its dilution bound), ``bench/results/any_length.json`` (``bench_any_length.py``: every registered encoding and the
user biases at W = 64) and, where present, ``bench/results/bias_any_length.json`` (``bench_bias_any_length.py``: user
biases at several windows) and ``bench/results/ot_crossover.json`` (``bench_ot_crossover.py``: the OT route switch near
rho = 1). Writes ``bench/results/any_length_summary.md``: per family (and rho): the lengths covered, the worst float
and certified CPU time at n >= 1e6, the widest relative width, the routes used, references inside / computed, the
worst float error (in units of its documented bound where the family documents one, else in ulps against the
reference), and every point over a target (n >= 1e6: float <= 1 ms, certified <= 50 ms; every reference inside its
enclosure; no refusal).

Run: ``python bench/summarise_any_length.py`` (after the sweeps; exits 1 where a point is over target).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
FLOAT_TARGET_MS, CERT_TARGET_MS = 1.0, 50.0
LENGTHS = [f"1e{k}" for k in range(3, 19)] + ["1e300"]


def _label(n):
    """``1e6``-style label of a length given as an int, a label or ``"1e+300"``."""
    if isinstance(n, str):
        return "1e300" if n in ("1e300", "1e+300") else n
    return "1e300" if n > 10**200 else f"1e{len(str(n)) - 1}"


def _big(label):
    return label == "1e300" or int(label[2:]) >= 6


def _load(name, results=RESULTS):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def _at(where):
    return f" {where}" if where else ""


def _fmt(x, spec, none="—"):
    return none if x is None else format(x, spec)


class Family:
    def __init__(self, name, expected=LENGTHS):
        self.name = name
        self.expected = expected  # the lengths the sweep is meant to cover (None: report what is there)
        self.lengths, self.routes = set(), set()
        self.points = 0
        self.float_ms = self.cert_ms = self.dil_ms = None
        self.width = None
        self.refs_in = self.refs = 0
        self.units = self.ulps = None
        self.over = []

    def add(self, label, *, float_ms=None, cert_ms=None, dil_ms=None, width=None, route=None, ref_in=None, units=None,
            ulps=None, where=""):
        self.points += 1
        self.lengths.add(label)
        if route:
            self.routes.add(route)
        big = _big(label)
        for key, value, target in (("float_ms", float_ms, FLOAT_TARGET_MS), ("cert_ms", cert_ms, CERT_TARGET_MS),
                                   ("dil_ms", dil_ms, CERT_TARGET_MS)):
            if value is None or not big:
                continue
            setattr(self, key, max(getattr(self, key) or 0.0, value))
            if value > target:
                self.over.append(f"{self.name}{_at(where)} n={label}: {key.split('_')[0]} {value:.2f} ms")
        if width is not None and math.isfinite(width):
            self.width = max(self.width or 0.0, width)
        if ref_in is not None:
            self.refs += 1
            self.refs_in += bool(ref_in)
            if not ref_in:
                self.over.append(f"{self.name}{_at(where)} n={label}: reference outside the enclosure")
        if units is not None:
            self.units = max(self.units or 0.0, units)
        if ulps is not None:
            self.ulps = max(self.ulps or 0.0, ulps)

    def refuse(self, label, why, where=""):
        self.points += 1
        self.lengths.add(label)
        self.over.append(f"{self.name}{_at(where)} n={label}: refused ({why[:80]})")

    def row(self):
        if self.expected is None:
            cover = ", ".join(k for k in LENGTHS if k in self.lengths)
        else:
            missing = [k for k in self.expected if k not in self.lengths]
            cover = f"{self.expected[0]}..1e300 ({len(self.expected)})" if not missing else f"missing {', '.join(missing)}"
        err = _fmt(self.units, ".3g") if self.units is not None else (f"{self.ulps:.1f} ulp" if self.ulps is not None else "—")
        return (f"| {self.name} | {self.points} | {cover} | {_fmt(self.float_ms, '.3f')} | {_fmt(self.cert_ms, '.1f')} | "
                f"{_fmt(self.dil_ms, '.1f')} | {_fmt(self.width, '.2g')} | {', '.join(sorted(self.routes)) or '—'} | "
                f"{self.refs_in}/{self.refs} | {err} | {len(self.over)} |")


def _route_tag(route):
    route = str(route)
    for prefix, tag in (("geometric", "G"), ("Euler", "EM"), ("exact rational", "R"), ("Hurwitz", "HZ"), ("bucket", "B"),
                        ("linear pieces", "P"), ("incomplete gamma", "IG"), ("ot_window_mass", "OT"), ("direct", "D"),
                        ("dominance", "DB")):
        if route.startswith(prefix):
            return tag
    return route[:24]


def ot_families(sweep):
    fams = {}
    for p in sweep["points"]:
        label = _label(p["n"])
        kind = "W=64" if p["W"] == 64 else ("W=4096/1e5" if isinstance(p["W"], int) else "W next to n")
        expected = {"W=64": LENGTHS, "W=4096/1e5": LENGTHS[1:], "W next to n": LENGTHS[3:]}[kind]
        fam = fams.setdefault((p["rho"], kind), Family(f"OT rho={p['rho']:.6g} {kind}", expected))
        fam.add(label, float_ms=p["cpu_float_ms"], cert_ms=p["cpu_cert_ms"], dil_ms=p["cpu_dilution_ms"],
                width=p["rel_width"], route=f"{p['route_float']}/{p['route_cert']}", ref_in=p["contains"],
                units=p["float_error_units"], where="" if p["W"] == 64 else f"W={p['W']}")
    return [fams[k] for k in sorted(fams, key=lambda k: (k[1] != "W=64", k[1], k[0]))]


def encoding_families(any_length):
    fams = {}
    for group in ("encodings", "biases"):
        for r in any_length.get(group, []):
            if r.get("n") == "oo":
                continue
            fam = fams.setdefault(r["what"], Family(r["what"]))
            label = _label(r.get("n_int", r["n"]))
            if r.get("float_s") is None:
                fam.refuse(label, str(r.get("route", "")))
                continue
            fam.add(label, float_ms=1e3 * r["float_s"], cert_ms=None if r.get("cert_s") is None else 1e3 * r["cert_s"],
                    width=r.get("width"), route=_route_tag(r.get("route", "")), ref_in=r.get("ref_in"),
                    units=r.get("units"), ulps=r.get("float_ulps"))
    return list(fams.values())


def bias_families(rows):
    fams = {}
    for r in rows:
        fam = fams.setdefault(r["bias"], Family(f"bias {r['bias']}", None))
        label = _label(r["n"])
        if r.get("float_s") is None:
            fam.refuse(label, str(r.get("route", "")), where=f"W={r['W']}")
            continue
        fam.add(label, float_ms=1e3 * r["float_s"], cert_ms=None if r.get("cert_s") is None else 1e3 * r["cert_s"],
                width=r.get("width"), route=_route_tag(r.get("route", "")), ref_in=r.get("contains"), ulps=r.get("float_ulps"),
                where=f"W={r['W']}")
    return list(fams.values())


HEADER = ["| family | points | lengths 1e3..1e18, 1e300 | float ms (worst, n >= 1e6) | certified ms (worst) | dilution ms (worst) | "
          "widest rel. width | routes | references inside | worst float error (units of its bound, else ulps) | over target |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]


def ot_matrix(sweep):
    """W = 64: per rho and length, float ms / certified ms / relative width / route (float/certified)."""
    cols = ["1e3", "1e6", "1e9", "1e12", "1e15", "1e18", "1e300"]
    cells = {}
    for p in sweep["points"]:
        if p["W"] != 64:
            continue
        label = _label(p["n"])
        if label in cols:
            tag = "".join(r[0] for r in (p["route_float"], p["route_cert"]))
            cells.setdefault(p["rho"], {})[label] = (f"{p['cpu_float_ms']:.2f} / {p['cpu_cert_ms']:.1f} / {p['rel_width']:.1e} / {tag}")
    md = ["| rho | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for rho in sorted(cells):
        md.append(f"| {rho:.6g} | " + " | ".join(cells[rho].get(c, "—") for c in cols) + " |")
    return md


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=RESULTS, help="the folder of the sweeps' JSON (default: bench/results)")
    ap.add_argument("--out", default=None, help="the markdown written (default: RESULTS/any_length_summary.md)")
    args = ap.parse_args(argv)
    sweep, any_length = _load("ot_sweep.json", args.results), _load("any_length.json", args.results)
    bias_rows, crossover = _load("bias_any_length.json", args.results), _load("ot_crossover.json", args.results)
    if sweep is None or any_length is None:
        raise SystemExit("summarise_any_length: run bench_ot_sweep.py and bench_any_length.py first")
    lines = ["# Any length: the summary (bench/summarise_any_length.py, from the sweeps' JSON)", ""]
    lines.append(f"OT sweep: load (1, 5, 15 min) {sweep.get('load_before')} before, {sweep.get('load_after')} after; CPU "
                 "time (`process_time`) medians of interleaved repetitions. Encodings and biases: CPU time, best of 3 "
                 "(`bench/results/any_length.md`). Targets at n >= 1e6: float <= 1 ms, certified <= 50 ms (the dilution "
                 "bound is held to the certified target). References: mpmath in private contexts, or the exact "
                 "certified route (another algorithm) for the OT prior; `units`: the float's distance to the reference "
                 "(or, without one, outside the certified enclosure) over its documented bound, width + (min(W, 4096) + "
                 "D + ln n / (1 - rho)) eps m for the OT prior and 8 eps (1 + |ln m|) for log-distance and KERPLE-log; "
                 "other families document correct rounding, shown in ulps against the reference.")
    fams = ot_families(sweep) + encoding_families(any_length)
    lines += ["", "## Per family (W = 64 for the encodings and the three user biases of the issue, plus three more)", ""]
    lines += HEADER + [f.row() for f in fams]
    extra = bias_families(bias_rows) if bias_rows else []
    if extra:
        lines += ["", "## User biases at several windows (`bench_bias_any_length.py`, its own lengths and windows; read, "
                  "not re-run here)", ""] + HEADER + [f.row() for f in extra]
    over = [o for f in fams + extra for o in f.over]
    ot_units = max((p["float_error_units"] for p in sweep["points"]), default=0.0)
    both = [p for p in sweep["points"] if p["reference"] in ("exact-certified", "lemma-4.6")]
    lines += ["", f"Worst OT float error in units of its documented bound: {ot_units:.3g}. Where both OT routes run "
              f"(the exact certified route as reference), the bounds route's enclosure holds the exact one at "
              f"{sum(bool(p['contains']) for p in both)} of {len(both)} points."]
    if crossover:
        worst = max(r["units"] for r in crossover["rows"])
        rel = max((r["rel_error_one_minus"] or 0.0) for r in crossover["rows"] if r["route"] == "bounds")
        lines.append(f"OT route switch near rho = 1 (`ot_crossover.md`): worst float error {worst:.3g} of its bound, "
                     f"{sum(r['contains'] for r in crossover['rows'])} of {len(crossover['rows'])} references inside; "
                     f"1 - m within {rel:.2g} relative on the bounds side.")
    lines += ["", "## OT prior, W = 64: float ms / certified ms / relative width / route (float, certified: e exact, "
              "b bounds)", ""] + ot_matrix(sweep)
    lines += ["", f"## Points over target ({len(over)})", ""] + ([f"- {o}" for o in over] or ["none"])
    text = "\n".join(lines) + "\n"
    with open(args.out or os.path.join(args.results, "any_length_summary.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
