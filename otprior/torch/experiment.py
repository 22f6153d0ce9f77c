"""One run of a study: train a model of one arm, evaluate it, and measure what the plan asks.

The plan and its validation live in :mod:`otprior.study` (no torch needed there); this
module executes a single run described by a plain dict and returns a plain dict, so the
study can write it to disk after every run. Also here: the data (read with the size and
type checks of :mod:`otprior._files`, pinned by SHA-256), the n-gram count baselines, the
side-by-side cost measurement and the provenance of every record.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from .._validation import ConvergenceError, DomainError
from .intervention import intervene
from .model import ModelConfig, load_model, save_model
from .train import measure_distant_mass
from .training import NonFiniteLoss, choose_threads, distributed_context, evaluate_sequences, sample_batch, train

__all__ = ["load_data", "execute_run", "setup_threads", "ngram_record", "ngram_losses", "measure_cost", "count_work",
           "run_provenance", "estimate_time", "StudyData"]


def setup_threads(requested="auto") -> int:
    """Set torch's intra-op threads for this machine (:func:`~otprior.torch.training.choose_threads`)."""
    n = choose_threads(requested)
    torch.set_num_threads(n)
    return n


class StudyData(tuple):
    """``(train, val)`` byte tensors with ``sha256`` (of the bytes used), ``nbytes`` and ``files``."""


def load_data(data_spec: dict, files=None, *, val_fraction=0.1) -> StudyData:
    """``(train, val)`` bytes for a plan's ``data`` table.

    ``files``: ``(path, size)`` pairs from :func:`otprior.study.corpus_files` (default:
    computed here). Each file is read as a regular file with a bounded read; the first
    ``max_bytes`` bytes of their concatenation are the corpus; every tenth block of 64 KiB (smaller for
    a small corpus: at least four validation blocks) is the validation split (``val_fraction = 0.1``), the rest the training split. When the plan pins
    ``data.sha256``, other bytes (another interpreter's standard library, an edited file) are
    refused with the field named.
    """
    from .._files import read_regular
    from ..study import PlanError, corpus_files, split_block

    max_bytes = int(data_spec.get("max_bytes", 2_000_000))
    files = corpus_files(data_spec) if files is None else files
    chunks, total = [], 0
    for i, (path, _) in enumerate(files):
        field = f"data.paths[{i}]" if data_spec.get("paths") else "data"
        chunk = read_regular(path, max_bytes - total, field, prefix=True, error=PlanError)
        chunks.append(chunk)
        total += len(chunk)
        if total >= max_bytes:
            break
    blob = b"".join(chunks)[:max_bytes]
    if len(blob) < max(10_000, max_bytes):
        raise PlanError("data.max_bytes", max_bytes, f"at most the {len(blob)} bytes the data files hold")
    digest = hashlib.sha256(blob).hexdigest()
    pinned = data_spec.get("sha256")
    if pinned is not None and pinned != digest:
        raise PlanError("data.sha256", pinned, f"the SHA-256 of the data read here ({digest}; other files or another "
                        "Python's standard library hold other bytes)")
    arr = np.frombuffer(blob, dtype=np.uint8)
    # validation: every tenth block of 64 KiB, so both splits sample the whole corpus (the last
    # tenth of the sorted standard library is mostly generated codec tables)
    every = max(2, int(round(1 / val_fraction)))
    block = split_block(len(arr), every)  # at least four validation blocks when the corpus allows
    index = np.arange(len(arr)) // block
    is_val = index % every == every - 1
    out = StudyData((torch.from_numpy(arr[~is_val].copy()), torch.from_numpy(arr[is_val].copy())))
    out.sha256, out.nbytes, out.files = digest, len(blob), [p for p, _ in files][: len(chunks)]
    return out


def run_provenance(plan: dict, threads: int, data, world: int = 1) -> dict:
    """What a record needs to be reproduced: code commit, library versions, threads,
    processes, device, and the data's hash and size."""
    from ..study import provenance

    prov = provenance()
    device = plan["resources"]["device"]
    prov.update(torch=torch.__version__, threads=int(threads), processes=int(world), device=device,
                device_name=torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else "cpu",
                data_sha256=getattr(data, "sha256", "unknown"), data_bytes=int(getattr(data, "nbytes", 0)),
                data_files=len(getattr(data, "files", [])), data_pinned="sha256" in plan["data"])
    return prov


def _alphas(model):
    return [block.attn.pos.alpha().detach().cpu().numpy().tolist() for block in model.blocks]


def _failed(run, reason):
    return {"id": run["id"], "kind": "train", "arm": run["arm"], "seed": int(run["seed"]),
            "train_length": int(run["train_length"]), "failed": reason}


def execute_run(run: dict, plan: dict, data, *, checkpoint_dir=None, state_dir=None, log=None, data_parallel=True,
                deadline=None) -> dict | None:
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
    state_dir : path, optional
        Where the run's training state is saved every ``training.checkpoint_every_s``
        seconds (and resumed from); removed when the run is done.
    data_parallel : bool
        Under ``torchrun``: ``True`` trains this run with DistributedDataParallel over all
        processes; ``False`` trains it on this process alone.
    deadline : float, optional
        ``time.perf_counter()`` value after which the run stops at its next state save and
        ``None`` is returned (the run resumes from that state).

    Returns
    -------
    dict or None
        ``loss`` (per evaluation length: per-sequence losses beyond the training length;
        at the training length itself: over all positions), training seconds and steps,
        the final training loss, the exponents and their trajectory (log-distance), the
        intervention rows and the distant-mass growth when asked. A run that diverges (a
        non-finite training or evaluation loss, OT attention scores beyond their range, an OT
        fixed point that does not converge) is recorded as ``{"failed": reason}``.
    """
    tr, ev = plan["training"], plan["evaluation"]
    device = plan["resources"].get("device", "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        from ..study import PlanError

        raise PlanError("resources.device", "cuda", "a device this machine has (no CUDA GPU is available)")
    cfg = ModelConfig(**run["config"])
    L = cfg.train_length
    measure = run.get("measure", {})
    trace = _alphas if measure.get("trace_alpha") else None
    state_path = None if state_dir is None else Path(state_dir) / (run["id"].replace("/", "-") + ".pt")
    stop = None if deadline is None else (lambda step: time.perf_counter() > deadline)
    t0 = time.perf_counter()
    try:
        result = train(cfg, data[0], steps=int(tr["steps"]), batch_size=int(tr["batch_size"]), lr=float(tr["lr"]),
                       seed=int(run["seed"]), device=device, bf16=bool(tr.get("bf16", False)) and device == "cuda",
                       trace=trace, trace_every=int(tr.get("trace_every", 10)), log=log, data_parallel=data_parallel,
                       state_path=state_path, save_every_s=float(tr.get("checkpoint_every_s", 300)), stop=stop)
    except (NonFiniteLoss, ConvergenceError) as exc:
        return _failed(run, f"{type(exc).__name__}: {exc}")
    except DomainError as exc:
        if exc.parameter != "scores":  # only a diverging run's attention scores are a result, not an error
            raise
        return _failed(run, f"diverged: {exc}")
    if result is None:
        return None
    seconds = result.seconds
    model = result.model
    rank = distributed_context()[0] if data_parallel else 0
    record = {
        "id": run["id"],
        "kind": "train",
        "arm": run["arm"],
        "scheme": cfg.scheme,
        "seed": int(run["seed"]),
        "train_length": L,
        "config": asdict(cfg),  # every model setting, defaults included
        "parameters": model.num_parameters(),
        "train_seconds": seconds,
        "seconds_per_step": seconds / int(tr["steps"]),
        "final_train_loss": float(np.mean(result.losses[-10:])),
        "loss": {},
    }
    try:
        kw = dict(sequences=int(ev["sequences"]), batch_size=int(ev["batch_size"]), seed=int(ev.get("seed", 1234)), device=device)
        record["loss"][str(L)] = evaluate_sequences(model, data[1], L, start=0, **kw).tolist()
        for n in ev["lengths"]:
            record["loss"][str(n)] = evaluate_sequences(model, data[1], int(n), start=L, **kw).tolist()
        if not all(np.all(np.isfinite(v)) for v in record["loss"].values()):
            raise NonFiniteLoss("non-finite evaluation loss")
        if cfg.scheme == "log-distance":
            record["alpha"] = _alphas(model)
            record["alpha_margin"] = cfg.alpha_margin
            record["alpha_init"] = cfg.alpha_init
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
            short = measure_distant_mass(model, data[1], L, W, sequences=seqs)
            long = measure_distant_mass(model, data[1], n_max, W, sequences=seqs)
            record["distant_mass"] = {"window": W, "lengths": [L, n_max], "at_train_length": short["measured"].tolist(),
                                      "at_longest": long["measured"].tolist(),
                                      "growth": (long["measured"] - short["measured"]).tolist(),
                                      "content_bound": np.maximum(short["content_bound"], long["content_bound"]).tolist()}
    except (NonFiniteLoss, ConvergenceError) as exc:
        return _failed(run, f"evaluation: {type(exc).__name__}: {exc}")
    except DomainError as exc:
        if exc.parameter != "scores":
            raise
        return _failed(run, f"evaluation diverged: {exc}")
    if checkpoint_dir is not None and rank == 0:
        record["checkpoint"] = str(save_model(model, Path(checkpoint_dir) / run["id"].replace("/", "-")))
    if state_path is not None and rank == 0 and state_path.exists() and not state_path.is_symlink():
        state_path.unlink()
    record["run_seconds"] = time.perf_counter() - t0
    return record


# ---------------------------------------------------------------- n-gram count baselines


def _codes(x, k):
    """Integer code of the ``k`` bytes before each position ``i >= k`` (base 256)."""
    code = np.zeros(len(x) - k, dtype=np.int64)
    for j in range(k):
        code = code * 256 + x[j : len(x) - k + j]
    return code


def ngram_losses(train_bytes, windows, order):
    """Per-position loss (nats) of an interpolated Witten-Bell byte n-gram model.

    ``p_0(y) = (c(y) + 1) / (N + 256)``; for context ``h`` of ``k`` bytes,
    ``p_k(y | h) = (c(h y) + T(h) p_{k-1}(y | h')) / (c(h) + T(h))`` with ``T(h)`` the number
    of distinct bytes seen after ``h`` and ``h'`` its last ``k - 1`` bytes (``p_k = p_{k-1}``
    for an unseen ``h``). Positions with fewer than ``order - 1`` bytes before them in their
    window use the longest context they have. ``windows``: int array ``(S, T + 1)``; returns
    ``(S, T)`` losses of predicting byte ``t + 1`` from bytes ``<= t``.
    """
    x = np.asarray(train_bytes, dtype=np.int64)
    w = np.asarray(windows, dtype=np.int64)
    S, T1 = w.shape
    uni = np.bincount(x, minlength=256).astype(float)
    targets = w[:, 1:]
    prob = ((uni[targets] + 1) / (len(x) + 256))
    probs = [prob]
    for k in range(1, order):
        ctx = _codes(x, k)  # context of x[i] for i >= k
        joint = ctx * 256 + x[k:]
        jkeys, jcounts = np.unique(joint, return_counts=True)
        ckeys, ccounts = np.unique(ctx, return_counts=True)
        tkeys, tcounts = np.unique(jkeys // 256, return_counts=True)  # distinct followers per context
        # contexts of the windows: the k bytes ending at position t (predicting t + 1)
        cw = np.zeros((S, T1 - 1), dtype=np.int64)
        valid = np.zeros((S, T1 - 1), dtype=bool)
        for t in range(T1 - 1):
            if t + 1 >= k:
                c = np.zeros(S, dtype=np.int64)
                for j in range(t + 1 - k, t + 1):
                    c = c * 256 + w[:, j]
                cw[:, t] = c
                valid[:, t] = True

        def lookup(keys, counts, q):
            i = np.clip(np.searchsorted(keys, q), 0, len(keys) - 1)
            return np.where(keys[i] == q, counts[i], 0).astype(float)

        cj = lookup(jkeys, jcounts, cw * 256 + targets)
        ch = lookup(ckeys, ccounts, cw)
        th = lookup(tkeys, tcounts, cw)
        lower = probs[-1]
        seen = valid & (ch > 0)
        new = np.where(seen, (cj + th * lower) / np.where(seen, ch + th, 1.0), lower)
        probs.append(new)
    return -np.log(probs[-1])


def ngram_record(run: dict, plan: dict, data) -> dict:
    """The n-gram baseline of order ``run["order"]`` on the study's evaluation windows: at each
    training length over all positions, at each evaluation length beyond the smallest
    training length (the model's loss does not depend on where the window started)."""
    ev, Ls = plan["evaluation"], plan["training"]["train_lengths"]
    train_bytes, val = data[0].numpy(), data[1]
    out = {}
    for length in sorted(set(Ls) | set(ev["lengths"])):
        gen = torch.Generator().manual_seed(int(ev.get("seed", 1234)))
        starts = torch.randint(0, len(val) - length - 1, (int(ev["sequences"]),), generator=gen).tolist()
        windows = torch.stack([val[s : s + length + 1] for s in starts]).numpy()
        loss = ngram_losses(train_bytes, windows, int(run["order"]))
        start = 0 if length in Ls else min(Ls)
        out[str(length)] = float(loss[:, start:].mean())
    return {"id": run["id"], "kind": "ngram", "order": int(run["order"]), "loss": out}


# ---------------------------------------------------------------- cost, counted and timed side by side

_MATMUL = {"mm": (0, 1), "addmm": (1, 2), "bmm": (0, 1), "baddbmm": (1, 2)}
_FREE = {"view", "_unsafe_view", "reshape", "expand", "t", "transpose", "permute", "select", "slice", "unsqueeze",
         "squeeze", "detach", "alias", "as_strided", "split", "split_with_sizes", "unbind", "empty", "empty_like",
         "zeros", "zeros_like", "ones", "ones_like", "full", "new_empty", "new_zeros", "new_full", "lift_fresh",
         "_to_copy", "clone", "copy_", "contiguous", "resolve_conj", "resolve_neg", "scalar_tensor", "arange",
         "_local_scalar_dense", "item", "is_same_size", "empty_strided", "new_empty_strided", "fill_", "zero_",
         "set_", "randint", "random_", "index", "index_select", "stack", "cat"}


def count_work(fn):
    """Run ``fn()`` and count its floating-point work by operator: every matrix product
    ``2 m n k`` (``mm``, ``addmm``, ``bmm``, ``baddbmm``), every other computing operator one
    per output element (views, copies, allocation and indexing count zero). Returns
    ``(result, {"matmul": n, "elementwise": n, "total": n})``. Counted, not timed: the same
    on any machine and under any load."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    counts = {"matmul": 0, "elementwise": 0}

    class _Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func._overloadpacket.__name__
            if name in _MATMUL:
                i, j = _MATMUL[name]
                a, b = args[i].shape, args[j].shape
                batch = a[0] if len(a) == 3 else 1
                counts["matmul"] += 2 * batch * a[-2] * a[-1] * b[-1]
            elif name not in _FREE:
                counts["elementwise"] += sum(t.numel() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)
                                             and t.is_floating_point())
            return out

    with _Counter():
        result = fn()
    counts["total"] = counts["matmul"] + counts["elementwise"]
    return result, counts


def measure_cost(run: dict, plan: dict, data, rec_t: dict, rec_c: dict, *, checkpoint_dir=None) -> dict:
    """Training cost of two trained checkpoints, side by side in one process.

    Both models take ``run["steps"]`` AdamW steps at their training length on the same
    batches, interleaved (treatment and control alternate, the first of each pair
    alternating too), each step timed; then one more step of each is counted with
    :func:`count_work`. Returns the counted work per step of each, their ratio
    (``flops_ratio``, treatment / control), the median step times and their ratio.
    """
    paths = []
    for rec in (rec_t, rec_c):
        path = Path(checkpoint_dir) / rec["id"].replace("/", "-") if checkpoint_dir else Path(rec["checkpoint"])
        paths.append(path)
    models = [load_model(p) for p in paths]
    L = int(run["train_length"])
    B = int(plan["training"]["batch_size"])
    opts = [torch.optim.AdamW(m.parameters(), lr=float(plan["training"]["lr"]), weight_decay=0.01) for m in models]
    gen = torch.Generator().manual_seed(int(run["seed"]) + 7919)

    def step(i, batch):
        m, opt = models[i], opts[i]
        m.train()
        loss = m.loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.detach())

    times = [[], []]
    for s in range(int(run["steps"])):
        batch = sample_batch(data[0], L, B, gen)
        for i in ((0, 1) if s % 2 == 0 else (1, 0)):
            t = time.perf_counter()
            step(i, batch)
            times[i].append(time.perf_counter() - t)
    batch = sample_batch(data[0], L, B, gen)
    work = [count_work(lambda i=i: step(i, batch))[1] for i in (0, 1)]
    med = [float(np.median(t)) for t in times]
    ratio = work[0]["total"] / work[1]["total"]
    if not (math.isfinite(ratio) and ratio > 0):
        return {"id": run["id"], "kind": "cost", "arm": "cost", "seed": run["seed"], "train_length": L, "failed": "no work counted"}
    return {"id": run["id"], "kind": "cost", "arm": "cost", "seed": int(run["seed"]), "train_length": L,
            "treatment": rec_t["id"], "control": rec_c["id"], "steps": int(run["steps"]), "batch_size": B,
            "work_treatment": work[0], "work_control": work[1], "flops_ratio": float(ratio),
            "median_step_seconds": med, "time_ratio": med[0] / med[1], "threads": torch.get_num_threads()}


# ---------------------------------------------------------------- time estimate


def estimate_time(plan: dict, runs: list, data, *, steps: int = 3, log=None) -> dict:
    """Time a few training steps and one evaluation batch of every (scheme, training length) of a
    plan on this machine, at the threads set now, and extrapolate to every run.

    Per training run: ``steps`` (plan) times the median of ``steps`` timed steps (after one
    untimed warm-up step), plus the evaluation of ``sequences`` windows at the training length
    and at each evaluation length (one batch timed, scaled), plus two more evaluations at the
    intervention's length per shift when the run measures it. Cost runs: ``cost_steps`` steps of
    both models. Returns ``{"run_seconds": {id: s}, "total_seconds": s, "threads": n}``; divide
    the total by the number of processes that spread the runs. An estimate: it is as loaded as
    the machine is while it runs.
    """
    tr, ev = plan["training"], plan["evaluation"]
    step_s, eval_s = {}, {}
    gen = torch.Generator().manual_seed(0)
    B, Be = int(tr["batch_size"]), int(ev["batch_size"])
    for run in runs:
        if run["kind"] != "train":
            continue
        cfg = ModelConfig(**run["config"])
        key = (cfg.scheme, cfg.train_length)
        if key in step_s:
            continue
        from .model import ReferenceModel

        torch.manual_seed(0)
        model = ReferenceModel(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=float(tr["lr"]))
        times = []
        for i in range(int(steps) + 1):
            batch = sample_batch(data[0], cfg.train_length, B, gen)
            t = time.perf_counter()
            loss = model.loss(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i:
                times.append(time.perf_counter() - t)
        step_s[key] = float(np.median(times))
        model.eval()
        for n in [cfg.train_length, *ev["lengths"]]:
            if (key, n) not in eval_s:
                t = time.perf_counter()
                evaluate_sequences(model, data[1], int(n), sequences=Be, batch_size=Be)
                eval_s[(key, n)] = (time.perf_counter() - t) * int(ev["sequences"]) / Be
        if log is not None:
            log(f"{cfg.scheme} at L = {cfg.train_length}: {1e3 * step_s[key]:.1f} ms per step")
    out = {}
    by_id = {r["id"]: r for r in runs}
    for run in runs:
        if run["kind"] == "train":
            key = (run["config"]["scheme"], run["train_length"])
            s = int(tr["steps"]) * step_s[key] + sum(eval_s[(key, n)] for n in [run["train_length"], *ev["lengths"]])
            spec = run["measure"].get("intervention")
            if spec:
                s += (1 + len(spec["shifts"])) * eval_s[(key, spec["eval_length"])]  # base and each shift
            out[run["id"]] = s
        elif run["kind"] == "cost":
            t, c = by_id[run["treatment"]], by_id[run["control"]]
            out[run["id"]] = (int(run["steps"]) + 1) * (step_s[(t["config"]["scheme"], t["train_length"])]
                                                        + step_s[(c["config"]["scheme"], c["train_length"])])
    return {"run_seconds": out, "total_seconds": float(sum(out.values())), "threads": torch.get_num_threads()}
