"""One run of a study: train a model of one arm, evaluate it, and measure what the plan asks.

The plan and its validation live in :mod:`otprior.study` (no torch needed there); this
module executes a single run described by a plain dict and returns a plain dict, so the
study can write it to disk after every run.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from .data import byte_corpus
from .intervention import intervene
from .model import ModelConfig, save_model
from .train import measure_distant_mass
from .training import choose_threads, distributed_context, evaluate_sequences, train

__all__ = ["load_data", "execute_run", "setup_threads"]


def setup_threads(requested="auto") -> int:
    """Set torch's intra-op threads for this machine (:func:`~otprior.torch.training.choose_threads`)."""
    n = choose_threads(requested)
    torch.set_num_threads(n)
    return n


def load_data(data_spec: dict):
    """``(train, val)`` bytes for a plan's ``data`` table."""
    paths = data_spec.get("paths")
    return byte_corpus([str(p) for p in paths] if paths else None, max_bytes=int(data_spec.get("max_bytes", 2_000_000)))


def _alphas(model):
    return [block.attn.pos.alpha().detach().cpu().numpy().tolist() for block in model.blocks]


def execute_run(run: dict, plan: dict, data, *, checkpoint_dir=None, log=None, data_parallel=True) -> dict:
    """Train, evaluate and measure one run of a study.

    Parameters
    ----------
    run : dict
        ``id``, ``arm``, ``seed``, ``train_length``, ``config`` (a :class:`ModelConfig`'s
        fields), and ``measure``: ``{"intervention": {"shifts": [...], "eval_length": n},
        "distant_mass": {"window": W}, "trace_alpha": bool}`` (each optional).
    plan : dict
        The validated plan (``training``, ``evaluation``, ``resources`` tables).
    data : tuple
        ``(train, val)`` byte tensors.
    data_parallel : bool
        Under ``torchrun``: ``True`` trains this run with DistributedDataParallel over all
        processes; ``False`` trains it on this process alone.

    Returns
    -------
    dict
        ``loss`` (per evaluation length: per-sequence losses beyond the training length;
        at the training length itself: over all positions), training seconds and steps,
        the final training loss, the exponents and their trajectory (log-distance), the
        intervention rows and the distant-mass growth when asked.
    """
    tr, ev = plan["training"], plan["evaluation"]
    device = plan["resources"].get("device", "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("the plan asks for device 'cuda' and no GPU is available")
    cfg = ModelConfig(**run["config"])
    L = cfg.train_length
    measure = run.get("measure", {})
    trace = _alphas if measure.get("trace_alpha") else None
    t0 = time.perf_counter()
    result = train(cfg, data[0], steps=int(tr["steps"]), batch_size=int(tr["batch_size"]), lr=float(tr["lr"]),
                   seed=int(run["seed"]), device=device, bf16=bool(tr.get("bf16", False)) and device == "cuda",
                   trace=trace, trace_every=int(tr.get("trace_every", 10)), log=log, data_parallel=data_parallel)
    seconds = time.perf_counter() - t0
    model = result.model
    rank = distributed_context()[0] if data_parallel else 0
    record = {
        "id": run["id"],
        "arm": run["arm"],
        "scheme": cfg.scheme,
        "seed": int(run["seed"]),
        "train_length": L,
        "parameters": model.num_parameters(),
        "train_seconds": seconds,
        "seconds_per_step": seconds / int(tr["steps"]),
        "final_train_loss": float(np.mean(result.losses[-10:])),
        "loss": {},
    }
    kw = dict(sequences=int(ev["sequences"]), batch_size=int(ev["batch_size"]), seed=int(ev.get("seed", 1234)), device=device)
    record["loss"][str(L)] = evaluate_sequences(model, data[1], L, start=0, **kw).tolist()
    for n in ev["lengths"]:
        record["loss"][str(n)] = evaluate_sequences(model, data[1], int(n), start=L, **kw).tolist()
    if cfg.scheme == "log-distance":
        record["alpha"] = _alphas(model)
        record["alpha_margin"] = cfg.alpha_margin
        if trace is not None:
            record["alpha_trace"] = [[step, values] for step, values in result.trace]
    if "intervention" in measure:
        spec = measure["intervention"]
        record["intervention"] = intervene(model, data[1], eval_length=int(spec["eval_length"]), shifts=tuple(spec["shifts"]),
                                           sequences=int(ev["sequences"]), batch_size=int(ev["batch_size"]), device=device,
                                           level=float(plan["statistics"]["level"]),
                                           resamples=int(plan["statistics"]["resamples"]), seed=int(ev.get("seed", 1234)))
    if "distant_mass" in measure:
        W = int(measure["distant_mass"]["window"])
        n_max = int(max(ev["lengths"]))
        seqs = min(int(ev["sequences"]), 16)
        short = measure_distant_mass(model, data[1], L, W, sequences=seqs)["measured"]
        long = measure_distant_mass(model, data[1], n_max, W, sequences=seqs)["measured"]
        record["distant_mass"] = {"window": W, "lengths": [L, n_max], "at_train_length": short.tolist(),
                                  "at_longest": long.tolist(), "growth": (long - short).tolist()}
    if checkpoint_dir is not None and rank == 0:
        record["checkpoint"] = str(save_model(model, checkpoint_dir / run["id"].replace("/", "-")))
    record["run_seconds"] = time.perf_counter() - t0
    return record
