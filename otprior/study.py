"""Preregistered studies: a plan file states the hypotheses and their decision rules before any run.

A plan (TOML or JSON, read as data) names the arms (a positional scheme with its options
and seeds), the training and evaluation lengths, the model size, the data (pinned by the
SHA-256 of its bytes), the resources, and for every hypothesis the statistic and the
decision rule. :func:`run_study` validates the whole plan before any training (a bad plan
is refused with one line naming the field), records the plan's SHA-256 and the provenance
(code commit, library versions, threads, data hash) with every result, writes the results
atomically after every run, checkpoints inside every run (a killed run resumes mid-training
bit for bit), resumes where a previous call stopped, and decides every hypothesis
(``supported`` / ``not supported``; ``incomplete`` while runs are missing, ``undecided``
when a run needed failed) with its interval, and draws the figures.

Every value that can decide an outcome is stated in the plan: the starting exponent of
every log-distance arm (``init_above_floor``, above its floor ``1 + alpha_margin`` or
``1 + margin_for(...)``), the exponent floor (``alpha_margin``) and the content bound given
to :func:`otprior.margin_for` (``margin.score_bound``). There is no default for them.

Units of inference
------------------
The unit is the training run. Paired loss comparisons use the *crossed* bootstrap over
runs and evaluation windows: every run is evaluated on the same windows, the difference
matrix ``D[run pair, window]`` is resampled by run pairs (within each training length)
and by windows independently, and the interval is that of the mean of ``D``. Statistics
per checkpoint (boundary, margin, intervention) are bootstrapped over checkpoints.

Hypothesis kinds and their decision rules
-----------------------------------------
``loss_difference`` (rule ``interval_below_zero``)
    Mean paired difference ``treatment - control`` of the per-window loss beyond the
    training length at the longest evaluation length; supported when the crossed interval
    lies below zero.
``loss_and_cost`` (rule ``interval_below_zero_and_cost_ratio``; ``max_cost_ratio``, ``cost_steps``)
    As above, and the training cost per step of the treatment is at most ``max_cost_ratio``
    times the control's. Cost is counted, not timed: after both arms' runs of a (training
    length, seed) pair exist, the two trained models take ``cost_steps`` training steps
    *interleaved in one process* on the same batches at that training length; the ratio is
    that of the counted floating-point work (matrix products ``2 m n k``, every other
    operation one per output element), geometric mean over pairs. The interleaved
    wall-clock ratio (median step time) is reported beside it and decides nothing.
``every_pair`` (rule ``every_pair_interval_below_zero``)
    The bootstrap interval over windows of every (training length, seed) pair lies below
    zero (the claim is about every seed).
``intervention`` (rules ``sign_test_over_runs`` with ``alpha``; ``all_in_predicted_direction``; ``sign_test``)
    On every checkpoint of the arm, only the bias beyond the training length changes
    (:func:`otprior.torch.intervene`). ``sign_test_over_runs``: per checkpoint the signed
    effect is the mean over shifts of the loss change times the predicted sign; supported
    when the one-sided sign test over checkpoints (ties dropped) has ``p < alpha``. The
    interval is the bootstrap over checkpoints of the mean signed effect.
    ``all_in_predicted_direction`` / ``sign_test``: every row / a sign test over rows whose
    window interval excludes zero (rows are not independent; kept for old plans).
``boundary`` (rule ``fraction_at_least``, ``fraction``; ``near``)
    Per checkpoint, the fraction of heads with trained ``alpha - 1 <= near``; supported
    when the interval over checkpoints lies at or above ``fraction``. The plan is refused
    when the starting exponent cannot reach the threshold within the optimiser's reach
    (``lr`` times the sum of the schedule: Adam's move at steps of typical size,
    :func:`optimiser_reach`), so the statistic is not fixed by the start.
``margin`` (rule ``growth_within_tol``; optional ``min_binding``)
    The arm trains with ``alpha >= 1 + margin_for(W, (L, n_max), tol, score_bound=B)``;
    per checkpoint the largest measured growth of attention mass beyond ``W`` (last query)
    from the training length to the longest evaluation length; supported when the interval
    over checkpoints lies at or below ``tol``. Reported beside: how many heads ended within
    ``0.05`` of the floor (the margin binds) and how many had measured content spread above
    ``B`` (where the guarantee does not apply). With ``min_binding``, a study in which a
    smaller fraction of heads ended within ``0.05`` of the floor says ``not tested``: the
    margin did not constrain training, so the growth says nothing about it.
``prediction`` (rule ``beats_baselines``; ``arms``, ``fit_seeds``, ``test_seeds``, ``score_bound``)
    For every checkpoint of the arms and every evaluation length ``n``, the loss growth
    ``y = loss(n) - loss(L)`` (beyond ``L`` at ``n``, all positions at ``L``) is predicted
    from the prior alone: ``x`` = mean over heads of the upper end of the band of attention
    mass at distance ``>= L`` at length ``n`` for content within ``score_bound``
    (Theorem 10), the distant mass being zero at ``L``. Fitted per ``n`` by least squares
    ``y = a_n + b_n x`` on ``fit_seeds``, tested on ``test_seeds``. Baselines fitted the
    same way: ``y = a_n + b_n loss(L)`` (training-length loss alone) and ``y = a_n`` (the
    scheme's mean). Supported when the bootstrap interval over held-out checkpoints of the
    mean squared error of the prior minus that of the better baseline lies below zero.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from ._files import folder_lock, read_regular, regular_size, safe_name, write_json_atomic, write_text_atomic
from ._validation import DomainError
from .encodings import REFERENCE_MODEL_SCHEMES

__all__ = ["load_plan", "validate_plan", "plan_hash", "expand_runs", "run_study", "decide", "estimate_memory",
           "corpus_files", "optimiser_reach", "provenance", "PlanError", "SCHEMES", "HYPOTHESIS_KINDS"]

SCHEMES = REFERENCE_MODEL_SCHEMES
HYPOTHESIS_KINDS = {
    "loss_difference": ("interval_below_zero",),
    "loss_and_cost": ("interval_below_zero_and_cost_ratio",),
    "every_pair": ("every_pair_interval_below_zero",),
    "intervention": ("sign_test_over_runs", "all_in_predicted_direction", "sign_test"),
    "boundary": ("fraction_at_least",),
    "margin": ("growth_within_tol",),
    "prediction": ("beats_baselines",),
}
_TABLES = {"plan", "resources", "data", "model", "training", "evaluation", "statistics", "arms", "hypotheses"}
_MAX_TRAIN_RHO = 0.999  # the largest rho a trained OT arm may ask for (see validate_plan)
_ARM_KEYS = {"name", "scheme", "seeds", "ot_rho", "ot_tol", "alpha_margin", "margin", "rope_base", "init_above_floor"}
_MODEL_KEYS = {"d_model", "n_layers", "n_heads", "d_ff"}
_TABLE_KEYS = {
    "plan": {"name", "description"},
    "resources": {"device", "memory_gb", "threads", "time_budget_s"},
    "data": {"max_bytes", "paths", "sha256", "baselines"},
    "training": {"steps", "batch_size", "lr", "train_lengths", "trace_every", "bf16", "checkpoint_every_s"},
    "evaluation": {"lengths", "sequences", "batch_size", "seed"},
    "statistics": {"level", "resamples"},
}
_RESULTS = "results.jsonl"
_MAX_PLAN_BYTES = 1 << 20
_MAX_RESULTS_BYTES = 256 << 20
_MAX_DEPTH = 12  # plans are tables of tables of lists of small tables
_SEED_MAX = 2**32  # torch's and numpy's generators take any seed below this
_MAX_DATA_BYTES = 256 << 20
_MAX_LENGTH = 1 << 20
_MAX_COUNT = 10**7


class PlanError(DomainError):
    """A plan field outside its valid domain (refused before any training)."""


def _need(table, key, where):
    if key not in table:
        raise PlanError(f"{where}.{key}", None, "a required field")
    return table[key]


def _depth(value, limit):
    """Nesting depth of plain data, iteratively (a deep plan cannot exhaust the stack)."""
    stack = [(value, 1)]
    while stack:
        item, d = stack.pop()
        if d > limit:
            return d
        if isinstance(item, dict):
            stack.extend((v, d + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, d + 1) for v in item)
    return 0


def _no_constant(name):
    raise ValueError(f"the non-JSON constant {name}")


def load_plan(path) -> tuple[dict, str]:
    """Read a plan file (``.toml`` or ``.json``) as data; returns ``(plan, sha256 of its bytes)``.

    The file must be a regular file of at most 1 MiB (checked by ``stat`` before reading),
    nested at most 12 deep, UTF-8, TOML or strict JSON (no ``NaN``).
    """
    path = Path(path)
    if "\x00" in str(path):
        raise PlanError("plan", str(path).replace("\x00", "\\x00"), "a path without NUL characters")
    if path.is_dir():
        candidates = [p for p in (path / "plan.toml", path / "plan.json") if p.exists()]
        if not candidates:
            raise PlanError("plan", str(path), "a .toml or .json file, or a folder holding plan.toml")
        path = candidates[0]
    if not path.exists() and not path.is_symlink():
        for suffix in (".toml", ".json"):
            if path.with_suffix(suffix).exists():
                path = path.with_suffix(suffix)
                break
        else:
            raise PlanError("plan", str(path), "an existing .toml or .json file")
    raw = read_regular(path, _MAX_PLAN_BYTES, "plan", error=PlanError)
    try:
        text = raw.decode("utf-8")
        if path.suffix == ".json":
            plan = json.loads(text, parse_constant=_no_constant)
        else:
            import tomllib

            plan = tomllib.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PlanError("plan", str(path), f"valid TOML or JSON ({str(exc).splitlines()[0][:200]})") from None
    except RecursionError:
        raise PlanError("plan", str(path), f"a plan nested at most {_MAX_DEPTH} deep") from None
    if not isinstance(plan, dict):
        raise PlanError("plan", type(plan).__name__, "a table of tables")
    return plan, hashlib.sha256(raw).hexdigest()


def plan_hash(plan: dict) -> str:
    """SHA-256 of the plan's canonical JSON (for plans given as dicts)."""
    return hashlib.sha256(json.dumps(plan, sort_keys=True, allow_nan=False).encode()).hexdigest()


def _shown(value):
    """A value for a message: huge integers by their size (their repr may be refused)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, (dict, list)):
        return "..."
    if isinstance(value, str) and len(value) > 80:
        return value[:80] + "..."
    return value


def _printable(text, field):
    """Refuse control characters (escape sequences would reach the terminal and the tables)."""
    bad = [c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0]
    if bad:
        raise PlanError(field, f"text with the control character {bad[0]!r}", "printable text")


def _refuse_huge_integers(node, where):
    """Refuse an integer whose magnitude no double holds (above 2**1023), wherever it stands: every
    numeric field of a plan is compared as a float somewhere, and Python would raise OverflowError."""
    if isinstance(node, dict):
        for key, value in node.items():
            _refuse_huge_integers(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _refuse_huge_integers(value, f"{where}[{i}]")
    elif isinstance(node, int) and not isinstance(node, bool) and abs(node) >= 2**1023:
        raise PlanError(where, _shown(node), "a number within a double's range (below 2**1023 in magnitude)")


def _posint(value, field, top=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (top is not None and value > top):
        raise PlanError(field, _shown(value), "a positive integer" + ("" if top is None else f" at most {top}"))
    return value


def _posnum(value, field, top=None):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)) or (
            top is not None and value > top):
        raise PlanError(field, _shown(value), "a finite positive number" + ("" if top is None else f" at most {top}"))
    return float(value)


def _int_list(value, field, top=None):
    if not isinstance(value, list) or not value or len(value) > 64:
        raise PlanError(field, value if not isinstance(value, list) else "...", "a non-empty list of at most 64 positive integers")
    return [_posint(v, f"{field}[{i}]", top) for i, v in enumerate(value)]


def _seed(value, field):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _SEED_MAX:
        raise PlanError(field, _shown(value), "an integer in [0, 2**32)")
    return value


def corpus_files(data_spec: dict) -> list:
    """The data files of a plan's ``data`` table, in reading order, as ``(path, size)`` pairs.

    ``paths`` as given, or by default the ``.py`` files of the running interpreter's
    standard library (sorted; ``site-packages`` and test folders left out), up to the first
    file that completes ``max_bytes``. Sizes come from ``stat`` (nothing is read); every
    file must be a regular file (``/dev/zero``, FIFOs and folders are refused, naming the
    field).
    """
    import sysconfig

    max_bytes = int(data_spec.get("max_bytes", 2_000_000))
    paths = data_spec.get("paths")
    if paths:
        named = [(f"data.paths[{i}]", Path(p)) for i, p in enumerate(paths)]
    else:
        root = Path(sysconfig.get_paths()["stdlib"])
        found = []
        for folder, dirs, names in os.walk(root, followlinks=True):
            dirs[:] = [d for d in dirs if d not in ("site-packages", "test")]  # pruned, not walked and filtered
            found.extend(Path(folder) / n for n in names if n.endswith(".py"))
        named = [("data", p) for p in sorted(found)]
    out, total = [], 0
    for field, p in named:
        size = regular_size(p, field, error=PlanError)
        out.append((str(p), size))
        total += size
        if total >= max_bytes:
            break
    return out


def estimate_memory(plan: dict) -> dict:
    """Rough peak bytes of training and of evaluation for the largest run of the plan.

    Parameters and AdamW state (16 bytes per parameter), activations of the blocks
    (about ``12 d + 3 d_ff`` floats per token and layer, kept for the backward pass), the
    attention maps (three ``T x T`` per head and layer; for ``causal-ot`` the kernel,
    duals and output plus the block working arrays), the logits; evaluation keeps one
    layer's maps at a time and no gradients. ``ot_sequences_train`` / ``ot_sequences_eval``:
    the most sequences one OT call may hold under the allocation cap (32 bytes per score,
    :func:`otprior.torch.ot_attention.causal_ot_attention`), the micro-batch the trainer and
    the evaluation use; ``0`` when one sequence is already over the cap.
    """
    from .limits import current

    m, tr, ev = plan["model"], plan["training"], plan["evaluation"]
    d, layers, heads, ff = m["d_model"], m["n_layers"], m["n_heads"], m["d_ff"]
    params = 2 * 256 * d + layers * (4 * d * d + 4 * d + 2 * d * ff + ff + 5 * d)
    has_ot = any(a["scheme"] == "causal-ot" for a in plan["arms"])
    T = max(tr["train_lengths"])
    B = tr["batch_size"]
    cap = current().max_bytes
    per_train = 32 * heads * T * T
    per_eval = 32 * heads * max(ev["lengths"]) ** 2
    micro = min(B, cap // per_train) if has_ot else B

    def train_bytes(batch, maps):
        return (16 * params + 4 * batch * T * layers * (12 * d + 3 * ff) + 4 * maps * batch * heads * T * T * layers
                + 12 * batch * T * 256)

    # softmax-type arms at the full batch; an OT arm in micro-batches under the allocation cap
    train = max(train_bytes(B, 3), train_bytes(max(micro, 1), 7) if has_ot else 0)
    n = max(ev["lengths"])
    Be = min(ev["batch_size"], cap // per_eval) if has_ot else ev["batch_size"]
    Be = max(Be, 1)
    evaluation = 4 * params + 4 * Be * n * (4 * d + ff) + 4 * (3 + (4 if has_ot else 0)) * Be * heads * n * n + 8 * Be * n * 256
    return {"parameters": params, "train_bytes": int(train), "eval_bytes": int(evaluation),
            "ot_sequences_train": int(micro) if has_ot else None,
            "ot_sequences_eval": int(min(ev["batch_size"], cap // per_eval)) if has_ot else None,
            "allocation_cap_bytes": int(cap)}


def optimiser_reach(lr: float, steps: int) -> float:
    """The total move of one parameter under the trainer's AdamW and cosine schedule, at steps
    of typical size.

    Adam's effective step is ``lr_t m_hat / sqrt(v_hat)``, of magnitude about ``lr_t`` or
    less in the common case (Kingma & Ba 2015, section 2.1); its worst case is
    ``lr_t (1 - beta1) / sqrt(1 - beta2)``, 3.16 ``lr_t`` for ``beta = (0.9, 0.999)``, reached
    only by a gradient that was long near zero and then jumps. The reach used here is
    ``sum_t lr_t = lr sum_t (1 + cos(pi t / steps)) / 2``: a plan passes the boundary check
    only when steps of typical size can carry a head across the threshold.
    """
    t = np.arange(int(steps))
    return float(lr * np.sum(0.5 * (1 + np.cos(np.pi * t / steps))))


def _softplus_inv(x):
    return x + math.log(-math.expm1(-x))


def provenance() -> dict:
    """Code commit (``git rev-parse HEAD`` of the package's repository, ``"unknown"`` without
    git), whether the tree had local changes, and the versions of Python, numpy and otprior."""
    import platform
    import subprocess

    from . import __version__

    root = Path(__file__).resolve().parents[1]
    commit, dirty = "unknown", None
    try:
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            commit = r.stdout.strip()
            s = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
            dirty = bool(s.stdout.strip()) if s.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        pass
    return {"commit": commit, "dirty": dirty, "python": platform.python_version(), "numpy": np.__version__,
            "otprior": __version__}


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def validate_plan(plan: dict, *, machine: bool = False) -> dict:
    """Check a plan completely; return it with defaults filled. Raises :class:`PlanError` naming the field.

    ``machine=True`` also checks the plan against this machine: the device exists, the
    threads are at most the CPUs this process may use, every data file is a regular file,
    the data hold ``max_bytes`` and, when ``data.sha256`` pins them, have that hash
    (:func:`run_study` and ``--dry-run`` check this way: what passes a dry run can run).
    """
    if not isinstance(plan, dict):
        raise PlanError("plan", type(plan).__name__, "a table of tables")
    if _depth(plan, _MAX_DEPTH):
        raise PlanError("plan", "...", f"a plan nested at most {_MAX_DEPTH} deep")
    for key in plan:
        if key not in _TABLES:
            shown = plan[key] if not isinstance(plan[key], (dict, list)) else "..."
            raise PlanError(str(key)[:60], shown, f"one of the tables {sorted(_TABLES)}")
    _refuse_huge_integers(plan, "")  # no field of a plan takes an integer beyond a double's range
    import copy

    plan = copy.deepcopy(plan)  # a private copy (depth checked above); every field is checked below
    for table, keys in _TABLE_KEYS.items():
        value = plan.get(table, {})
        if not isinstance(value, dict):
            raise PlanError(table, "...", "a table")
        for key in value:
            if key not in keys:
                raise PlanError(f"{table}.{str(key)[:60]}", value[key], f"one of {sorted(keys)}")
    meta = plan.setdefault("plan", {})
    safe_name(meta.get("name", "plan"), "plan.name", PlanError)
    if not isinstance(meta.get("description", ""), str) or len(meta.get("description", "")) > 4000:
        raise PlanError("plan.description", "...", "a string of at most 4000 characters")
    _printable(meta.get("description", ""), "plan.description")
    res = plan.setdefault("resources", {})
    if res.setdefault("device", "cpu") not in ("cpu", "cuda"):
        raise PlanError("resources.device", res.get("device"), "'cpu' or 'cuda'")
    _posnum(_need(res, "memory_gb", "resources"), "resources.memory_gb", 1 << 20)
    threads = res.setdefault("threads", "auto")
    if threads != "auto":
        _posint(threads, "resources.threads", 1024)
    if "time_budget_s" in res:
        _posnum(res["time_budget_s"], "resources.time_budget_s", 1e8)
    data = plan.setdefault("data", {})
    _posint(data.setdefault("max_bytes", 2_000_000), "data.max_bytes", _MAX_DATA_BYTES)
    if data["max_bytes"] < 10_000:
        raise PlanError("data.max_bytes", data["max_bytes"], "at least 10000 bytes")
    if "paths" in data and (not isinstance(data["paths"], list) or not data["paths"] or len(data["paths"]) > 4096
                            or not all(isinstance(p, str) and p and "\x00" not in p for p in data["paths"])):
        raise PlanError("data.paths", "...", "a non-empty list of at most 4096 file paths (no NUL)")
    if "sha256" in data and not (isinstance(data["sha256"], str) and len(data["sha256"]) == 64
                                 and all(c in "0123456789abcdef" for c in data["sha256"])):
        raise PlanError("data.sha256", data["sha256"], "64 lower-case hex digits")
    baselines = data.setdefault("baselines", [])
    if not isinstance(baselines, list) or len(baselines) > 8 or any(
            isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 6 for k in baselines):
        raise PlanError("data.baselines", baselines, "a list of n-gram orders in 1..6")
    model = _need(plan, "model", "plan")
    if not isinstance(model, dict):
        raise PlanError("model", "...", "a table")
    for key in model:
        if key not in _MODEL_KEYS:
            raise PlanError(f"model.{str(key)[:60]}", model[key], f"one of {sorted(_MODEL_KEYS)}")
    for key in _MODEL_KEYS:
        _posint(_need(model, key, "model"), f"model.{key}", 1 << 16)
    if model["d_model"] % model["n_heads"] or (model["d_model"] // model["n_heads"]) % 2:
        raise PlanError("model.d_model", model["d_model"], f"a multiple of 2 * n_heads = {2 * model['n_heads']}")
    tr = _need(plan, "training", "plan")
    _posint(_need(tr, "steps", "training"), "training.steps", _MAX_COUNT)
    _posint(_need(tr, "batch_size", "training"), "training.batch_size", 1 << 16)
    lr = _posnum(_need(tr, "lr", "training"), "training.lr", 1.0)
    Ls = _int_list(_need(tr, "train_lengths", "training"), "training.train_lengths", _MAX_LENGTH)
    if len(set(Ls)) != len(Ls):
        raise PlanError("training.train_lengths", Ls, "distinct lengths")
    _posint(tr.setdefault("trace_every", 10), "training.trace_every", _MAX_COUNT)
    if tr["steps"] // tr["trace_every"] > 100_000:
        raise PlanError("training.trace_every", tr["trace_every"], f"at least steps / 100000 = {tr['steps'] // 100_000} "
                        "(at most 100000 traced points per run)")
    _posnum(tr.setdefault("checkpoint_every_s", 300), "training.checkpoint_every_s", 1e6)
    if not isinstance(tr.setdefault("bf16", False), bool):
        raise PlanError("training.bf16", tr["bf16"], "true or false")
    ev = _need(plan, "evaluation", "plan")
    ns = _int_list(_need(ev, "lengths", "evaluation"), "evaluation.lengths", _MAX_LENGTH)
    if len(set(ns)) != len(ns) or len(ns) > 16:
        raise PlanError("evaluation.lengths", ns, "at most 16 distinct lengths")
    for i, n in enumerate(ns):
        if n <= max(Ls):
            raise PlanError(f"evaluation.lengths[{i}]", n, f"a length above every training length (largest {max(Ls)})")
    _posint(_need(ev, "sequences", "evaluation"), "evaluation.sequences", 1 << 16)
    if ev["sequences"] < 2:
        raise PlanError("evaluation.sequences", ev["sequences"], "at least 2 (the bootstrap's units)")
    _posint(ev.setdefault("batch_size", 8), "evaluation.batch_size", 1 << 16)
    _seed(ev.setdefault("seed", 1234), "evaluation.seed")
    st = plan.setdefault("statistics", {})
    level = st.setdefault("level", 0.95)
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.5 <= level < 1:
        raise PlanError("statistics.level", level, "a number in [0.5, 1)")
    _posint(st.setdefault("resamples", 2000), "statistics.resamples", 100_000)
    arms = _need(plan, "arms", "plan")
    if not isinstance(arms, list) or not arms or len(arms) > 64:
        raise PlanError("arms", "...", "a non-empty list of at most 64 arms")
    names = set()
    n_max = max(ns)
    for i, arm in enumerate(arms):
        where = f"arms[{i}]"
        if not isinstance(arm, dict):
            raise PlanError(where, "...", "a table")
        for key in arm:
            if key not in _ARM_KEYS:
                raise PlanError(f"{where}.{str(key)[:60]}", arm[key], f"one of {sorted(_ARM_KEYS)}")
        name = safe_name(_need(arm, "name", where), f"{where}.name", PlanError)
        if name in names or name in ("cost", "ngram"):
            raise PlanError(f"{where}.name", name, "a unique name (not 'cost' or 'ngram')")
        names.add(name)
        scheme = _need(arm, "scheme", where)
        if scheme not in SCHEMES:
            raise PlanError(f"{where}.scheme", scheme, f"one of {', '.join(SCHEMES)}")
        seeds = _need(arm, "seeds", where)
        if not isinstance(seeds, list) or not seeds or len(seeds) > 1000:
            raise PlanError(f"{where}.seeds", "...", "a non-empty list of at most 1000 seeds")
        for j, s in enumerate(seeds):
            _seed(s, f"{where}.seeds[{j}]")
        if len(set(seeds)) != len(seeds):
            raise PlanError(f"{where}.seeds", seeds, "distinct seeds")
        if scheme == "causal-ot":
            _need(arm, "ot_rho", where)  # it decides what the arm is: no default
        if "ot_rho" in arm and (scheme != "causal-ot" or isinstance(arm["ot_rho"], bool)
                                or not (isinstance(arm["ot_rho"], (int, float)) and 0 <= arm["ot_rho"] <= _MAX_TRAIN_RHO)):
            # training differentiates the operator: its adjoint solve is checked up to this rho
            # (closer to one, float32 sweeps overflow in the backward pass where the forward converges)
            raise PlanError(f"{where}.ot_rho", arm["ot_rho"], f"a number in [0, {_MAX_TRAIN_RHO}] on a causal-ot arm")
        if "ot_tol" in arm:
            _posnum(arm["ot_tol"], f"{where}.ot_tol", 1.0)
        if "rope_base" in arm:
            _posnum(arm["rope_base"], f"{where}.rope_base", 1e12)
        if scheme != "log-distance":
            for key in ("alpha_margin", "margin", "init_above_floor"):
                if key in arm:
                    raise PlanError(f"{where}.{key}", arm[key], "only on a log-distance arm")
            continue
        # a log-distance arm: the floor and the start decide H5/H6 outcomes, so both are stated
        if ("alpha_margin" in arm) == ("margin" in arm):
            raise PlanError(f"{where}.alpha_margin", arm.get("alpha_margin"),
                            "exactly one of alpha_margin (a fixed floor 1 + alpha_margin) and margin = {window, tol, score_bound}")
        _posnum(_need(arm, "init_above_floor", where), f"{where}.init_above_floor", 50.0)
        if "alpha_margin" in arm:
            _posnum(arm["alpha_margin"], f"{where}.alpha_margin", 50.0)
        else:
            spec = arm["margin"]
            if not isinstance(spec, dict) or set(spec) != {"window", "tol", "score_bound"}:
                raise PlanError(f"{where}.margin", "...", "a table {window, tol, score_bound}")
            W = _posint(spec["window"], f"{where}.margin.window")
            if W >= min(Ls):
                raise PlanError(f"{where}.margin.window", W, f"below every training length (smallest {min(Ls)})")
            tol = _posnum(spec["tol"], f"{where}.margin.tol")
            if tol >= 1 or tol < 1e-6:
                raise PlanError(f"{where}.margin.tol", tol, "a number in [1e-6, 1)")
            B = spec["score_bound"]
            if isinstance(B, bool) or not isinstance(B, (int, float)) or not 0 <= B <= 10:
                raise PlanError(f"{where}.margin.score_bound", B, "a number in [0, 10] (the content bound of margin_for)")
            for L in Ls:
                try:
                    _margin_value(arm, L, n_max)
                except DomainError as exc:
                    raise PlanError(f"{where}.margin", spec, f"a margin margin_for can give at L = {L} ({exc})") from None
    arm_by = {a["name"]: a for a in arms}
    total_runs = sum(len(a["seeds"]) for a in arms) * len(Ls)
    if total_runs > 100_000:
        raise PlanError("arms", f"{total_runs} runs", "a plan of at most 100000 training runs")
    hyps = _need(plan, "hypotheses", "plan")
    if not isinstance(hyps, list) or not hyps or len(hyps) > 64:
        raise PlanError("hypotheses", "...", "a non-empty list of at most 64 hypotheses")
    ids = set()
    for i, h in enumerate(hyps):
        where = f"hypotheses[{i}]"
        if not isinstance(h, dict):
            raise PlanError(where, "...", "a table")
        hid = _need(h, "id", where)
        safe_name(hid, f"{where}.id", PlanError)
        if hid in ids:
            raise PlanError(f"{where}.id", hid, "a unique id")
        ids.add(hid)
        for key in ("claim", "statistic"):
            if not isinstance(_need(h, key, where), str) or not h[key].strip() or len(h[key]) > 2000:
                raise PlanError(f"{where}.{key}", "...", "a non-empty statement of at most 2000 characters")
            _printable(h[key], f"{where}.{key}")
        kind = _need(h, "kind", where)
        if not isinstance(kind, str) or kind not in HYPOTHESIS_KINDS:
            raise PlanError(f"{where}.kind", kind, f"one of {', '.join(HYPOTHESIS_KINDS)}")
        decision = h.get("decision")
        if not isinstance(decision, dict) or "rule" not in decision:
            raise PlanError(f"{where}.decision", "...", "a table with a decision rule ('rule = ...')")
        if decision["rule"] not in HYPOTHESIS_KINDS[kind]:
            raise PlanError(f"{where}.decision.rule", decision["rule"], f"one of {', '.join(HYPOTHESIS_KINDS[kind])} for kind {kind}")
        if kind == "prediction":
            roles = ()
        elif kind in ("loss_difference", "loss_and_cost", "every_pair"):
            roles = ("treatment", "control")
        else:
            roles = ("arm",)
        for role in roles:
            name = _need(h, role, where)
            if not isinstance(name, str) or name not in arm_by:
                raise PlanError(f"{where}.{role}", name, f"one of the arms {sorted(arm_by)}")
        if kind in ("intervention", "boundary", "margin") and arm_by[h["arm"]]["scheme"] != "log-distance":
            raise PlanError(f"{where}.arm", h["arm"], "a log-distance arm")
        if kind == "loss_and_cost":
            _posnum(_need(decision, "max_cost_ratio", f"{where}.decision"), f"{where}.decision.max_cost_ratio")
            _posint(_need(decision, "cost_steps", f"{where}.decision"), f"{where}.decision.cost_steps", 10_000)
        if kind == "intervention":
            shifts = _need(h, "shifts", where)
            if not isinstance(shifts, list) or not shifts or len(shifts) > 16 or not all(
                    isinstance(s, (int, float)) and not isinstance(s, bool) and s != 0 and abs(s) <= 100 for s in shifts):
                raise PlanError(f"{where}.shifts", "...", "a list of 1 to 16 non-zero exponent shifts in [-100, 100]")
            n = h.setdefault("eval_length", n_max)
            if n not in ns:
                raise PlanError(f"{where}.eval_length", n, f"one of the evaluation lengths {ns}")
            if decision["rule"] in ("sign_test", "sign_test_over_runs"):
                a = _posnum(_need(decision, "alpha", f"{where}.decision"), f"{where}.decision.alpha")
                if a >= 1:
                    raise PlanError(f"{where}.decision.alpha", a, "a number in (0, 1)")
        if kind == "boundary":
            near = _posnum(_need(h, "near", where), f"{where}.near", 50.0)
            f = _posnum(_need(decision, "fraction", f"{where}.decision"), f"{where}.decision.fraction")
            if f > 1:
                raise PlanError(f"{where}.decision.fraction", f, "a number in (0, 1]")
            _check_reach(arm_by[h["arm"]], near, lr, tr["steps"], Ls, n_max, f"{where}.near")
        if kind == "margin":
            if "min_binding" in decision:
                mb = decision["min_binding"]
                if isinstance(mb, bool) or not isinstance(mb, (int, float)) or not 0 <= mb <= 1:
                    raise PlanError(f"{where}.decision.min_binding", mb, "a fraction in [0, 1]")
            if "margin" not in arm_by[h["arm"]]:
                raise PlanError(f"{where}.arm", h["arm"], "an arm trained with margin = {window, tol, score_bound}")
            if "control" in h and (not isinstance(h["control"], str) or h["control"] not in arm_by):
                raise PlanError(f"{where}.control", h["control"], f"one of the arms {sorted(arm_by)}")
        if kind == "prediction":
            harms = _need(h, "arms", where)
            if not isinstance(harms, list) or not harms or any(not isinstance(a, str) or a not in arm_by or arm_by[a]["scheme"] != "log-distance"
                                                               for a in harms if isinstance(a, str)) \
                    or not all(isinstance(a, str) for a in harms):
                raise PlanError(f"{where}.arms", "...", "a non-empty list of log-distance arms")
            fit, test = _need(h, "fit_seeds", where), _need(h, "test_seeds", where)
            for key, seeds in (("fit_seeds", fit), ("test_seeds", test)):
                if not isinstance(seeds, list) or len(seeds) < 2 or len(seeds) > 1000:
                    raise PlanError(f"{where}.{key}", "...", "a list of at least 2 seeds")
                for j, s in enumerate(seeds):
                    _seed(s, f"{where}.{key}[{j}]")
                    if not all(s in arm_by[a]["seeds"] for a in harms):
                        raise PlanError(f"{where}.{key}[{j}]", s, "a seed of every arm named")
            if set(fit) & set(test):
                raise PlanError(f"{where}.test_seeds", test, "seeds disjoint from fit_seeds (held out)")
            B = _need(h, "score_bound", where)
            if isinstance(B, bool) or not isinstance(B, (int, float)) or not 0 <= B <= 10:
                raise PlanError(f"{where}.score_bound", B, "a number in [0, 10]")
    try:
        plan = json.loads(json.dumps(plan, allow_nan=False))  # plain data only (every field checked above)
    except (TypeError, ValueError):
        raise PlanError("plan", "...", "plain data with finite numbers") from None
    if machine:
        check_machine(plan)
    mem = estimate_memory(plan)
    need = max(mem["train_bytes"], mem["eval_bytes"])
    if need > res["memory_gb"] * 2**30:
        raise PlanError("model", f"{mem['parameters']} parameters", f"a model whose largest run fits resources.memory_gb = "
                        f"{res['memory_gb']} (estimated {need / 2**30:.1f} GB)")
    if any(a["scheme"] == "causal-ot" for a in arms):
        if mem["ot_sequences_eval"] < 1:
            raise PlanError("evaluation.lengths", n_max, f"lengths at which one sequence of OT attention fits the allocation "
                            f"cap of {mem['allocation_cap_bytes']} bytes (32 bytes x heads x n^2; OTPRIOR_MAX_BYTES)")
        if mem["ot_sequences_train"] < 1:
            raise PlanError("training.train_lengths", max(Ls), "lengths at which one sequence of OT attention fits the "
                            f"allocation cap of {mem['allocation_cap_bytes']} bytes (32 bytes x heads x T^2; OTPRIOR_MAX_BYTES)")
    return plan


def check_machine(plan: dict, *, need_device: bool = True) -> dict:
    """Check a validated plan against this machine (device, threads, data); returns the data
    files ``{"files": [...], "bytes": n, "device_here": bool}``. Raises :class:`PlanError` naming
    the field. With ``need_device=False`` (a dry run preparing a plan for another machine) a
    missing CUDA device is reported in ``device_here`` instead of refused, and a thread count
    above this machine's is not checked; every other check (data size and hash, lengths) runs."""
    res, data = plan["resources"], plan["data"]
    here = True
    if res["device"] == "cuda":
        try:
            import torch

            here = torch.cuda.is_available()
        except ImportError:
            here = False
        if not here and need_device:
            raise PlanError("resources.device", "cuda", "a device this machine has (no CUDA GPU is available)")
    if here and res["threads"] != "auto" and res["threads"] > _cpus():
        raise PlanError("resources.threads", res["threads"], f"at most the {_cpus()} CPUs this process may use")
    files = corpus_files(data)
    total = sum(size for _, size in files)
    if total < data["max_bytes"]:
        raise PlanError("data.max_bytes", data["max_bytes"], f"at most the {total} bytes the data files hold")
    if "sha256" in data:  # the pin is checked here too, so a dry run refuses other data
        h, need = hashlib.sha256(), data["max_bytes"]
        for i, (path, _) in enumerate(files):
            chunk = read_regular(path, need, f"data.paths[{i}]" if data.get("paths") else "data", prefix=True, error=PlanError)
            h.update(chunk)
            need -= len(chunk)
            if need <= 0:
                break
        if h.hexdigest() != data["sha256"]:
            raise PlanError("data.sha256", data["sha256"], f"the SHA-256 of the data read here ({h.hexdigest()}; other "
                            "files or another Python's standard library hold other bytes)")
    train_bytes, val_bytes = split_sizes(data["max_bytes"])
    longest = max(plan["evaluation"]["lengths"])
    if val_bytes <= longest + 1:
        raise PlanError("data.max_bytes", data["max_bytes"], f"enough data for a validation split longer than the "
                        f"evaluation length {longest} (it holds {val_bytes} bytes)")
    if train_bytes <= max(plan["training"]["train_lengths"]) + 1:
        raise PlanError("data.max_bytes", data["max_bytes"], "enough data for training windows")
    return {"files": files, "bytes": total, "device_here": here}


def split_sizes(nbytes: int, every: int = 10) -> tuple:
    """``(train, validation)`` sizes of the study's split of ``nbytes`` bytes: every
    ``every``-th block of ``block = max(1024, min(65536, nbytes // (4 every)))`` bytes is
    validation (:func:`otprior.torch.experiment.load_data` splits this way)."""
    block = split_block(nbytes, every)
    val = 0
    for b in range(every - 1, -(-nbytes // block), every):
        val += min(block, nbytes - b * block)
    return nbytes - val, val


def split_block(nbytes: int, every: int = 10) -> int:
    """The block size of the study's train/validation split (:func:`split_sizes`)."""
    return max(1024, min(1 << 16, nbytes // (4 * every)))


def _check_reach(arm, near, lr, steps, Ls, n_max, field):
    """Refuse a boundary hypothesis whose statistic is fixed by the start: the raw parameter
    must be able to cross ``alpha - 1 = near`` from its start within the optimiser's reach."""
    reach = optimiser_reach(lr, steps)
    floors = [arm["alpha_margin"]] if "alpha_margin" in arm else [_margin_value(arm, L, n_max) for L in Ls]
    for m in floors:
        start = m + arm["init_above_floor"]  # alpha - 1 at the start
        if near <= m:
            raise PlanError(field, near, f"a threshold above the arm's floor alpha - 1 = {m:.4g} (else no head can be near)")
        raw0 = _softplus_inv(arm["init_above_floor"])
        raw1 = _softplus_inv(near - m)
        if abs(raw1 - raw0) > reach:
            raise PlanError(field, near, f"a threshold the exponents can cross: the start alpha - 1 = {start:.4g} needs a move of "
                            f"{abs(raw1 - raw0):.3g} in the raw parameter, the optimiser's reach is {reach:.3g}")


def _margin_value(arm, L, n_max):
    from .margin import margin_for

    spec = arm["margin"]
    return float(margin_for(int(spec["window"]), (int(L), int(n_max)), float(spec["tol"]),
                            score_bound=float(spec["score_bound"])).margin)


def expand_runs(plan: dict) -> list:
    """The runs of a validated plan, seeds outermost (a partial study covers every hypothesis),
    then the n-gram baselines and the cost measurements (which need both arms' checkpoints)."""
    tr, ev, model = plan["training"], plan["evaluation"], plan["model"]
    n_max = max(ev["lengths"])
    measure_by = {a["name"]: {} for a in plan["arms"]}
    for h in plan["hypotheses"]:
        if h["kind"] == "intervention":
            spec = measure_by[h["arm"]].setdefault("intervention", {"shifts": [], "eval_length": h["eval_length"]})
            spec["shifts"] = sorted(set(spec["shifts"]) | {float(s) for s in h["shifts"]})
        if h["kind"] == "margin":
            arm = next(a for a in plan["arms"] if a["name"] == h["arm"])
            for name in (h["arm"], h.get("control")):
                if name is not None:
                    measure_by[name]["distant_mass"] = {"window": arm["margin"]["window"]}
    for a in plan["arms"]:
        if a["scheme"] == "log-distance":
            measure_by[a["name"]]["trace_alpha"] = True
    runs = []
    max_seeds = max(len(a["seeds"]) for a in plan["arms"])
    for k in range(max_seeds):
        for L in tr["train_lengths"]:
            for arm in plan["arms"]:
                if k >= len(arm["seeds"]):
                    continue
                seed = arm["seeds"][k]
                cfg = dict(model, scheme=arm["scheme"], train_length=L)
                for key in ("ot_rho", "ot_tol", "rope_base", "alpha_margin"):
                    if key in arm:
                        cfg[key] = arm[key]
                if "margin" in arm:
                    cfg["alpha_margin"] = _margin_value(arm, L, n_max)
                if arm["scheme"] == "log-distance":
                    cfg["alpha_init"] = 1.0 + cfg["alpha_margin"] + float(arm["init_above_floor"])
                runs.append({"id": f"{arm['name']}/L{L}/seed{seed}", "kind": "train", "arm": arm["name"], "seed": seed,
                             "train_length": L, "config": cfg, "measure": measure_by[arm["name"]]})
    for order in plan["data"].get("baselines", []):
        runs.append({"id": f"ngram/order{order}", "kind": "ngram", "order": int(order)})
    trained = {r["id"] for r in runs}
    for h in plan["hypotheses"]:
        if h["kind"] != "loss_and_cost":
            continue
        t, c = h["treatment"], h["control"]
        for L in tr["train_lengths"]:
            for seed in next(a for a in plan["arms"] if a["name"] == t)["seeds"]:
                a, b = f"{t}/L{L}/seed{seed}", f"{c}/L{L}/seed{seed}"
                if a in trained and b in trained:
                    runs.append({"id": f"cost/{t}-vs-{c}/L{L}/seed{seed}", "kind": "cost", "treatment": a, "control": b,
                                 "arm": "cost", "seed": seed, "train_length": L,
                                 "steps": int(h["decision"]["cost_steps"])})
    return runs


# ---------------------------------------------------------------- statistics and decisions


def _bootstrap(values, level, resamples, seed=0, strata=None):
    """Percentile bootstrap of the mean; with ``strata``, units are resampled within each stratum."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    if strata is None:
        idx = rng.integers(0, x.size, size=(resamples, x.size))
    else:
        strata = np.asarray(strata)
        cols = []
        for s in np.unique(strata):
            members = np.flatnonzero(strata == s)
            cols.append(members[rng.integers(0, members.size, size=(resamples, members.size))])
        idx = np.concatenate(cols, axis=1)
    means = x[idx].mean(axis=1)
    a = (1 - level) / 2
    return float(x.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def _crossed_bootstrap(D, strata, level, resamples, seed=0):
    """Crossed bootstrap of the mean of ``D[unit, window]``: units resampled within their stratum
    (training length) and windows resampled, independently; returns ``(mean, low, high)``."""
    D = np.asarray(D, dtype=float)
    K, N = D.shape
    rng = np.random.default_rng(seed)
    wr = np.zeros((resamples, K))
    strata = np.asarray(strata)
    for s in np.unique(strata):
        members = np.flatnonzero(strata == s)
        picks = members[rng.integers(0, members.size, size=(resamples, members.size))]
        for j in range(members.size):
            np.add.at(wr, (np.arange(resamples), picks[:, j]), 1.0)
    wc = np.zeros((resamples, N))
    picks = rng.integers(0, N, size=(resamples, N))
    for j in range(N):
        np.add.at(wc, (np.arange(resamples), picks[:, j]), 1.0)
    means = np.einsum("rk,kn,rn->r", wr, D, wc) / (K * N)
    a = (1 - level) / 2
    return float(D.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def _binom_tail(k, n):
    # P(X >= k) for X ~ Binomial(n, 1/2)
    return float(sum(math.comb(n, j) for j in range(k, n + 1)) / 2**n)


def _finite(x) -> bool:
    try:
        return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))
    except (TypeError, ValueError):
        return False


def _by_arm(records):
    out = {}
    for r in records:
        if r.get("kind", "train") == "train" and "failed" not in r:
            out.setdefault(r["arm"], {})[(r["train_length"], r["seed"])] = r
    return out


def _prior_growth(alphas, L, n, B):
    """Mean over heads of the upper end of the band of attention mass at distance ``>= L`` at
    length ``n`` for content within ``B`` (Theorem 10, ``proofs/content_bound.md``)."""
    from .encodings import LogDistance

    vals = [float(LogDistance(float(a), logit_bound=float(B)).distant_mass_range(int(L), int(n))[1])
            for a in np.ravel(alphas)]
    return float(np.mean(vals))


def _lstsq_predict(x_fit, y_fit, x_test):
    """Least squares ``y = a + b x`` (``x`` None: the mean) fitted on one set, predicted on another."""
    if x_fit is None:
        return np.full(len(x_test), float(np.mean(y_fit)))
    X = np.column_stack([np.ones(len(x_fit)), x_fit])
    coef, *_ = np.linalg.lstsq(X, np.asarray(y_fit, dtype=float), rcond=None)
    return coef[0] + coef[1] * np.asarray(x_test, dtype=float)


def _decide_prediction(h, plan, arms, level, resamples):
    """H7: the prior's distant-mass growth against the baselines, out of sample."""
    lengths = sorted(plan["evaluation"]["lengths"])
    B = float(h["score_bound"])
    fit, test = set(h["fit_seeds"]), set(h["test_seeds"])
    rows = []
    for name in h["arms"]:
        for (L, seed), r in arms.get(name, {}).items():
            if seed not in fit and seed not in test:
                continue
            base = float(np.mean(r["loss"][str(L)]))
            for n in lengths:
                rows.append({"arm": name, "L": L, "seed": seed, "n": n, "loss_L": base,
                             "y": float(np.mean(r["loss"][str(n)])) - base, "x": _prior_growth(r["alpha"], L, n, B),
                             "test": seed in test})
    if not rows:
        return None
    errs = {"prior": [], "training-length loss": [], "scheme mean": []}
    units = []
    for n in lengths:
        f = [q for q in rows if q["n"] == n and not q["test"]]
        t = [q for q in rows if q["n"] == n and q["test"]]
        if len(f) < 3 or not t:
            return None
        y_f = [q["y"] for q in f]
        y_t = np.array([q["y"] for q in t])
        preds = {"prior": _lstsq_predict([q["x"] for q in f], y_f, [q["x"] for q in t]),
                 "training-length loss": _lstsq_predict([q["loss_L"] for q in f], y_f, [q["loss_L"] for q in t]),
                 "scheme mean": _lstsq_predict(None, y_f, t)}
        for k, p in preds.items():
            errs[k].extend(((p - y_t) ** 2).tolist())
        units.extend((q["arm"], q["L"], q["seed"]) for q in t)
    rmse = {k: float(np.sqrt(np.mean(v))) for k, v in errs.items()}
    best = min(("training-length loss", "scheme mean"), key=lambda k: rmse[k])
    # unit: a held-out checkpoint (its squared errors averaged over the evaluation lengths)
    keys = sorted(set(units))
    diff = np.zeros(len(keys))
    for i, key in enumerate(keys):
        sel = [j for j, u in enumerate(units) if u == key]
        diff[i] = np.mean([errs["prior"][j] - errs[best][j] for j in sel])
    est, lo, hi = _bootstrap(diff, level, resamples, strata=[k[1] for k in keys]) if len(keys) >= 2 else (
        float(diff.mean()), None, None)
    return {"rmse": rmse, "best_baseline": best, "estimate": est, "interval": None if lo is None else [lo, hi],
            "checkpoints_fit": len({(q["arm"], q["L"], q["seed"]) for q in rows if not q["test"]}),
            "checkpoints_test": len(keys)}


def decide(plan: dict, records: list, runs: list | None = None) -> list:
    """Decide every hypothesis of a validated plan from the run records.

    Returns one dict per hypothesis: ``id``, ``claim``, ``outcome`` (``"supported"``, ``"not
    supported"``, ``"incomplete"`` while runs it needs are missing, ``"undecided"`` when a
    run it needs failed, ``"not run"`` with no data), ``estimate``, ``interval``, ``units``
    (what was resampled and how many) and ``detail``. ``runs`` (default
    :func:`expand_runs`) are the runs the plan expects.
    """
    st = plan["statistics"]
    level, resamples = float(st["level"]), int(st["resamples"])
    n_max = max(plan["evaluation"]["lengths"])
    runs = expand_runs(plan) if runs is None else runs
    by_id = {r["id"]: r for r in records}
    failed = {r["id"] for r in records if "failed" in r}
    records = sorted(records, key=lambda r: (r.get("seed", -1), r.get("train_length", 0), r["id"]))
    arms = _by_arm(records)
    costs = [r for r in records if r.get("kind") == "cost" and "failed" not in r]
    out = []
    for h in plan["hypotheses"]:
        row = {"id": h["id"], "claim": h["claim"], "kind": h["kind"], "rule": h["decision"]["rule"], "outcome": "not run",
               "estimate": None, "interval": None, "units": None, "detail": ""}
        kind = h["kind"]
        involved = {h.get("treatment"), h.get("control"), h.get("arm"), *h.get("arms", [])} - {None}
        needed = [r["id"] for r in runs if r.get("arm") in involved or (kind == "loss_and_cost" and r["kind"] == "cost")]
        missing = [i for i in needed if i not in by_id]
        bad = [i for i in needed if i in failed]
        ok = None
        if kind in ("loss_difference", "loss_and_cost", "every_pair"):
            t, c = arms.get(h["treatment"], {}), arms.get(h["control"], {})
            keys = sorted(set(t) & set(c))
            if keys:
                D = np.array([np.asarray(t[k]["loss"][str(n_max)]) - np.asarray(c[k]["loss"][str(n_max)]) for k in keys])
                est, lo, hi = _crossed_bootstrap(D, [k[0] for k in keys], level, resamples)
                per_run = D.mean(axis=1)
                below = int(np.sum(per_run < 0))
                row.update(estimate=est, interval=[lo, hi],
                           units=f"{len(keys)} paired runs x {D.shape[1]} windows (crossed bootstrap)",
                           detail=f"{below} of {len(keys)} paired runs with a lower mean loss; "
                                  f"sign test p = {_binom_tail(below, len(keys)):.3g}")
                ok = hi < 0
                if kind == "loss_and_cost":
                    cs = [r for r in costs if (r["train_length"], r["seed"]) in set(keys)
                          and r["treatment"].split("/")[0] == h["treatment"]]
                    if cs:
                        flops = [r["flops_ratio"] for r in cs]
                        clock = [r["time_ratio"] for r in cs]
                        ratio = float(np.exp(np.mean(np.log(flops))))
                        row["cost_ratio"] = ratio
                        row["time_ratio"] = float(np.exp(np.mean(np.log(clock))))
                        row["detail"] += (f"; counted work per training step {ratio:.3g}x the control's (geometric mean over "
                                          f"{len(cs)} pairs, range {min(flops):.3g}-{max(flops):.3g}; rule: at most "
                                          f"{h['decision']['max_cost_ratio']}); interleaved wall-clock ratio "
                                          f"{row['time_ratio']:.3g} (reported, not decisive)")
                        ok = ok and ratio <= float(h["decision"]["max_cost_ratio"])
                    else:
                        ok = None
                if kind == "every_pair":
                    pairs = []
                    for k, d in zip(keys, D, strict=True):
                        e, a, b = _bootstrap(d, level, resamples)
                        pairs.append({"train_length": k[0], "seed": k[1], "estimate": e, "interval": [a, b]})
                    below = sum(p["interval"][1] < 0 for p in pairs)
                    row["pairs"] = pairs
                    row["detail"] = (f"{below} of {len(pairs)} (training length, seed) pairs with window interval below zero; "
                                     + row["detail"])
                    ok = below == len(pairs)
        elif kind == "intervention":
            recs = [r for r in arms.get(h["arm"], {}).values() if "intervention" in r]
            shifts = [float(s) for s in h["shifts"]]
            rows = [x for r in recs for x in r["intervention"] if x["shift"] in shifts]
            if recs:
                agree = sum(x["agree"] for x in rows)
                against = sum(x["verdict"] == "against the prediction" for x in rows)
                signed = np.array([np.mean([x["loss_change"] * x["predicted_loss_direction"] for x in r["intervention"]
                                            if x["shift"] in shifts]) for r in recs])
                strata = [r["train_length"] for r in recs]
                if len(signed) >= 2:
                    est, lo, hi = _bootstrap(signed, level, resamples, strata=strata)
                    row.update(estimate=est, interval=[lo, hi])
                pos, neg = int(np.sum(signed > 0)), int(np.sum(signed < 0))
                p_runs = _binom_tail(pos, pos + neg) if pos + neg else 1.0
                p_rows = _binom_tail(agree, len(rows)) if rows else 1.0
                row["units"] = f"{len(recs)} checkpoints x {len(shifts)} shifts"
                row["sign_test_p"] = p_runs if h["decision"]["rule"] == "sign_test_over_runs" else p_rows
                row["detail"] = ("estimate: mean over checkpoints of the loss change times the predicted sign (positive: in the "
                                 f"predicted direction); {pos} of {pos + neg} checkpoints in the predicted direction, sign test "
                                 f"over runs p = {p_runs:.3g}; rows: {agree} of {len(rows)} with a window interval in the "
                                 f"predicted direction, {against} against")
                rule = h["decision"]["rule"]
                if rule == "all_in_predicted_direction":
                    ok = agree == len(rows)
                elif rule == "sign_test":
                    ok = p_rows < float(h["decision"]["alpha"])
                else:
                    ok = p_runs < float(h["decision"]["alpha"])
        elif kind == "boundary":
            recs = list(arms.get(h["arm"], {}).values())
            if len(recs) >= 2:
                near = float(h["near"])
                fr = [np.mean(np.asarray(r["alpha"]) - 1 <= near) for r in recs]
                est, lo, hi = _bootstrap(fr, level, resamples, strata=[r["train_length"] for r in recs])
                allv = np.concatenate([np.ravel(r["alpha"]) for r in recs])
                start = [r["alpha_trace"][0][1] for r in recs if r.get("alpha_trace")]
                f0 = float(np.mean([np.mean(np.asarray(s) - 1 <= near) for s in start])) if start else None
                row.update(estimate=est, interval=[lo, hi], units=f"{len(recs)} checkpoints")
                row["detail"] = (f"fraction of heads with alpha - 1 <= {near}; trained exponents from {allv.min():.3f} "
                                 f"to {allv.max():.3f} (median {np.median(allv):.3f})"
                                 + ("" if f0 is None else f"; at the start the fraction was {f0:.3g}"))
                ok = lo >= float(h["decision"]["fraction"])
        elif kind == "margin":
            recs = [r for r in arms.get(h["arm"], {}).values() if "distant_mass" in r]
            arm = next(a for a in plan["arms"] if a["name"] == h["arm"])
            tol, B = float(arm["margin"]["tol"]), float(arm["margin"]["score_bound"])
            if len(recs) >= 2:
                worst = [float(np.max(r["distant_mass"]["growth"])) for r in recs]
                est, lo, hi = _bootstrap(worst, level, resamples, strata=[r["train_length"] for r in recs])
                row.update(estimate=est, interval=[lo, hi], units=f"{len(recs)} checkpoints")
                heads = sum(np.size(r.get("alpha", r["distant_mass"]["growth"])) for r in recs)
                binding = sum(int(np.sum(np.asarray(r["alpha"]) - 1 - r["alpha_margin"] <= 0.05)) for r in recs if "alpha" in r)
                over = sum(int(np.sum(np.asarray(r["distant_mass"].get("content_bound", [0])) > B)) for r in recs)
                detail = (f"largest head growth of mass beyond W = {arm['margin']['window']} (rule: at most tol = {tol}); "
                          f"{binding} of {heads} heads ended within 0.05 of the floor (the margin binds); {over} of {heads} "
                          f"had a measured content spread above B = {B} (outside the guarantee)")
                ctrl = [r for r in arms.get(h.get("control"), {}).values() if "distant_mass" in r]
                if len(ctrl) >= 2:
                    e2, l2, h2 = _bootstrap([float(np.max(r["distant_mass"]["growth"])) for r in ctrl], level, resamples)
                    row["control"] = {"estimate": e2, "interval": [l2, h2]}
                    detail += f"; control arm {h['control']}: {e2:.4f} [{l2:.4f}, {h2:.4f}]"
                row["detail"] = detail
                ok = hi <= tol
                need = float(h["decision"].get("min_binding", 0.0))
                has_alpha = [r for r in recs if "alpha" in r]
                if need > 0 and has_alpha:
                    share = binding / sum(np.size(r["alpha"]) for r in has_alpha)
                    row["binding_fraction"] = share
                    if share < need:  # the margin did not constrain training: H6 was not tested
                        row["detail"] = (f"the margin bound on a fraction {share:.3g} of heads, below the preregistered "
                                         f"{need}: not tested; " + detail)
                        row["not_tested"] = True
                        ok = None
        elif kind == "prediction":
            res = _decide_prediction(h, plan, arms, level, resamples)
            if res is not None:
                row.update(estimate=res["estimate"], interval=res["interval"], prediction=res,
                           units=f"{res['checkpoints_test']} held-out checkpoints (fitted on {res['checkpoints_fit']})")
                r = res["rmse"]
                row["detail"] = (f"out-of-sample RMSE of the loss growth: prior {r['prior']:.4g}, training-length loss "
                                 f"{r['training-length loss']:.4g}, scheme mean {r['scheme mean']:.4g}; estimate: mean "
                                 f"squared error of the prior minus that of the better baseline ({res['best_baseline']})")
                ok = res["interval"] is not None and res["interval"][1] < 0
        if ok is not None:
            row["outcome"] = "supported" if ok else "not supported"
        elif row.get("not_tested"):
            row["outcome"] = "not tested"
        if bad:
            row["provisional"] = row["outcome"]
            row["outcome"] = "undecided"
            row["detail"] = f"{len(bad)} run(s) it needs failed ({', '.join(bad[:3])}); " + row["detail"]
        elif missing and row["estimate"] is not None:
            row["provisional"] = row["outcome"]
            row["outcome"] = "incomplete"
            row["detail"] = f"{len(needed) - len(missing)} of {len(needed)} runs done; " + row["detail"]
        elif missing:
            row["outcome"] = "incomplete" if any(i in by_id for i in needed) else "not run"
        for key in ("estimate", "interval"):
            if row[key] is not None and not _finite(row[key]):
                row[key] = None
                row["outcome"] = "undecided"
        out.append(row)
    return out


def _variants(h, plan):
    """The other reasonable choices for one hypothesis: ``(label, plan copy, hypothesis copy)``.

    Every hypothesis is re-decided at two other confidence levels (of 0.90, 0.95, 0.99); then,
    by kind (each variant differs from the preregistered choice; none repeats it): the
    other evaluation lengths (loss comparisons), the cost threshold and wall-clock instead of
    counted work (H2-like), one pooled interval instead of every pair (H3-like), the other
    decision rules and each shift alone (interventions), the threshold and the fraction
    (boundary), the binding requirement (margin), fit and test seeds swapped and the content
    bound (prediction).
    """
    import copy

    def edit(label, fn_plan=None, fn_h=None):
        p2, h2 = copy.deepcopy(plan), copy.deepcopy(h)
        if fn_plan:
            fn_plan(p2)
        if fn_h:
            fn_h(h2)
        p2["hypotheses"] = [h2]
        return label, p2, h2

    def level(x):
        return lambda p: p["statistics"].__setitem__("level", x)

    def others(values, current):
        """The distinct values other than the preregistered one, in order."""
        seen = []
        for v in values:
            if not math.isclose(float(v), float(current), rel_tol=1e-12, abs_tol=1e-15) and v not in seen:
                seen.append(v)
        return seen

    pre = float(plan["statistics"]["level"])
    out = [edit(f"level {x:.2f}", level(x)) for x in others((0.90, 0.95, 0.99), pre)[:2]]
    kind = h["kind"]
    lengths = sorted(plan["evaluation"]["lengths"])
    if kind in ("loss_difference", "loss_and_cost", "every_pair"):
        for n in lengths[:-1]:
            out.append(edit(f"evaluated at n = {n}", lambda p, n=n: p["evaluation"].__setitem__("lengths", [n])))
    if kind == "loss_and_cost":
        top = float(h["decision"]["max_cost_ratio"])
        for r in others((top / 2, min(1.0, 2 * top)), top):
            out.append(edit(f"cost threshold {r:.3g}", fn_h=lambda x, r=r: x["decision"].__setitem__("max_cost_ratio", r)))
        out.append(edit("cost as interleaved wall-clock", fn_h=lambda x: x.__setitem__("_cost", "time_ratio")))
    if kind == "every_pair":
        out.append(edit("one pooled interval over all pairs",
                        fn_h=lambda x: (x.__setitem__("kind", "loss_difference"),
                                        x["decision"].__setitem__("rule", "interval_below_zero"))))
    if kind == "intervention":
        rule, alpha = h["decision"]["rule"], float(h["decision"].get("alpha", 0.05))
        for other in ("sign_test_over_runs", "sign_test", "all_in_predicted_direction"):
            if other != rule:
                out.append(edit(f"rule {other}" + ("" if other == "all_in_predicted_direction" else f" at {alpha:g}"),
                                fn_h=lambda x, other=other, alpha=alpha: (
                                    x["decision"].__setitem__("rule", other),
                                    x["decision"].__setitem__("alpha", alpha))))
        # a stricter level for the sign test over runs (the preregistered rule's, or that rule at 0.01)
        out.append(edit("rule sign_test_over_runs at 0.01", fn_h=lambda x: (
            x["decision"].__setitem__("rule", "sign_test_over_runs"), x["decision"].__setitem__("alpha", 0.01))))
        if len(h["shifts"]) > 1:
            for sh in h["shifts"]:
                out.append(edit(f"shift {sh:+g} alone", fn_h=lambda x, sh=sh: x.__setitem__("shifts", [sh])))
    if kind == "boundary":
        near, frac = float(h["near"]), float(h["decision"]["fraction"])
        for v in others((max(near - 0.1, near / 2), near + 0.1), near):
            out.append(edit(f"near = {v:.3g}", fn_h=lambda x, v=v: x.__setitem__("near", v)))
        for v in others((frac / 2, min(1.0, 2 * frac)), frac):
            out.append(edit(f"fraction at least {v:.3g}", fn_h=lambda x, v=v: x["decision"].__setitem__("fraction", v)))
    if kind == "margin":
        for v in others((0.0, 0.25, 0.5), float(h["decision"].get("min_binding", 0.0)))[:2]:
            out.append(edit(f"min_binding {v:g}", fn_h=lambda x, v=v: x["decision"].__setitem__("min_binding", v)))
    if kind == "prediction":
        out.append(edit("fit and test seeds swapped", fn_h=lambda x: (
            x.__setitem__("fit_seeds", h["test_seeds"]), x.__setitem__("test_seeds", h["fit_seeds"]))))
        B = float(h["score_bound"])
        for b in others((0.0, 2 * B if B > 0 else 1.0), B):
            out.append(edit(f"content bound {b:g}", fn_h=lambda x, b=b: x.__setitem__("score_bound", b)))
    return out


def sensitivity(plan: dict, records: list) -> list:
    """Re-decide every hypothesis under the other reasonable choices of its statistic and rule.

    The preregistered decision (:func:`decide`) is the result; this says how much of it rests
    on choices the plan made. For each hypothesis of the validated ``plan``, each variant of
    :func:`_variants` is decided from the same ``records`` by the same code.

    Returns
    -------
    list of dict
        ``id``, ``variant`` (``"as preregistered"`` first), ``outcome``, ``estimate``,
        ``interval`` and, where the hypothesis has one, ``cost_ratio``.
    """
    rows = []
    runs = expand_runs(plan)
    for h in plan["hypotheses"]:
        base = dict(plan, hypotheses=[h])
        for label, p2, h2 in [("as preregistered", base, h)] + _variants(h, plan):
            if label != "as preregistered" and p2 == base:
                continue  # a variant that is the preregistered choice again says nothing
            cost_key = h2.pop("_cost", None) if isinstance(h2, dict) else None
            recs = records
            if cost_key:  # decide on the wall-clock ratio: the same records with it in the counted field
                recs = [dict(r, flops_ratio=r[cost_key]) if r.get("kind") == "cost" and cost_key in r else r
                        for r in records]
            d = decide(p2, recs, runs)[0]
            rows.append({"id": h["id"], "variant": label, "outcome": d["outcome"], "estimate": d["estimate"],
                         "interval": d["interval"], "cost_ratio": d.get("cost_ratio")})
    return rows


def sensitivity_report(plan: dict, digest: str, records: list) -> str:
    """The text of a finished study's ``sensitivity.md``: :func:`sensitivity_table` of
    :func:`sensitivity` under a heading naming the plan and its SHA-256."""
    return (f"# Sensitivity of {plan['plan'].get('name', '')} (plan SHA-256 `{digest}`)\n\nEvery hypothesis "
            "re-decided from the same runs under the other reasonable choices of its statistic and rule (the "
            "preregistered choice first; a variant that would repeat it is left out).\n\n"
            + sensitivity_table(sensitivity(plan, records)))


def sensitivity_table(rows: list) -> str:
    """Markdown table of :func:`sensitivity`'s rows, one line per (hypothesis, variant)."""
    lines = ["| hypothesis | choice | outcome | estimate | interval |", "|---|---|---|---|---|"]
    for r in rows:
        iv = "" if r["interval"] is None else f"[{r['interval'][0]:+.4g}, {r['interval'][1]:+.4g}]"
        est = _fmt(r["estimate"]) + ("" if r.get("cost_ratio") is None else f" (cost {r['cost_ratio']:.3g}x)")
        lines.append(f"| {r['id']} | {r['variant']} | {r['outcome']} | {est} | {iv} |")
    return "\n".join(lines) + "\n"


def _fmt(x):
    return "" if x is None else f"{x:+.4g}"


def _table(plan, decisions, digest, records, finished, prov=None, baselines=None):
    level = plan["statistics"]["level"]
    trained = [r for r in records if r.get("kind", "train") == "train"]
    failed = [r for r in records if "failed" in r]
    lines = [f"# Study {plan['plan'].get('name', '')}", "", f"Plan SHA-256: `{digest}`", ""]
    if prov:
        lines += [f"Provenance: {prov}", ""]
    lines += [f"Training runs finished: {len(trained)}{'' if finished else ' — STUDY INCOMPLETE: outcomes are provisional'}"
              f"{f'; {len(failed)} failed' if failed else ''}; intervals are {int(round(100 * level))}% percentile bootstrap "
              "intervals.", ""]
    if baselines:
        lines += ["Count baselines on the same evaluation windows (nats/byte, beyond L at each length):", ""]
        lines += [f"- {b['id']}: " + ", ".join(f"n = {k}: {v:.4f}" for k, v in b["loss"].items()) for b in baselines]
        lines.append("")
    arms_summary = {}
    for r in trained:
        if "failed" in r:
            continue
        arms_summary.setdefault((r["arm"], r["train_length"]), []).append(r)
    if arms_summary:
        ns = [str(n) for n in sorted(plan["evaluation"]["lengths"])]
        lines += ["| arm | L | runs | loss at L | " + " | ".join(f"loss at {n}" for n in ns) + " |",
                  "|---|---|---|---|" + "---|" * len(ns)]
        for (arm, L), rs in sorted(arms_summary.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            vals = [np.mean([np.mean(r["loss"][str(L)]) for r in rs])] + [np.mean([np.mean(r["loss"][n]) for r in rs]) for n in ns]
            lines.append(f"| {arm} | {L} | {len(rs)} | " + " | ".join(f"{v:.4f}" for v in vals) + " |")
        lines.append("")
    lines += ["| hypothesis | claim | outcome | estimate | interval | units | detail |", "|---|---|---|---|---|---|---|"]
    for d in decisions:
        iv = "" if d["interval"] is None else f"[{d['interval'][0]:+.4g}, {d['interval'][1]:+.4g}]"
        outcome = f"**{d['outcome']}**" if finished and d["outcome"] in ("supported", "not supported") else d["outcome"]
        if "provisional" in d:
            outcome += f" (provisionally {d['provisional']})"
        lines.append(f"| {d['id']} | {d['claim']} | {outcome} | {_fmt(d['estimate'])} | {iv} | {d['units'] or ''} | {d['detail']} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- figures


def _save(fig, path):
    # through a temporary name and os.replace: a link planted at the figure's name is replaced
    from ._output import write_file_safely

    write_file_safely(path, lambda tmp: fig.savefig(tmp, dpi=130, format="png"), name="out")
    write_file_safely(path.with_suffix(".pdf"), lambda tmp: fig.savefig(tmp, format="pdf"), name="out")


def _figures(plan, records, decisions, out_dir):
    import matplotlib as mpl
    from matplotlib.figure import Figure

    paths = []
    lengths_eval = sorted(plan["evaluation"]["lengths"])
    Ls = plan["training"]["train_lengths"]
    arms = [a["name"] for a in plan["arms"]]
    style = {"axes.spines.top": False, "axes.spines.right": False, "font.size": 9}
    with mpl.rc_context(style):
        # loss against evaluation length, seed spread, one panel per training length
        fig = Figure(figsize=(3.4 * len(Ls), 3.2), layout="constrained")
        axes = fig.subplots(1, len(Ls), squeeze=False)[0]
        for ax, L in zip(axes, Ls, strict=True):
            xs = [L] + lengths_eval
            for i, name in enumerate(arms):
                rows = [r for r in records if r["arm"] == name and r["train_length"] == L]
                if not rows:
                    continue
                vals = np.array([[np.mean(r["loss"][str(n)]) for n in xs] for r in rows])
                mean = vals.mean(0)
                ax.plot(xs, mean, marker="o", ms=3, color=f"C{i % 10}", label=f"{name} ({len(rows)} seed{'s' if len(rows) > 1 else ''})")
                if len(rows) > 1:
                    ax.fill_between(xs, vals.min(0), vals.max(0), color=f"C{i % 10}", alpha=0.2, lw=0)
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(x) for x in xs])
            ax.minorticks_off()
            ax.set(title=f"trained at $L = {L}$", xlabel="evaluation length $n$", ylabel="loss (nats/byte)")
        axes[0].legend(fontsize=7)
        fig.suptitle("Loss against evaluation length (beyond $L$); band: seed range")
        p = out_dir / "loss_vs_length.png"
        _save(fig, p)
        paths.append(p)
        # exponent trajectories with the boundary and the margin
        traced = [r for r in records if "alpha_trace" in r]
        if traced:
            names = sorted({r["arm"] for r in traced}, key=arms.index)
            fig = Figure(figsize=(3.6 * len(names), 3.2), layout="constrained")
            axes = fig.subplots(1, len(names), squeeze=False)[0]
            for ax, name in zip(axes, names, strict=True):
                rows = [r for r in traced if r["arm"] == name]
                for r in rows:
                    steps = [s for s, _ in r["alpha_trace"]]
                    a = np.array([np.ravel(v) for _, v in r["alpha_trace"]])
                    ax.plot(steps, a, color=f"C{Ls.index(r['train_length']) % 10}", lw=0.5, alpha=0.5)
                ax.axhline(1.0, color="k", ls="--", lw=1, label=r"boundary $\alpha = 1$")
                margins = sorted({(r["train_length"], round(r["alpha_margin"], 4)) for r in rows})
                for j, (L, m) in enumerate(margins):
                    ax.axhline(1.0 + m, color=f"C{Ls.index(L) % 10}", ls=":", lw=1.2,
                               label=r"$1 + $margin (dotted, per $L$)" if j == 0 else None)
                for j, L in enumerate(Ls):
                    ax.plot([], [], color=f"C{j % 10}", label=f"$L = {L}$")
                ax.set(title=f"{name}: every head, {len(rows)} runs", xlabel="training step", ylabel=r"exponent $\alpha$")
                ax.legend(fontsize=7)
            p = out_dir / "exponent_trajectories.png"
            _save(fig, p)
            paths.append(p)
        # intervention effects with their intervals
        inter = [r for r in records if "intervention" in r]
        if inter:
            fig = Figure(figsize=(7.0, 3.2), layout="constrained")
            ax = fig.subplots()
            shifts = sorted({x["shift"] for r in inter for x in r["intervention"]})
            for j, s in enumerate(shifts):
                xs, ys, lo, hi = [], [], [], []
                for i, r in enumerate(inter):
                    for x in r["intervention"]:
                        if x["shift"] == s:
                            xs.append(i + 0.15 * (j - (len(shifts) - 1) / 2))
                            ys.append(x["loss_change"])
                            lo.append(x["loss_change"] - x["interval"][0])
                            hi.append(x["interval"][1] - x["loss_change"])
                pred = next(x["predicted_loss_direction"] for r in inter for x in r["intervention"] if x["shift"] == s)
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", ms=3, capsize=0, color=f"C{j}",
                            label=rf"shift $\delta = {s:+g}$ (predicted {'+' if pred > 0 else '-'})")
            ax.axhline(0, color="k", lw=0.8)
            ax.set(xlabel="checkpoint", ylabel="loss change (nats/byte)",
                   title="Changing only the bias beyond $L$: effect with bootstrap interval")
            ax.set_xticks(range(len(inter)), [f"{r['train_length']}/{r['seed']}" for r in inter], rotation=90, fontsize=6)
            ax.legend(fontsize=7)
            p = out_dir / "intervention_effects.png"
            _save(fig, p)
            paths.append(p)
    return paths


# ---------------------------------------------------------------- the runner


def _read_one(path, digest, out, log=None):
    """Records of one results file (see :func:`_read_results`)."""
    if path.is_symlink():
        if log:
            log(f"{path.name} is a link: not followed, it will be replaced")
        return []
    if not path.exists():
        return []
    records = []
    text = read_regular(path, _MAX_RESULTS_BYTES, "out", follow=False, error=PlanError).decode("utf-8", "replace")
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line, parse_constant=_no_constant)
            if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
                raise ValueError("not a run record")
        except (ValueError, RecursionError):
            if i == len(lines) - 1:  # the last line, without its newline: a write cut short
                if log:
                    log(f"{path.name}: dropped an incomplete last line (its run will be run again)")
                continue
            raise PlanError("out", str(out), f"a folder of valid result lines ({path.name} line {i + 1} is not one)") from None
        if rec.get("plan_sha256") != digest:
            raise PlanError("out", str(out), f"a folder without results of another plan ({path.name} line {i + 1} has "
                            f"plan {str(rec.get('plan_sha256'))[:12]}, this plan is {digest[:12]})")
        records.append(rec)
    return records


def _read_results(out, digest, log=None):
    """Records of ``out/results*.jsonl`` for this plan. A link at one of those names is not
    followed (it is ignored and replaced at the next write); a last line cut by a kill is
    dropped (its run is run again); any other bad line refuses the folder."""
    return [r for path in sorted(out.glob("results*.jsonl")) for r in _read_one(path, digest, out, log)]


def _write_results(path, records):
    write_text_atomic(path, "".join(_dumps_line(r) for r in records), "out")


def _dumps_line(record):
    from ._files import dumps_strict

    return dumps_strict(record) + "\n"


def run_study(plan_path, out_dir=None, *, resume=True, dry_run=False, max_runs=None, time_budget_s=None, figures=True,
              spread=False, time_steps=None, log=print) -> dict:
    """Run a preregistered study plan and decide its hypotheses.

    Parameters
    ----------
    plan_path : path or dict
        A ``.toml``/``.json`` plan file (its bytes are hashed) or a plan as a dict (its
        canonical JSON is hashed).
    out_dir : path, optional
        Results folder (default ``study-<name>`` in the current folder; the name admits no
        separator): ``results.jsonl`` (one strict-JSON line per run, with the plan hash and
        the provenance, rewritten atomically after every run), ``plan.json`` (the plan with
        every default filled in), ``hypotheses.md`` / ``.json``, ``sensitivity.md`` (once finished:
        each outcome re-decided under the other reasonable choices, :func:`sensitivity`), the figures,
        ``checkpoints/`` and ``partial/<plan hash>/`` (the mid-run training states, kept apart per plan). Links planted at
        those names are replaced, never followed; the folder is locked while the study writes.
    resume : bool
        Skip runs already in ``results.jsonl`` and resume a run from its partial state
        (``False``: refuse a non-empty folder). Resuming is the default: rerun the same
        command to continue.
    dry_run : bool
        Validate (against this machine too: threads, data files and size, the data hash, the
        allocation caps) and list the runs with the memory estimate; train nothing. A plan for
        a device this machine lacks (a GPU plan checked on a laptop) passes every other check
        and says so in ``device_here``; running it here is refused.
    max_runs : int, optional
        Stop after this many new runs (the study can be finished by a later call).
    time_budget_s : float, optional
        Start no new run after this many seconds, and stop a run in progress at its next
        state save once it is exceeded (default: the plan's ``resources.time_budget_s``).
    figures : bool
        Draw the figures (PNG and PDF) after the decisions.
    time_steps : int, optional
        With ``dry_run``: time this many training steps and one evaluation batch of every
        (scheme, training length) here and extrapolate to every run
        (:func:`otprior.torch.experiment.estimate_time`); the result's ``time_estimate``.
    spread : bool
        Under ``torchrun`` with several processes: ``False`` trains every run with
        DistributedDataParallel over all processes; ``True`` deals whole runs out to the
        processes dynamically: each process takes the next run no other has taken (an
        atomic claim file per run), longest first (OT, then longer training lengths), so
        that the processes finish together; each writes its own ``results.rank<r>.jsonl``.
        The cost measurements are spread the same way once every training run is done;
        process 0 decides and draws.

    Returns
    -------
    dict
        ``plan_sha256``, ``runs`` (total), ``done``, ``finished``, ``decisions`` and ``paths``.
    """
    if isinstance(plan_path, dict):
        plan = validate_plan(plan_path)  # first: a hostile dict is refused naming its field
        raw, digest = plan_path, plan_hash(plan_path)
    else:
        raw, digest = load_plan(plan_path)
        plan = validate_plan(raw)
    machine = check_machine(plan, need_device=not dry_run)
    runs = expand_runs(plan)
    mem = estimate_memory(plan)
    if dry_run:
        result = {"plan_sha256": digest, "runs": len(runs), "run_ids": [r["id"] for r in runs], "memory": mem,
                  "device": plan["resources"]["device"], "device_here": machine["device_here"],
                  "data_bytes_available": machine["bytes"], "data_files": len(machine["files"]), "plan": plan,
                  "optimiser_reach": optimiser_reach(plan["training"]["lr"], plan["training"]["steps"])}
        if time_steps and not machine["device_here"]:
            raise PlanError("resources.device", plan["resources"]["device"], "a device this machine has, to time "
                            "steps on it (--time-steps); without --time-steps the dry run checks the plan here")
        if time_steps:
            from .torch.experiment import estimate_time, load_data, setup_threads

            setup_threads(plan["resources"]["threads"])
            result["time_estimate"] = estimate_time(plan, runs, load_data(plan["data"], machine["files"]),
                                                    steps=int(time_steps), log=log)
        return result
    out = Path(out_dir) if out_dir is not None else Path(f"study-{plan['plan'].get('name', 'plan')}")
    if "\x00" in str(out):
        raise PlanError("out", str(out).replace("\x00", "\\x00"), "a folder path without NUL characters")
    from ._output import check_folder

    check_folder(out, force=True, name="out")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlanError("out", str(out), f"a folder that can be created ({exc.strerror or exc})") from None
    if out.is_symlink() or not out.is_dir():
        raise PlanError("out", str(out), "a folder (not a link to one)")
    for sub in ("checkpoints", "partial"):
        if (out / sub).is_symlink() or ((out / sub).exists() and not (out / sub).is_dir()):
            raise PlanError("out", str(out), f"a folder whose {sub}/ is a folder (not a link or a file)")
    from .torch.training import distributed_context

    rank, world = distributed_context()
    spread = bool(spread) and world > 1
    with folder_lock(out, "out", lock_name=f".otprior-study.rank{rank}.lock"):
        return _run_locked(plan, digest, runs, mem, machine, out, resume, max_runs, time_budget_s, figures, spread,
                           rank, world, log)


def _expected_cost(run):
    """Order of work for spreading: OT attention costs several times a softmax step and grows
    faster with the length (one fixed point per prefix), so OT runs first, then longer lengths."""
    cfg = run.get("config", {})
    return (cfg.get("scheme") == "causal-ot", run.get("train_length", 0))


def _claims_folder(out, digest, rank):
    """The folder of run claims of this launch, emptied by rank 0 before any process claims
    (claims of an earlier, stopped launch are void: its finished runs are in the results)."""
    import shutil

    import torch.distributed as dist

    claims = out / "partial" / digest[:16] / "claims"
    if rank == 0:
        for p in (out / "partial", out / "partial" / digest[:16], claims):
            if p.is_symlink() or (p.exists() and not p.is_dir()):
                raise PlanError("out", str(out), f"a folder whose {p.relative_to(out)} is a folder (not a link or a file)")
        shutil.rmtree(claims, ignore_errors=True)
        claims.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    return claims


def _claim(claims, run_id) -> bool:
    """Take ``run_id`` for this process: ``True`` if no other process of the launch has it.
    Creating the claim file with ``O_EXCL`` is atomic, so each run is taken exactly once and
    a process that finishes early takes the next run instead of waiting (dynamic spreading)."""
    name = safe_name(run_id.replace("/", "-"), "run id", error=PlanError)
    try:
        fd = os.open(claims / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def _run_locked(plan, digest, runs, mem, machine, out, resume, max_runs, time_budget_s, figures, spread, rank, world, log):
    records = _read_results(out, digest, log)
    if records and not resume:
        raise PlanError("out", str(out), "an empty folder (or resume=True)")
    if rank == 0:
        write_json_atomic(out / "plan.json", {"plan_sha256": digest, "plan": plan}, "out", indent=1)
    done = {r["id"] for r in records}
    from .torch.experiment import execute_run, load_data, measure_cost, ngram_record, run_provenance, setup_threads

    threads = setup_threads(plan["resources"]["threads"])
    results_path = out / (f"results.rank{rank}.jsonl" if spread and rank else _RESULTS)
    mine = _read_one(results_path, digest, out)  # this process's file, rewritten whole after every run
    writer = spread or rank == 0
    data = load_data(plan["data"], machine["files"])
    prov = run_provenance(plan, threads, data, world)
    log(f"plan {digest[:12]}: {len(runs)} runs, {len(done)} done; {threads} threads, {world} process(es)"
        f"{', runs spread over the processes' if spread else ''}; data {prov['data_sha256'][:12]} ({prov['data_bytes']} bytes)")
    start = time.perf_counter()
    budget = time_budget_s if time_budget_s is not None else plan["resources"].get("time_budget_s")
    deadline = None if budget is None else start + float(budget)
    n = str(max(plan["evaluation"]["lengths"]))
    ran, stopped = 0, False
    phases = [[r for r in runs if r["kind"] == "train"], [r for r in runs if r["kind"] != "train"]]
    claims = _claims_folder(out, digest, rank) if spread else None
    if spread:  # the longest runs first (OT, then longer training lengths): the processes finish together
        phases[0] = sorted(phases[0], key=_expected_cost, reverse=True)
    for phase, todo in enumerate(phases):
        if phase == 1 and spread:
            import torch.distributed as dist

            dist.barrier()
            records = _read_results(out, digest)
            done = {r["id"] for r in records}
        for run in todo:
            if run["id"] in done or stopped:
                continue
            if max_runs is not None and ran >= max_runs:
                stopped = True
                break
            if deadline is not None and time.perf_counter() > deadline:
                log(f"time budget {budget} s reached; {len(runs) - len(done)} runs left (rerun the same command to resume)")
                stopped = True
                break
            if spread and not _claim(claims, run["id"]):
                continue  # another process took it
            if run["kind"] == "train":
                record = execute_run(run, plan, data, checkpoint_dir=out / "checkpoints", state_dir=out / "partial" / digest[:16],
                                     data_parallel=not spread, deadline=deadline)
                if record is None:  # stopped at a state save by the time budget: resumes mid-run
                    log(f"time budget {budget} s reached inside {run['id']}; its state is saved (rerun to resume)")
                    stopped = True
                    break
            elif run["kind"] == "ngram":
                record = ngram_record(run, plan, data)
            else:
                have = {r["id"]: r for r in records}
                if run["treatment"] not in have or run["control"] not in have:
                    continue  # its training runs are not done yet
                if "failed" in have[run["treatment"]] or "failed" in have[run["control"]]:
                    record = {"id": run["id"], "kind": "cost", "arm": "cost", "seed": run["seed"],
                              "train_length": run["train_length"], "failed": "a training run it compares failed"}
                else:
                    record = measure_cost(run, plan, data, have[run["treatment"]], have[run["control"]],
                                          checkpoint_dir=out / "checkpoints")
            record["plan_sha256"] = digest
            record["provenance"] = prov
            ran += 1
            done.add(run["id"])
            records.append(record)
            mine.append(record)
            if writer:
                _write_results(results_path, mine)
            if spread:  # count the other processes' finished runs too
                done |= {r["id"] for r in _read_results(out, digest)}
            if "failed" in record:
                log(f"[{len(done)}/{len(runs)}] {run['id']}: FAILED ({record['failed']})")
            elif run["kind"] == "train":
                log(f"[{len(done)}/{len(runs)}] {run['id']}: {record['seconds_per_step'] * 1e3:.1f} ms/step, "
                    f"loss at {n} {np.mean(record['loss'][n]):.4f}")
            else:
                log(f"[{len(done)}/{len(runs)}] {run['id']} done")
    if spread:
        import torch.distributed as dist

        dist.barrier()
        records = _read_results(out, digest)
        done = {r["id"] for r in records}
    finished = all(r["id"] in done for r in runs)
    decisions = decide(plan, records, runs)
    paths = []
    if rank == 0:
        baselines = [r for r in records if r.get("kind") == "ngram"]
        p = prov
        shown = (f"code {p['commit'][:12]}{' (with local changes)' if p.get('dirty') else ''}, Python {p['python']}, "
                 f"torch {p['torch']}, numpy {p['numpy']}, {p['threads']} threads x {p['processes']} process(es), "
                 f"data SHA-256 {p['data_sha256'][:16]}")
        write_json_atomic(out / "hypotheses.json", {"plan_sha256": digest, "finished": finished, "runs": len(records),
                                                    "provenance": prov, "decisions": decisions}, "out", indent=1)
        write_text_atomic(out / "hypotheses.md", _table(plan, decisions, digest, records, finished, shown, baselines), "out")
        if finished:  # how each outcome would change under the other reasonable choices
            write_text_atomic(out / "sensitivity.md", sensitivity_report(plan, digest, records), "out")
        if figures:
            paths = [str(p) for p in _figures(plan, [r for r in records if r.get("kind", "train") == "train"
                                                     and "failed" not in r], decisions, out)]
    return {"plan_sha256": digest, "runs": len(runs), "done": len(done), "finished": finished, "decisions": decisions,
            "paths": [str(out / "hypotheses.md")] + paths}
