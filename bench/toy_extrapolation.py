"""Toy run on the CPU: train at one length, evaluate at 4x and 8x, and hold the result against
the theory (bounded encodings should lose less beyond the training length than diluting ones),
then the intervention of the paper on every log-distance checkpoint.

RoPE is evaluated beyond its training length with YaRN at scale ``n / L`` (the
evaluation-time extension), and the number of threads follows the machine's idle cores.
The preregistered version of this comparison, with intervals and decision rules, is
``plans/cpu-130k.toml`` (:func:`otprior.study.run_study`).

Run: ``python bench/toy_extrapolation.py [--steps 400] [--seeds 3] [--out toy_results] [--threads auto]``
(about two minutes on two idle cores). Writes ``results.json``, ``extrapolation.png`` and the
checkpoints into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from otprior import classify
from otprior.torch import ModelConfig, byte_corpus, evaluate_loss, intervene, save_model, train
from otprior.torch.training import choose_threads

SCHEMES = ["nope", "rope", "alibi", "kerple-log", "log-distance", "cable"]


@torch.no_grad()
def verdict(model):
    """The theory's verdict for a trained model, from its own positional parameters."""
    if model.cfg.scheme == "cable":
        return "bounded (content-dependent increments)"
    kinds = []
    for block in model.blocks:
        pos = block.attn.pos
        for h in range(model.cfg.n_heads):
            enc = pos.head_encoding(h)  # the registry encoding of the head's bias
            kinds.append(classify(enc).kind)
    n_bounded = kinds.count("bounded")
    return "bounded" if n_bounded == len(kinds) else "diluting" if n_bounded == 0 else f"mixed ({n_bounded}/{len(kinds)} heads bounded)"


def main(steps=400, seeds=3, out="toy_results", train_length=64, threads="auto"):
    torch.set_num_threads(choose_threads(threads))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    train_data, val = byte_corpus(max_bytes=2_000_000)
    lengths = [train_length, 4 * train_length, 8 * train_length]
    results = []
    start = time.perf_counter()
    for scheme in SCHEMES:
        for seed in range(seeds):
            cfg = ModelConfig(scheme=scheme, train_length=train_length)
            run = train(cfg, train_data, steps=steps, batch_size=16, seed=seed)
            path = save_model(run.model, out / f"{scheme}-seed{seed}")
            losses = {str(n): evaluate_loss(run.model, val, n, start=0 if n == train_length else train_length) for n in lengths}
            row = {"scheme": scheme, "seed": seed, "checkpoint": str(path), "verdict": verdict(run.model), "train_seconds": run.seconds, "loss": losses}
            row["degradation_8x"] = losses[str(lengths[2])] - losses[str(lengths[0])]
            if scheme == "log-distance":
                row["intervention"] = intervene(run.model, val, eval_length=lengths[2], shifts=(-0.5, 0.5))
            results.append(row)
            print(f"{scheme:13s} seed {seed}: {row['verdict']:<40s} loss {losses[str(lengths[0])]:.3f} / {losses[str(lengths[1])]:.3f} / {losses[str(lengths[2])]:.3f}")
    elapsed = time.perf_counter() - start

    def mean_deg(kind):
        vals = [r["degradation_8x"] for r in results if r["verdict"].startswith(kind)]
        return float(np.mean(vals)) if vals else float("nan")

    summary = {
        "train_length": train_length,
        "eval_lengths": lengths[1:],
        "steps": steps,
        "seeds": seeds,
        "seconds": elapsed,
        "mean_degradation_8x_bounded": mean_deg("bounded"),
        "mean_degradation_8x_diluting": mean_deg("diluting"),
        "ordering_as_predicted": mean_deg("bounded") < mean_deg("diluting"),
        "intervention_agreement": [sum(r["agree"] for x in results if "intervention" in x for r in x["intervention"]), sum(len(x["intervention"]) for x in results if "intervention" in x)],
    }
    (out / "results.json").write_text(json.dumps({"summary": summary, "runs": results}, indent=2))
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.subplots()
    for i, scheme in enumerate(SCHEMES):
        rows = [r for r in results if r["scheme"] == scheme]
        mean = [np.mean([r["loss"][str(n)] for r in rows]) for n in lengths]
        ax.plot(lengths, mean, marker="o", color=f"C{i}", ls="-" if rows[0]["verdict"].startswith("bounded") else "--", label=f"{scheme} ({rows[0]['verdict'].split(' ')[0]})")
    ax.set(xscale="log", xlabel="evaluation length (bytes); loss over positions beyond the training length", ylabel="loss (nats / byte)", title=f"trained at {train_length}, evaluated at 4x and 8x")
    ax.legend(fontsize=8)
    fig.savefig(out / "extrapolation.png", dpi=120)
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default="toy_results")
    parser.add_argument("--threads", default="auto")
    a = parser.parse_args()
    main(a.steps, a.seeds, a.out, threads=a.threads if a.threads == "auto" else int(a.threads))
