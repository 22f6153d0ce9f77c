"""Cost of the trainable OT attention: against the numpy operator and against SDPA softmax attention.

1. Forward against :func:`otprior.causal_ot_attention` (numpy, float64) on the same scores,
   the same tolerance and the same thread count, with the fixed point in float32 (the
   default for float32 scores) and in float64; backward against forward (float32).
2. Forward + backward of one attention layer (two heads, head size 32, batch 1) with OT
   attention and with ``torch.nn.functional.scaled_dot_product_attention`` (causal softmax)
   at T = 256 ... 2048: time ratio, and peak memory, each measured in a fresh process
   (peak resident set size above the process's size after imports).

Run: ``PYTHONPATH=. python bench/bench_ot_attention.py [--max-length 2048] [--threads 1]``
(about a minute at the default lengths on one idle core). Writes
``bench/results/ot_attention.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# the thread count must be fixed before numpy's BLAS starts its threads
_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv[:-1] else "1"
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads


def _best(fn, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def layer(kind, T, heads=2, hd=32, rho=0.5, seed=0):
    """One attention layer's forward + backward; returns a closure."""
    import torch

    from otprior.torch.ot_attention import causal_ot_attention

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, T, hd, generator=g, requires_grad=True) for _ in range(3))

    def run():
        if kind == "sdpa":
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = q @ k.transpose(-1, -2) / hd**0.5
            y = causal_ot_attention(s, rho) @ v
        y.sum().backward()
        for t in (q, k, v):
            t.grad = None

    return run


def _status_kb(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def child(kind, T, threads):
    """Peak memory (MB above the resident size before the layer) and time of one layer, in this process.

    The kernel's high-water mark is reset first (``echo 5 > /proc/self/clear_refs``), so
    the peak is that of the layer's forward and backward alone.
    """
    import torch

    torch.set_num_threads(threads)
    run = layer(kind, T)
    Path("/proc/self/clear_refs").write_text("5")
    base = _status_kb("VmRSS")
    t = time.perf_counter()
    run()
    seconds = time.perf_counter() - t
    peak = _status_kb("VmHWM")
    print(json.dumps({"seconds": seconds, "peak_mb": (peak - base) / 1024}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "ot_attention.json"))
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], int(a.child[1]), a.threads)
        return
    import numpy as np
    import torch

    import otprior
    from otprior.torch.ot_attention import causal_ot_attention

    torch.set_num_threads(a.threads)
    rho, tol = 0.5, 1e-5
    out = {"threads": a.threads, "rho": rho, "tol": tol, "against_numpy": [], "against_sdpa": []}
    for T in (256, 512, 1024):
        if T > a.max_length:
            break
        g = torch.Generator().manual_seed(T)
        S = torch.randn(2, T, T, generator=g)
        S64 = S.double().numpy()
        reps = 3 if T <= 512 else 1
        t_np = _best(lambda S64=S64: otprior.causal_ot_attention(S64, rho, tol=tol), reps)
        Sg = S.clone().requires_grad_()
        t_fw = _best(lambda Sg=Sg: causal_ot_attention(Sg, rho, tol=tol), reps)
        S64t = S.double()
        t_fw64 = _best(lambda S64t=S64t: causal_ot_attention(S64t, rho, tol=tol), reps)
        A = causal_ot_attention(Sg, rho, tol=tol)
        G = torch.randn_like(A)

        def backward(Sg=Sg, G=G):
            A2 = causal_ot_attention(Sg, rho, tol=tol)
            t = time.perf_counter()
            A2.backward(G)
            return time.perf_counter() - t

        backward()  # the autograd engine's first call starts its threads
        t_bw = min(backward() for _ in range(reps))
        err = float(np.abs(A.detach().double().numpy() - otprior.causal_ot_attention(S64, rho, tol=1e-12)).max())
        row = {"T": T, "heads": 2, "numpy_s": t_np, "forward_s": t_fw, "forward_float64_s": t_fw64, "backward_s": t_bw,
               "forward_over_numpy": t_fw / t_np, "forward_float64_over_numpy": t_fw64 / t_np, "backward_over_forward": t_bw / t_fw, "max_abs_error_float32": err}
        out["against_numpy"].append(row)
        print(json.dumps(row), flush=True)
    T = 256
    while T <= a.max_length:
        row = {"T": T}
        for kind in ("sdpa", "ot"):
            res = subprocess.run([sys.executable, __file__, "--child", kind, str(T), "--threads", str(a.threads)],
                                 capture_output=True, text=True, check=True, env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
            row[kind] = json.loads(res.stdout.strip().splitlines()[-1])
        row["time_ratio"] = row["ot"]["seconds"] / row["sdpa"]["seconds"]
        row["memory_ratio"] = row["ot"]["peak_mb"] / max(row["sdpa"]["peak_mb"], 1e-3)
        out["against_sdpa"].append(row)
        print(json.dumps(row), flush=True)
        T *= 2
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
