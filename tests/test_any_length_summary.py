"""``bench/summarise_any_length.py`` on small made-up results: what it counts, flags and lists."""

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _module():
    spec = importlib.util.spec_from_file_location("_summarise_any_length", BENCH / "summarise_any_length.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ot_point(n, rho, W=64, float_ms=0.3, cert_ms=5.0, contains=None, units=0.01):
    return {"W": W, "n": n, "rho": rho, "route_float": "bounds", "route_cert": "bounds", "float": 0.5, "lo": 0.4,
            "hi": 0.6, "rel_width": 0.3, "cpu_float_ms": float_ms, "cpu_cert_ms": cert_ms, "cpu_dilution_ms": cert_ms,
            "reference": None if contains is None else "mpmath", "contains": contains, "float_error_units": units}


def test_summary_flags_every_point_over_target_and_counts_references(tmp_path):
    ns = [10**k for k in range(3, 19)] + ["1e300"]
    points = [_ot_point(n, 0.5) for n in ns]
    points[3] = _ot_point(10**6, 0.5, float_ms=1.7)  # over the float target
    points[0] = _ot_point(10**3, 0.5, float_ms=9.0, contains=True)  # slow, but below n = 1e6: no target there
    points[5] = _ot_point(10**8, 0.5, cert_ms=51.0, contains=False, units=2.5)  # two misses at one point
    points.append(_ot_point(10**9, 0.9))  # a family with one length: its missing lengths are named
    (tmp_path / "ot_sweep.json").write_text(json.dumps({"load_before": [1, 1, 1], "load_after": [1, 1, 1], "points": points}))
    enc = [{"what": "alibi", "n": "oo"}]
    enc += [{"what": "alibi", "n": f"1e{k}", "n_int": 10**k, "route": "geometric closed form", "float_s": 1e-5,
             "cert_s": 1e-5, "width": 2e-16, "ref_in": True, "float_ulps": 0.0} for k in range(3, 19)]
    enc.append({"what": "alibi", "n": "1e300", "n_int": int(1e300), "route": "refused: too long", "float_s": None})
    (tmp_path / "any_length.json").write_text(json.dumps({"encodings": enc, "biases": []}))
    out = tmp_path / "summary.md"
    rc = _module().main(["--results", str(tmp_path), "--out", str(out)])
    text = out.read_text()
    assert rc == 1
    over = text.split("## Points over target")[1]
    assert "(5)" in over.splitlines()[0]  # the dilution bound is held to the certified target too
    assert "OT rho=0.5 W=64 n=1e6: float 1.70 ms" in over and "n=1e8: cert 51.00 ms" in over and "n=1e8: dil 51.00 ms" in over
    assert "n=1e8: reference outside" in over and "alibi n=1e300: refused" in over
    assert "n=1e3:" not in over  # 9 ms at n = 1e3: below n = 1e6 there is no target
    row = next(line for line in text.splitlines() if line.startswith("| OT rho=0.5 W=64 |"))
    assert "| 1/2 |" in row and "| 2.5 |" in row and "1e3..1e300 (17)" in row
    row9 = next(line for line in text.splitlines() if line.startswith("| OT rho=0.9 W=64 |"))
    assert "missing 1e3" in row9
    alibi = next(line for line in text.splitlines() if line.startswith("| alibi |"))
    assert "| 16/16 |" in alibi and "0.0 ulp" in alibi
