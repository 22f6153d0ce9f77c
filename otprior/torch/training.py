"""The trainer and the evaluation loss, on one process or under ``torchrun`` (DDP).

Data parallelism keeps the single-process loss curve: every rank draws the same global
batch from the same generator and trains on its own slice of it (equal slices), and
DistributedDataParallel averages the gradients, so the averaged gradient is the gradient
of the global mean loss, exactly as on one process (up to the order of float sums).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .data import sample_batch
from .model import ModelConfig, ReferenceModel

__all__ = ["TrainResult", "NonFiniteLoss", "ot_micro_batch", "train", "evaluate_loss", "evaluate_sequences", "choose_threads", "distributed_context"]


@dataclass
class TrainResult:
    """A trained model (on the CPU, in eval mode), its loss per step and the wall time.

    ``trace`` holds ``(step, values)`` pairs from the ``trace`` callback of :func:`train`.
    """

    model: ReferenceModel
    losses: list
    seconds: float
    trace: list = field(default_factory=list)


def choose_threads(requested="auto") -> int:
    """Intra-op threads for this machine.

    ``"auto"``: the CPUs this process may run on, less the current one-minute load average
    of other processes (at least one): on a busy machine, more threads than idle cores
    makes every step wait for the slowest thread. An integer is used as given.
    """
    if requested != "auto":
        n = int(requested)
        if n < 1:
            raise ValueError(f"threads={requested!r} is outside the valid domain: a positive integer or 'auto'")
        return n
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        load = 0.0
    return max(1, min(cpus, int(round(cpus - load + 1))))


def distributed_context():
    """``(rank, world_size)``; initialises the process group when started by ``torchrun``.

    With ``WORLD_SIZE > 1`` in the environment (as ``torchrun`` sets it) and no process
    group yet, one is created: NCCL when CUDA is available, gloo otherwise.
    """
    import torch.distributed as dist

    if dist.is_available() and not dist.is_initialized() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import datetime

        # a study spreading runs waits at a barrier for the slowest process: hours, not the default 30 minutes
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", timeout=datetime.timedelta(hours=12))
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def ot_micro_batch(cfg: ModelConfig, length: int, batch: int) -> int:
    """Sequences per forward pass so that one OT attention call stays under the allocation cap
    (32 bytes per score, :func:`otprior.torch.ot_attention.causal_ot_attention`); ``batch``
    for other schemes. ``0`` when one sequence is already over the cap."""
    if cfg.scheme != "causal-ot":
        return batch
    from ..limits import current

    return int(min(batch, current().max_bytes // (32 * cfg.n_heads * length * length)))


class NonFiniteLoss(ArithmeticError):
    """Training produced a non-finite loss (a diverging run); carries the step."""


def _rng_state(device):
    state = {"torch": torch.get_rng_state()}
    if str(device).startswith("cuda"):
        state["cuda"] = torch.cuda.get_rng_state(torch.device(device))
    return state


def _save_state(path, model, opt, sched, gen, step, losses, records, seconds, device):
    """The whole training state (model, optimiser, schedule, both generators, step, history),
    written through a temporary name and ``os.replace`` (a kill leaves the previous state)."""
    from .._output import write_file_safely

    state = {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
             "gen": gen.get_state(), "rng": _rng_state(device), "step": step, "losses": torch.tensor(losses, dtype=torch.float64),
             "trace": [[int(s), v] for s, v in records], "seconds": float(seconds)}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_file_safely(path, lambda tmp: torch.save(state, tmp), name="state")


def _load_state(path, limit):
    import io

    from .._files import read_regular

    raw = read_regular(path, limit, "state", follow=False)
    return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)


def train(cfg: ModelConfig, data, *, steps=300, batch_size=16, lr=3e-3, seed=0, device="cpu", log=None, bf16=False,
          trace=None, trace_every=10, data_parallel=True, state_path=None, save_every_s=300.0, stop=None) -> TrainResult:
    """Train a :class:`ReferenceModel` on random windows of ``cfg.train_length`` bytes (AdamW, cosine decay).

    ``device="cuda"`` with ``bf16=True`` trains under bfloat16 autocast. Under ``torchrun``
    with more than one process the model is wrapped in DistributedDataParallel and each
    rank trains on its slice of the same global batch (``batch_size`` must be a multiple
    of the number of processes); the recorded loss is the global mean. ``trace(model)``,
    if given, is called every ``trace_every`` steps (and after the last) and its return
    value recorded in ``TrainResult.trace``. ``data_parallel=False`` trains on this process
    alone even under ``torchrun`` (a study spreading whole runs over the processes).

    A causal-OT model whose batch would exceed the allocation cap in one attention call is
    trained in micro-batches (:func:`ot_micro_batch`): the gradient is the sum of the
    micro-batches' gradients of ``loss * share``, the gradient of the batch mean.

    Resumable: with ``state_path``, the full state (model, optimiser, schedule, the batch
    generator, torch's RNG, step, losses, trace) is saved every ``save_every_s`` seconds
    (rank 0) and loaded if present, so a killed run continues bit for bit from its last save.
    ``stop(step)``, if given, is asked after every save; ``True`` saves and returns ``None``
    (the caller resumes later). A non-finite loss raises :class:`NonFiniteLoss`.
    """
    rank, world = distributed_context() if data_parallel else (0, 1)
    if batch_size % world:
        raise ValueError(f"batch_size={batch_size} is outside the valid domain: a multiple of the {world} processes")
    if world > 1 and device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}"
    torch.manual_seed(seed)
    model = ReferenceModel(cfg).to(device)
    net = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, device_ids=[torch.device(device).index] if device.startswith("cuda") else None)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    gen = torch.Generator().manual_seed(seed)
    losses, records, first, spent = [], [], 0, 0.0
    if state_path is not None and Path(state_path).exists():
        state = _load_state(state_path, 64 * model.num_parameters() + (64 << 20))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        gen.set_state(state["gen"])
        torch.set_rng_state(state["rng"]["torch"])
        if "cuda" in state["rng"] and str(device).startswith("cuda"):
            torch.cuda.set_rng_state(state["rng"]["cuda"], torch.device(device))
        first, losses, spent = int(state["step"]), state["losses"].tolist(), float(state["seconds"])
        records = [(int(s), v) for s, v in state["trace"]]
        if log is not None and rank == 0:
            log(f"resumed at step {first} from {state_path}")
    share = batch_size // world
    micro = ot_micro_batch(cfg, cfg.train_length, share)
    if micro < 1:
        from .._validation import DomainError

        raise DomainError("train_length", cfg.train_length, "a length at which one OT sequence fits the allocation cap")
    start = last_save = time.perf_counter()
    model.train()
    for step in range(first, steps):
        batch = sample_batch(data, cfg.train_length, batch_size, gen)[rank * share : (rank + 1) * share].to(device)
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=device)
        for lo in range(0, share, micro):
            part = batch[lo : lo + micro]
            sync = world == 1 or lo + micro >= share  # DDP reduces the gradients once, after the last micro-batch
            with contextlib.nullcontext() if sync else net.no_sync():
                with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
                    logits = net(part[:, :-1])
                    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256).float(), part[:, 1:].reshape(-1))
                weight = part.shape[0] / share
                (loss * weight).backward()
            total = total + loss.detach() * weight
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        value = total
        if world > 1:
            import torch.distributed as dist

            dist.all_reduce(value)
            value = value / world
        losses.append(float(value))
        if not math.isfinite(losses[-1]):
            raise NonFiniteLoss(f"non-finite training loss {losses[-1]} at step {step}")
        if trace is not None and (step % trace_every == 0 or step == steps - 1):
            with torch.no_grad():
                records.append((step, trace(model)))
        if log is not None and rank == 0 and (step % 50 == 0 or step == steps - 1):
            log(f"step {step:5d} loss {losses[-1]:.4f}")
        now = time.perf_counter()
        if state_path is not None and step + 1 < steps and now - last_save >= save_every_s:
            if rank == 0:
                _save_state(state_path, model, opt, sched, gen, step + 1, losses, records, spent + now - start, device)
            last_save = now
            if stop is not None and stop(step + 1):
                return None
    model.eval()
    return TrainResult(model.to("cpu"), losses, spent + time.perf_counter() - start, records)


def _yarn_for(model, length, yarn):
    if yarn == "auto":
        if model.cfg.scheme == "rope" and length > model.cfg.train_length:
            return length / model.cfg.train_length
        return None
    return yarn


@torch.no_grad()
def evaluate_sequences(model, data, length, *, start=0, sequences=64, batch_size=8, seed=1234, device="cpu", yarn="auto"):
    """Per-sequence mean next-byte loss (nats) over positions ``>= start`` of windows of ``length`` bytes.

    Returns an array of ``sequences`` losses; the windows depend on ``seed`` alone, so two
    models evaluated with the same arguments are paired sequence by sequence.
    ``yarn="auto"`` evaluates a RoPE model beyond its training length with YaRN at scale
    ``length / train_length`` (the evaluation-time extension of the RoPE baseline); a
    number sets the scale, ``None`` evaluates plain RoPE.
    """
    model = model.to(device).eval()
    scale = _yarn_for(model, length, yarn)
    model.set_yarn(scale)
    if len(data) <= length + 1:
        raise ValueError(f"length={length} is outside the valid domain: below the data size {len(data)} - 1")
    # every window drawn first, so they depend on (seed, sequences) alone, not on how they are batched
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(data) - length - 1, (sequences,), generator=gen).tolist()
    step = ot_micro_batch(model.cfg, length, batch_size)
    if step < 1:
        from .._validation import DomainError

        raise DomainError("length", length, "an evaluation length at which one OT sequence fits the allocation cap")
    try:
        out = []
        for lo in range(0, sequences, step):
            part = starts[lo : lo + step]
            batch = torch.stack([data[s : s + length + 1] for s in part]).long().to(device)
            logits = model(batch[:, :-1]).float()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1), reduction="none")
            out.append(loss.view(len(part), length)[:, start:].mean(-1).double().cpu().numpy())
    finally:
        model.set_yarn(None)
    return np.concatenate(out)


@torch.no_grad()
def evaluate_loss(model, data, length, *, start=0, batches=8, batch_size=8, seed=1234, device="cpu", yarn="auto"):
    """Mean next-byte loss (nats) over positions ``>= start`` of ``batches`` batches of windows (see
    :func:`evaluate_sequences`, whose mean this is)."""
    seqs = evaluate_sequences(model, data, length, start=start, sequences=batches * batch_size, batch_size=batch_size,
                              seed=seed, device=device, yarn=yarn)
    return float(seqs.mean())
