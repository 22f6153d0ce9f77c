"""Compatibility module: data, training, measurement and the intervention in one namespace.

The code lives by job in :mod:`otprior.torch.data`, :mod:`otprior.torch.training` and
:mod:`otprior.torch.intervention`; the measurement of attention mass is here until it
moves beside the checkpoint measurements.
"""

from __future__ import annotations

import numpy as np
import torch

from .data import byte_corpus, sample_batch
from .intervention import bootstrap_interval, intervene, intervene_checkpoints
from .training import TrainResult, choose_threads, evaluate_loss, evaluate_sequences, train

__all__ = [
    "byte_corpus",
    "sample_batch",
    "TrainResult",
    "train",
    "evaluate_loss",
    "evaluate_sequences",
    "choose_threads",
    "measure_distant_mass",
    "intervene",
    "intervene_checkpoints",
    "bootstrap_interval",
    "intervene_command",
]


@torch.no_grad()
def measure_distant_mass(model, data, length, window, *, sequences=8, seed=4321):
    """Measured attention mass on keys at distance ``>= window`` from the last query.

    Returns a dict of arrays of shape ``(layers, heads)``: ``measured`` (mean over sequences),
    ``content_bound`` (largest half-spread of the last row's content scores: the ``B`` of
    Theorem 10 that these rows satisfy), and ``band`` ``(lower, upper)``, the prior's
    prediction for every row with that content bound. Only for schemes with a bias
    that depends on distance alone.
    """
    from ..limits import current

    model = model.eval()
    gen = torch.Generator().manual_seed(seed)
    batch = sample_batch(data, length - 1, sequences, gen)
    L, H = model.cfg.n_layers, model.cfg.n_heads
    # the maps of every layer of a chunk of sequences are held at once: chunks under the allocation cap
    chunk = max(1, current().max_bytes // (8 * L * H * length * length))
    measured = np.zeros((L, H))
    bound = np.zeros((L, H))
    band = np.zeros((2, L, H))
    for lo in range(0, sequences, chunk):
        part = batch[lo : lo + chunk]
        for layer, (attn, content) in enumerate(model.attention_maps(part)):
            last = attn[:, :, -1, :]  # (B, H, T): query = last position
            far = last[:, :, : length - window].sum(-1)  # keys at distance >= window
            measured[layer] += far.sum(0).numpy() / sequences
            c = content[:, :, -1, :]
            bound[layer] = np.maximum(bound[layer], (0.5 * (c.amax(-1) - c.amin(-1))).amax(0).numpy())
    for layer in range(L):
        pos = model.blocks[layer].attn.pos
        for h in range(H):
            enc = pos.head_encoding(h, logit_bound=float(bound[layer, h]))
            if enc is None:
                raise ValueError(f"scheme={model.cfg.scheme!r}: measure_distant_mass needs a bias that depends on distance alone")
            band[:, layer, h] = enc.distant_mass_range(window, length)
    return {"measured": measured, "content_bound": bound, "band": band}


def intervene_command(args):
    """The ``otprior intervene`` command: the intervention on each checkpoint, and the agreement."""
    import json

    data = byte_corpus([str(p) for p in args.data] if args.data else None, max_bytes=args.max_bytes)[1]
    out = intervene_checkpoints(args.checkpoints, data, eval_length=args.eval_length, shifts=args.shifts, batches=args.batches)
    results, agree, total = out["results"], out["agree"], out["total"]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for res in results:
        print(f"{res['checkpoint']} (trained at {res['train_length']}, evaluated at {args.eval_length}):")
        for r in res["rows"]:
            print(
                f"  shift {r['shift']:+.2f}: prior mass beyond L {r['prior_far_mass_before']:.4f} -> {r['prior_far_mass_after']:.4f}, "
                f"loss {r['loss_before']:.4f} -> {r['loss_after']:.4f}: predicted {r['predicted_loss_direction']:+d}, "
                f"change {r['loss_change']:+.4f} [{r['interval'][0]:+.4f}, {r['interval'][1]:+.4f}]: {r['verdict']}"
            )
    print(f"in the predicted direction (interval excludes zero): {agree} of {total}")
