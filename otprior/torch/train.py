"""Training data, the trainer, measurement of attention mass, and the intervention.

Default data: the source text of the Python standard library, byte-level (every machine
with Python has it; nothing is downloaded). Any text files can be named instead.
"""

from __future__ import annotations

import math
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .model import ModelConfig, ReferenceModel


def byte_corpus(paths=None, *, max_bytes=4_000_000, val_fraction=0.1):
    """``(train, val)`` uint8 tensors of bytes: the named files, or the standard library's ``.py`` files."""
    if paths is None:
        root = Path(sysconfig.get_paths()["stdlib"])
        paths = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts)
    chunks, total = [], 0
    for p in paths:
        data = Path(p).read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    if total < 10_000:
        raise ValueError(f"paths hold {total} bytes; the corpus needs at least 10000")
    blob = np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8)
    split = int(len(blob) * (1 - val_fraction))
    return torch.from_numpy(blob[:split].copy()), torch.from_numpy(blob[split:].copy())


def sample_batch(data, length, batch_size, generator):
    """``batch_size`` random windows of ``length + 1`` bytes, as int64."""
    starts = torch.randint(0, len(data) - length - 1, (batch_size,), generator=generator)
    return torch.stack([data[s : s + length + 1] for s in starts.tolist()]).long()


@dataclass
class TrainResult:
    model: ReferenceModel
    losses: list
    seconds: float


def train(cfg: ModelConfig, data, *, steps=300, batch_size=16, lr=3e-3, seed=0, device="cpu", log=None, bf16=False) -> TrainResult:
    """Train a :class:`ReferenceModel` on random windows of ``cfg.train_length`` bytes (AdamW, cosine decay).

    ``device="cuda"`` with ``bf16=True`` trains under bfloat16 autocast (the paper's 25M
    size takes minutes on one GPU; ``bench/gpu_25m.py``).
    """
    torch.manual_seed(seed)
    model = ReferenceModel(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    gen = torch.Generator().manual_seed(seed)
    losses, start = [], time.perf_counter()
    model.train()
    for step in range(steps):
        batch = sample_batch(data, cfg.train_length, batch_size, gen).to(device)
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            loss = model.loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if log is not None and (step % 50 == 0 or step == steps - 1):
            log(f"step {step:5d} loss {losses[-1]:.4f}")
    model.eval()
    return TrainResult(model.to("cpu"), losses, time.perf_counter() - start)


@torch.no_grad()
def evaluate_loss(model, data, length, *, start=0, batches=8, batch_size=8, seed=1234, device="cpu"):
    """Mean next-byte loss (nats) over positions ``>= start`` of windows of ``length`` bytes."""
    model = model.to(device).eval()
    gen = torch.Generator().manual_seed(seed)
    total, count = 0.0, 0
    for _ in range(batches):
        batch = sample_batch(data, length, batch_size, gen).to(device)
        logits = model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1), reduction="none")
        loss = loss.view(batch_size, length)[:, start:]
        total += float(loss.sum())
        count += loss.numel()
    return total / count


@torch.no_grad()
def measure_distant_mass(model, data, length, window, *, sequences=8, seed=4321):
    """Measured attention mass on keys at distance ``>= window`` from the last query.

    Returns a dict of arrays of shape ``(layers, heads)``: ``measured`` (mean over sequences),
    ``content_bound`` (largest half-spread of the last row's content scores: the ``B`` of
    Theorem 10 that these rows satisfy), and ``band`` ``(lower, upper)``, the prior's
    prediction for every row with that content bound. Only for schemes with a bias
    that depends on distance alone.
    """
    from ..encodings import ALiBi, KerpleLog, LogDistance, NoPE

    model = model.eval()
    gen = torch.Generator().manual_seed(seed)
    batch = sample_batch(data, length - 1, sequences, gen)
    maps = model.attention_maps(batch)
    L, H = len(maps), model.cfg.n_heads
    measured = np.zeros((L, H))
    bound = np.zeros((L, H))
    band = np.zeros((2, L, H))
    for layer, (attn, content) in enumerate(maps):
        last = attn[:, :, -1, :]  # (B, H, T): query = last position
        far = last[:, :, : length - window].sum(-1)  # keys at distance >= window
        measured[layer] = far.mean(0).numpy()
        c = content[:, :, -1, :]
        bound[layer] = (0.5 * (c.amax(-1) - c.amin(-1))).amax(0).numpy()
        pos = model.blocks[layer].attn.pos
        for h in range(H):
            s = model.cfg.scheme
            if s == "log-distance":
                enc = LogDistance(float(pos.alpha()[h]), logit_bound=float(bound[layer, h]))
            elif s == "alibi":
                enc = ALiBi(float(pos.slopes[h]), logit_bound=float(bound[layer, h]))
            elif s == "kerple-log":
                enc = KerpleLog(float(pos.bias_p.clamp(min=0.01)[h]), float(pos.bias_a.clamp(min=0.01)[h]), logit_bound=float(bound[layer, h]))
            elif s in ("nope", "rope"):
                enc = NoPE(float(bound[layer, h]))
            else:
                raise ValueError(f"scheme={s!r}: measure_distant_mass needs a bias that depends on distance alone")
            band[:, layer, h] = enc.distant_mass_range(window, length)
    return {"measured": measured, "content_bound": bound, "band": band}


@torch.no_grad()
def intervene(model, data, *, eval_length, shifts=(-0.5, 0.5), train_length=None, batches=8, batch_size=8, device="cpu"):
    """Change only the log-distance bias beyond the training length and compare with the prior.

    For each shift, every head's exponent beyond ``L = train_length`` becomes
    ``alpha + shift`` (steeper for ``shift > 0``), continuous at ``L``. The prior predicts the
    change of attention mass beyond ``L`` at ``eval_length`` (less for a steeper bias); the
    prediction for the loss is that it moves with that mass (more attention on distances
    never seen in training, higher loss). Returns one dict per shift with the predicted
    and measured directions and whether they agree.
    """
    if model.cfg.scheme != "log-distance":
        raise ValueError(f"scheme={model.cfg.scheme!r}: the intervention acts on the log-distance bias")
    L = int(train_length or model.cfg.train_length)
    base = evaluate_loss(model, data, eval_length, start=L, batches=batches, batch_size=batch_size, device=device)
    d = np.arange(eval_length)

    def far_mass(alpha, new):
        # prior mass beyond L at eval_length under the bent bias (exponent `new` for d >= L)
        logw = np.where(d < L, -alpha * np.log1p(d), -alpha * np.log1p(L) - new * (np.log1p(d) - np.log1p(L)))
        w = np.exp(logw - logw.max())
        return w[L:].sum() / w.sum()

    alphas = np.concatenate([block.attn.pos.alpha().detach().cpu().numpy() for block in model.blocks])
    before = np.mean([far_mass(a, a) for a in alphas])
    rows = []
    for shift in shifts:
        after = np.mean([far_mass(a, a + shift) for a in alphas])
        model.set_bias_beyond(L, shift)
        changed = evaluate_loss(model, data, eval_length, start=L, batches=batches, batch_size=batch_size, device=device)
        model.set_bias_beyond(None, None)
        predicted = int(np.sign(after - before))
        measured = int(np.sign(changed - base))
        rows.append(
            {
                "shift": shift,
                "prior_far_mass_before": float(before),
                "prior_far_mass_after": float(after),
                "predicted_loss_direction": predicted,
                "loss_before": base,
                "loss_after": changed,
                "measured_loss_direction": measured,
                "agree": predicted == measured,
            }
        )
    return rows


def intervene_command(args):
    """The ``otprior intervene`` command: the intervention on each checkpoint, and the agreement."""
    import json

    from .model import load_model

    data = byte_corpus([str(p) for p in args.data] if args.data else None, max_bytes=args.max_bytes)[1]
    results = []
    for path in args.checkpoints:
        model = load_model(path)
        rows = intervene(model, data, eval_length=args.eval_length, shifts=tuple(args.shifts), batches=args.batches)
        results.append({"checkpoint": str(path), "train_length": model.cfg.train_length, "rows": rows})
    agree = sum(r["agree"] for res in results for r in res["rows"])
    total = sum(len(res["rows"]) for res in results)
    if args.json:
        print(json.dumps({"results": results, "agree": agree, "total": total}, indent=2))
        return
    for res in results:
        print(f"{res['checkpoint']} (trained at {res['train_length']}, evaluated at {args.eval_length}):")
        for r in res["rows"]:
            print(
                f"  shift {r['shift']:+.2f}: prior mass beyond L {r['prior_far_mass_before']:.4f} -> {r['prior_far_mass_after']:.4f}, "
                f"loss {r['loss_before']:.4f} -> {r['loss_after']:.4f}: predicted {r['predicted_loss_direction']:+d}, "
                f"measured {r['measured_loss_direction']:+d} {'agree' if r['agree'] else 'DISAGREE'}"
            )
    print(f"agreement: {agree} of {total}")
