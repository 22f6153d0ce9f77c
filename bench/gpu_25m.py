"""The reference model at the paper's 25M size on one GPU, and the intervention over checkpoints.

Trains log-distance checkpoints (several seeds) and NoPE / RoPE / ALiBi baselines at
``--train-length`` (default 256), evaluates the loss beyond the training length at 4x and 8x,
and runs the intervention of the paper (only the bias beyond the training length changes)
on every log-distance checkpoint. Results are written after every run, so a run stopped
by its time limit still reports what finished.

Run (GPU): ``PYTHONPATH=. python bench/gpu_25m.py --out $OUT``; ``--tiny`` for a CPU smoke test.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from otprior.torch import ModelConfig, byte_corpus, evaluate_loss, intervene, train


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu_results")
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--train-length", type=int, default=256)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--budget", type=float, default=420.0, help="seconds after which no new run starts")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    size = dict(d_model=512, n_layers=8, n_heads=8, d_ff=2048) if not a.tiny else dict(d_model=32, n_layers=1, n_heads=2, d_ff=64)
    L = a.train_length if not a.tiny else 32
    steps = a.steps if not a.tiny else 5
    train_data, val = byte_corpus(max_bytes=20_000_000 if not a.tiny else 300_000)
    runs = [("log-distance", s) for s in range(a.seeds)] + [("nope", 0), ("rope", 0), ("alibi", 0)]
    results = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "train_length": L, "steps": steps, "runs": []}
    start = time.perf_counter()
    for scheme, seed in runs:
        if time.perf_counter() - start > a.budget:
            results["stopped_early"] = f"time budget {a.budget} s reached before {scheme} seed {seed}"
            break
        cfg = ModelConfig(scheme=scheme, train_length=L, **size)
        t0 = time.perf_counter()
        run = train(cfg, train_data, steps=steps, batch_size=64, lr=1e-3, seed=seed, device=device, bf16=device == "cuda")
        model = run.model.to(device)
        row = {
            "scheme": scheme,
            "seed": seed,
            "parameters": model.num_parameters(),
            "train_seconds": time.perf_counter() - t0,
            "final_train_loss": sum(run.losses[-20:]) / 20 if len(run.losses) >= 20 else run.losses[-1],
            "loss": {str(n): evaluate_loss(model, val, n, start=0 if n == L else L, batches=4, batch_size=8, device=device) for n in (L, 4 * L, 8 * L)},
        }
        if scheme == "log-distance":
            alphas = torch.cat([b.attn.pos.alpha().detach().cpu() for b in model.blocks])
            row["alpha"] = {"min": float(alphas.min()), "median": float(alphas.median()), "max": float(alphas.max())}
            row["intervention"] = intervene(model, val, eval_length=8 * L, shifts=(-0.5, 0.5), batches=4, batch_size=8, device=device)
        results["runs"].append(row)
        results["elapsed"] = time.perf_counter() - start
        (out / "gpu_results.json").write_text(json.dumps(results, indent=2))
        print(json.dumps({k: row[k] for k in ("scheme", "seed", "parameters", "train_seconds", "loss")}), flush=True)
    agree = [r["agree"] for row in results["runs"] for r in row.get("intervention", [])]
    results["intervention_agreement"] = [sum(agree), len(agree)]
    (out / "gpu_results.json").write_text(json.dumps(results, indent=2))
    print("intervention agreement", sum(agree), "of", len(agree))


if __name__ == "__main__":
    main()
