"""Cost of the trainable OT attention: against the numpy operator and against SDPA softmax attention.

Timings are CPU time (``time.process_time``) of warm calls on one thread, the median of runs
interleaved with their baseline in this process:

1. Forward against :func:`otprior.causal_ot_attention` (numpy, float64) on the same scores
   and tolerance, with the fixed point in float32 (the default for float32 scores) and in
   float64; backward against forward (float32).
2. Forward + backward of one attention layer (two heads, head size 32, batch 1) with OT
   attention (rho = 0.5 and 0.9; the default ``solver="auto"`` and ``solver="plain"``)
   and with ``torch.nn.functional.scaled_dot_product_attention`` (causal softmax), all three
   interleaved: the time ratios (target: within 60x at T = 1024) and the speed-up of
   the default over the plain iteration (the default mixes from rho = 0.6 on, and on the CPU
   beyond T = 512). Peak memory is measured in a fresh process per layer
   (peak resident set size above the size after imports), the only way to isolate it.
3. The same layer in float64 at rho = 0.9 (the default solver) with and without the forward
   solve's Anderson pairs kept in the adjoint (``_PIN_RHO``; float64 inputs only), interleaved with
   float64 SDPA: the time ratios and the backward's share of the speed-up.

Run: ``python bench/bench_ot_attention.py [--quick] [--max-length 2048]``. Writes
``bench/results/ot_attention.json``.
"""

from __future__ import annotations

import os
import sys

# one thread for every BLAS, fixed before numpy (and torch) start their threads; only when
# run as a script (an importing test process keeps its settings)
if __name__ == "__main__":
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared timing
from _timing import interleaved  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "ot_attention.json"




def layer(kind, T, heads=2, hd=32, rho=0.5, seed=0, solver="auto", dtype=None):
    """One attention layer's forward + backward; returns a closure."""
    import torch

    from otprior.torch.ot_attention import causal_ot_attention

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, T, hd, generator=g, requires_grad=True, dtype=dtype) for _ in range(3))

    def run():
        if kind == "sdpa":
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = q @ k.transpose(-1, -2) / hd**0.5
            y = causal_ot_attention(s, rho, solver=solver) @ v
        y.sum().backward()
        for t in (q, k, v):
            t.grad = None

    return run


def _status_kb(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def child(kind, T, rho, solver="auto"):
    """Peak memory (MB above the resident size before the layer) of one layer, in this process.

    The kernel's high-water mark is reset first (``echo 5 > /proc/self/clear_refs``), so
    the peak is that of the layer's forward and backward alone.
    """
    import torch

    torch.set_num_threads(1)
    run = layer(kind, T, rho=rho, solver=solver)
    Path("/proc/self/clear_refs").write_text("5")
    base = _status_kb("VmRSS")
    run()
    print(json.dumps({"peak_mb": (_status_kb("VmHWM") - base) / 1024}))


def against_numpy(lengths, reps, rho=0.5, tol=1e-5):
    import numpy as np
    import torch

    import otprior
    from otprior.torch.ot_attention import causal_ot_attention

    rows = []
    for T in lengths:
        g = torch.Generator().manual_seed(T)
        S = torch.randn(2, T, T, generator=g)
        S64 = S.double().numpy()
        S64t = S.double()
        Sg = S.clone().requires_grad_()
        G = torch.randn(2, T, T, generator=g)

        def fwd_bwd(Sg=Sg, G=G):
            A = causal_ot_attention(Sg, rho, tol=tol)
            A.backward(G)
            Sg.grad = None
            return A

        med, out = interleaved(
            {
                "numpy": lambda S64=S64: otprior.causal_ot_attention(S64, rho, dual_tol=tol),
                "forward": lambda Sg=Sg: causal_ot_attention(Sg.detach(), rho, tol=tol),
                "forward_float64": lambda S64t=S64t: causal_ot_attention(S64t, rho, tol=tol),
                "forward_backward": fwd_bwd,
            },
            reps,
        )
        ref = otprior.causal_ot_attention(S64, rho, dual_tol=1e-12)
        row = {
            "T": T,
            "heads": 2,
            "rho": rho,
            "numpy_s": med["numpy"],
            "forward_s": med["forward"],
            "forward_float64_s": med["forward_float64"],
            "backward_s": med["forward_backward"] - med["forward"],
            "forward_over_numpy": med["forward"] / med["numpy"],
            "forward_float64_over_numpy": med["forward_float64"] / med["numpy"],
            "backward_over_forward": (med["forward_backward"] - med["forward"]) / med["forward"],
            "max_abs_error_float32": float(np.abs(out["forward"].double().numpy() - ref).max()),
            "max_abs_error_float64": float(np.abs(out["forward_float64"].numpy() - ref).max()),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def against_sdpa(lengths, rhos, reps, memory=True):
    import torch

    torch.set_num_threads(1)
    rows = []
    for T in lengths:
        for rho in rhos:
            funcs = {
                "sdpa": layer("sdpa", T),
                "ot": layer("ot", T, rho=rho),
                "ot_plain": layer("ot", T, rho=rho, solver="plain"),
            }
            med, _ = interleaved(funcs, reps)
            row = {
                "T": T, "rho": rho, "sdpa_s": med["sdpa"], "ot_s": med["ot"], "time_ratio": med["ot"] / med["sdpa"],
                "ot_plain_s": med["ot_plain"], "time_ratio_plain": med["ot_plain"] / med["sdpa"],
                "speedup_over_plain": med["ot_plain"] / med["ot"],
            }
            if memory:
                for kind, solver in (("sdpa", "auto"), ("ot", "auto"), ("ot_plain", "plain")):
                    res = subprocess.run(
                        [sys.executable, __file__, "--child", kind.split("_")[0], str(T), str(rho), solver],
                        capture_output=True, text=True, check=True,
                    )
                    row[f"{kind}_peak_mb"] = json.loads(res.stdout.strip().splitlines()[-1])["peak_mb"]
                row["memory_ratio"] = row["ot_peak_mb"] / max(row["sdpa_peak_mb"], 1e-3)
                row["memory_ratio_plain"] = row["ot_plain_peak_mb"] / max(row["sdpa_peak_mb"], 1e-3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def without_pairs(run):
    """``run`` with the adjoint's use of the forward's Anderson pairs switched off (``_PIN_RHO = 0``)."""
    from otprior.torch import ot_attention as mod

    def f():
        old = mod._PIN_RHO
        mod._PIN_RHO = 0.0
        try:
            return run()
        finally:
            mod._PIN_RHO = old

    return f


def float64_pairs(lengths, reps, rho=0.9):
    import torch

    torch.set_num_threads(1)
    rows = []
    for T in lengths:
        funcs = {
            "sdpa": layer("sdpa", T, dtype=torch.float64),
            "ot": layer("ot", T, rho=rho, dtype=torch.float64),
            "ot_no_pairs": without_pairs(layer("ot", T, rho=rho, dtype=torch.float64)),
        }
        med, _ = interleaved(funcs, reps)
        row = {"T": T, "rho": rho, "dtype": "float64", "sdpa_s": med["sdpa"], "ot_s": med["ot"],
               "ot_no_pairs_s": med["ot_no_pairs"], "time_ratio": med["ot"] / med["sdpa"],
               "time_ratio_no_pairs": med["ot_no_pairs"] / med["sdpa"], "speedup": med["ot_no_pairs"] / med["ot"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv=None, *, sizes=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=None, help="interleaved runs per candidate (default 3; 1 quick)")
    ap.add_argument("--out", default=None, help="where to write the JSON (default: the committed results file; a "
                    "--quick run writes nothing unless told, so it never replaces the figures the README quotes)")
    ap.add_argument("--child", nargs="+")
    a = ap.parse_args(argv)
    if a.out is None and not a.quick:
        a.out = str(RESULTS)
    if a.child:
        child(a.child[0], int(a.child[1]), float(a.child[2]), *a.child[3:4])
        return None
    import torch

    torch.set_num_threads(1)
    lengths = [64, 128] if a.quick else [T for T in (256, 512, 1024, 2048) if T <= a.max_length]
    cfg = {
        "numpy_lengths": [T for T in lengths if T <= 1024],
        "sdpa_lengths": lengths,
        "rhos": [0.5, 0.9],
        "reps": 1 if a.quick else 3,
        "memory": not a.quick,
        "float64_lengths": lengths,
    }
    cfg.update(sizes or {})
    if "reps" in cfg and a.reps is not None:
        cfg["reps"] = a.reps
    out = {"quick": a.quick, "threads": 1, "clock": "process_time (CPU), median of interleaved warm runs",
           "torch": torch.__version__, "tol": 1e-5, "load_average": list(os.getloadavg())}
    print("== forward against the numpy operator; backward against forward")
    out["against_numpy"] = against_numpy(cfg["numpy_lengths"], cfg["reps"])
    print("== one layer, forward + backward, against causal SDPA")
    out["against_sdpa"] = against_sdpa(cfg["sdpa_lengths"], cfg["rhos"], cfg["reps"], cfg["memory"])
    print("== float64, rho = 0.9: the adjoint with and without the forward's Anderson pairs")
    out["float64_pairs"] = float64_pairs(cfg["float64_lengths"], cfg["reps"])
    out["load_average_after"] = list(os.getloadavg())
    if a.out is None:
        print("quick run: nothing written (--out PATH keeps it)")
        return out
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
