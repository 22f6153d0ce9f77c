"""Preregistered studies: a plan file states the hypotheses and their decision rules before any run.

A plan (TOML or JSON, read as data) names the arms (a positional scheme with its options
and seeds), three training lengths, the evaluation lengths, the model size, the resources,
and for every hypothesis the statistic and the decision rule. :func:`run_study` validates
the whole plan before any training (a bad plan is refused with one line naming the field),
records the plan's SHA-256 with every result, writes the results after every run, resumes
where a previous call stopped, and at the end decides every hypothesis (supported / not
supported / not run, with its interval) and draws the figures.

Hypothesis kinds and their decision rules
-----------------------------------------
``loss_difference`` (rule ``interval_below_zero``)
    Paired difference ``treatment - control`` of the per-sequence loss beyond the training
    length at the longest evaluation length, averaged over the (training length, seed)
    pairs both arms ran; every run is evaluated on the same windows, so the percentile
    bootstrap resamples evaluation sequences (batches of one sequence) with the pairing
    kept. Supported when the interval lies below zero.
``loss_and_cost`` (rule ``interval_below_zero_and_cost_ratio``, ``max_cost_ratio``)
    As above, and the training time per step of the treatment is at most
    ``max_cost_ratio`` times the control's.
``every_pair`` (rule ``every_pair_interval_below_zero``)
    The paired interval of every (training length, seed) pair lies below zero.
``intervention`` (rules ``all_in_predicted_direction``; ``sign_test`` with ``alpha``)
    On every checkpoint of the arm, only the bias beyond the training length changes
    (:func:`otprior.torch.intervene`); a row is in the predicted direction when its
    bootstrap interval over evaluation sequences excludes zero on the predicted side.
    ``all_in_predicted_direction``: every row is; ``sign_test``: the one-sided binomial
    probability of at least that many under a fair coin is below ``alpha``. The interval
    reported is the bootstrap over checkpoints of the mean signed effect (positive: in the
    predicted direction).
``boundary`` (rule ``fraction_at_least``, ``fraction``; ``near``)
    Per checkpoint, the fraction of heads with trained exponent ``alpha - 1 <= near``;
    supported when the bootstrap interval over checkpoints lies at or above ``fraction``.
``margin`` (rule ``growth_within_tol``)
    The arm trains with exponents ``alpha >= 1 + margin_for(W, (L, n_max), tol)``; per
    checkpoint the largest measured growth of attention mass beyond ``W`` (last query)
    from the training length to the longest evaluation length; supported when the
    bootstrap interval over checkpoints lies at or below ``tol``.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

import numpy as np

from ._validation import DomainError
from .encodings import REFERENCE_MODEL_SCHEMES

__all__ = ["load_plan", "validate_plan", "plan_hash", "expand_runs", "run_study", "decide", "estimate_memory",
           "SCHEMES", "HYPOTHESIS_KINDS"]

SCHEMES = REFERENCE_MODEL_SCHEMES
HYPOTHESIS_KINDS = {
    "loss_difference": ("interval_below_zero",),
    "loss_and_cost": ("interval_below_zero_and_cost_ratio",),
    "every_pair": ("every_pair_interval_below_zero",),
    "intervention": ("all_in_predicted_direction", "sign_test"),
    "boundary": ("fraction_at_least",),
    "margin": ("growth_within_tol",),
}
_TABLES = {"plan", "resources", "data", "model", "training", "evaluation", "statistics", "arms", "hypotheses"}
_ARM_KEYS = {"name", "scheme", "seeds", "ot_rho", "ot_tol", "alpha_margin", "margin", "rope_base"}
_MODEL_KEYS = {"d_model", "n_layers", "n_heads", "d_ff"}
_TABLE_KEYS = {
    "plan": {"name", "description"},
    "resources": {"device", "memory_gb", "threads", "time_budget_s"},
    "data": {"max_bytes", "paths"},
    "training": {"steps", "batch_size", "lr", "train_lengths", "trace_every", "bf16"},
    "evaluation": {"lengths", "sequences", "batch_size", "seed"},
    "statistics": {"level", "resamples"},
}
_RESULTS = "results.jsonl"
_MAX_PLAN_BYTES = 1 << 20


class PlanError(DomainError):
    """A plan field outside its valid domain (refused before any training)."""


def _need(table, key, where):
    if key not in table:
        raise PlanError(f"{where}.{key}", None, "a required field")
    return table[key]


def load_plan(path) -> tuple[dict, str]:
    """Read a plan file (``.toml`` or ``.json``) as data; returns ``(plan, sha256 of its bytes)``."""
    path = Path(path)
    if path.is_dir():
        candidates = [p for p in (path / "plan.toml", path / "plan.json") if p.exists()]
        if not candidates:
            raise PlanError("plan", str(path), "a .toml or .json file, or a folder holding plan.toml")
        path = candidates[0]
    if not path.exists():
        for suffix in (".toml", ".json"):
            if path.with_suffix(suffix).exists():
                path = path.with_suffix(suffix)
                break
        else:
            raise PlanError("plan", str(path), "an existing .toml or .json file")
    raw = path.read_bytes()
    if len(raw) > _MAX_PLAN_BYTES:
        raise PlanError("plan", f"{len(raw)} bytes", f"a file of at most {_MAX_PLAN_BYTES} bytes")
    try:
        if path.suffix == ".json":
            plan = json.loads(raw.decode("utf-8"))
        else:
            import tomllib

            plan = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PlanError("plan", str(path), f"valid TOML or JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(plan, dict):
        raise PlanError("plan", type(plan).__name__, "a table of tables")
    return plan, hashlib.sha256(raw).hexdigest()


def plan_hash(plan: dict) -> str:
    """SHA-256 of the plan's canonical JSON (for plans given as dicts)."""
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


def _posint(value, field):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(field, value, "a positive integer")
    return value


def _posnum(value, field):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)):
        raise PlanError(field, value, "a finite positive number")
    return float(value)


def _int_list(value, field):
    if not isinstance(value, list) or not value:
        raise PlanError(field, value, "a non-empty list of positive integers")
    return [_posint(v, f"{field}[{i}]") for i, v in enumerate(value)]


def estimate_memory(plan: dict) -> dict:
    """Rough peak bytes of training and of evaluation for the largest run of the plan.

    Parameters and AdamW state (16 bytes per parameter), activations of the blocks
    (about ``12 d + 3 d_ff`` floats per token and layer, kept for the backward pass), the
    attention maps (three ``T x T`` per head and layer; for ``causal-ot`` the kernel,
    duals and output plus the block working arrays), the logits; evaluation keeps one
    layer's maps at a time and no gradients.
    """
    m, tr, ev = plan["model"], plan["training"], plan["evaluation"]
    d, layers, heads, ff = m["d_model"], m["n_layers"], m["n_heads"], m["d_ff"]
    params = 2 * 256 * d + layers * (4 * d * d + 4 * d + 2 * d * ff + ff + 5 * d)
    has_ot = any(a["scheme"] == "causal-ot" for a in plan["arms"])
    T = max(tr["train_lengths"])
    B = tr["batch_size"]
    maps = 3 + (4 if has_ot else 0)
    train = 16 * params + 4 * B * T * layers * (12 * d + 3 * ff) + 4 * maps * B * heads * T * T * layers + 12 * B * T * 256
    n = max(ev["lengths"])
    Be = ev["batch_size"]
    evaluation = 4 * params + 4 * Be * n * (4 * d + ff) + 4 * (3 + (4 if has_ot else 0)) * Be * heads * n * n + 8 * Be * n * 256
    return {"parameters": params, "train_bytes": int(train), "eval_bytes": int(evaluation)}


def validate_plan(plan: dict) -> dict:
    """Check a plan completely; return it with defaults filled. Raises :class:`PlanError` naming the field."""
    if not isinstance(plan, dict):
        raise PlanError("plan", type(plan).__name__, "a table of tables")
    for key in plan:
        if key not in _TABLES:
            raise PlanError(key, plan[key] if not isinstance(plan[key], (dict, list)) else "...", f"one of the tables {sorted(_TABLES)}")
    plan = json.loads(json.dumps(plan))  # a private copy of plain data
    for table, keys in _TABLE_KEYS.items():
        value = plan.get(table, {})
        if not isinstance(value, dict):
            raise PlanError(table, "...", "a table")
        for key in value:
            if key not in keys:
                raise PlanError(f"{table}.{key}", value[key], f"one of {sorted(keys)}")
    meta = plan.setdefault("plan", {})
    if not isinstance(meta.get("name", ""), str):
        raise PlanError("plan.name", meta.get("name"), "a string")
    res = plan.setdefault("resources", {})
    if res.get("device", "cpu") not in ("cpu", "cuda"):
        raise PlanError("resources.device", res.get("device"), "'cpu' or 'cuda'")
    res.setdefault("device", "cpu")
    _posnum(_need(res, "memory_gb", "resources"), "resources.memory_gb")
    threads = res.setdefault("threads", "auto")
    if threads != "auto":
        _posint(threads, "resources.threads")
    if "time_budget_s" in res:
        _posnum(res["time_budget_s"], "resources.time_budget_s")
    data = plan.setdefault("data", {})
    _posint(data.setdefault("max_bytes", 2_000_000), "data.max_bytes")
    if "paths" in data and (not isinstance(data["paths"], list) or not all(isinstance(p, str) for p in data["paths"])):
        raise PlanError("data.paths", data["paths"], "a list of file paths")
    model = _need(plan, "model", "plan")
    for key in model:
        if key not in _MODEL_KEYS:
            raise PlanError(f"model.{key}", model[key], f"one of {sorted(_MODEL_KEYS)}")
    for key in _MODEL_KEYS:
        _posint(_need(model, key, "model"), f"model.{key}")
    if model["d_model"] % model["n_heads"] or (model["d_model"] // model["n_heads"]) % 2:
        raise PlanError("model.d_model", model["d_model"], f"a multiple of 2 * n_heads = {2 * model['n_heads']}")
    tr = _need(plan, "training", "plan")
    for key in ("steps", "batch_size"):
        _posint(_need(tr, key, "training"), f"training.{key}")
    _posnum(_need(tr, "lr", "training"), "training.lr")
    Ls = _int_list(_need(tr, "train_lengths", "training"), "training.train_lengths")
    _posint(tr.setdefault("trace_every", 10), "training.trace_every")
    if not isinstance(tr.setdefault("bf16", False), bool):
        raise PlanError("training.bf16", tr["bf16"], "true or false")
    ev = _need(plan, "evaluation", "plan")
    ns = _int_list(_need(ev, "lengths", "evaluation"), "evaluation.lengths")
    for i, n in enumerate(ns):
        if n <= max(Ls):
            raise PlanError(f"evaluation.lengths[{i}]", n, f"a length above every training length (largest {max(Ls)})")
    _posint(_need(ev, "sequences", "evaluation"), "evaluation.sequences")
    if ev["sequences"] < 2:
        raise PlanError("evaluation.sequences", ev["sequences"], "at least 2 (the bootstrap's units)")
    _posint(ev.setdefault("batch_size", 8), "evaluation.batch_size")
    _posint(ev.setdefault("seed", 1234), "evaluation.seed")
    st = plan.setdefault("statistics", {})
    level = st.setdefault("level", 0.95)
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.5 <= level < 1:
        raise PlanError("statistics.level", level, "a number in [0.5, 1)")
    _posint(st.setdefault("resamples", 2000), "statistics.resamples")
    arms = _need(plan, "arms", "plan")
    if not isinstance(arms, list) or not arms:
        raise PlanError("arms", arms, "a non-empty list of arms")
    names = set()
    for i, arm in enumerate(arms):
        where = f"arms[{i}]"
        if not isinstance(arm, dict):
            raise PlanError(where, arm, "a table")
        for key in arm:
            if key not in _ARM_KEYS:
                raise PlanError(f"{where}.{key}", arm[key], f"one of {sorted(_ARM_KEYS)}")
        name = _need(arm, "name", where)
        if not isinstance(name, str) or not name or "/" in name or name in names:
            raise PlanError(f"{where}.name", name, "a unique non-empty name without '/'")
        names.add(name)
        scheme = _need(arm, "scheme", where)
        if scheme not in SCHEMES:
            raise PlanError(f"{where}.scheme", scheme, f"one of {', '.join(SCHEMES)}")
        seeds = _need(arm, "seeds", where)
        if not isinstance(seeds, list) or not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
            raise PlanError(f"{where}.seeds", seeds, "a non-empty list of non-negative integers")
        if len(set(seeds)) != len(seeds):
            raise PlanError(f"{where}.seeds", seeds, "distinct seeds")
        if "ot_rho" in arm and (scheme != "causal-ot" or not (isinstance(arm["ot_rho"], (int, float)) and 0 <= arm["ot_rho"] < 1)):
            raise PlanError(f"{where}.ot_rho", arm["ot_rho"], "a number in [0, 1) on a causal-ot arm")
        if "ot_tol" in arm:
            _posnum(arm["ot_tol"], f"{where}.ot_tol")
        if "alpha_margin" in arm and "margin" in arm:
            raise PlanError(f"{where}.margin", arm["margin"], "absent when alpha_margin is given")
        if "alpha_margin" in arm:
            if scheme != "log-distance":
                raise PlanError(f"{where}.alpha_margin", arm["alpha_margin"], "only on a log-distance arm")
            _posnum(arm["alpha_margin"], f"{where}.alpha_margin")
        if "margin" in arm:
            spec = arm["margin"]
            if scheme != "log-distance" or not isinstance(spec, dict) or set(spec) != {"window", "tol"}:
                raise PlanError(f"{where}.margin", spec, "{window, tol} on a log-distance arm")
            W = _posint(spec["window"], f"{where}.margin.window")
            if W >= min(Ls):
                raise PlanError(f"{where}.margin.window", W, f"below every training length (smallest {min(Ls)})")
            tol = _posnum(spec["tol"], f"{where}.margin.tol")
            if tol >= 1:
                raise PlanError(f"{where}.margin.tol", tol, "a number in (0, 1)")
    arm_by = {a["name"]: a for a in arms}
    hyps = _need(plan, "hypotheses", "plan")
    if not isinstance(hyps, list) or not hyps:
        raise PlanError("hypotheses", hyps, "a non-empty list of hypotheses")
    ids = set()
    for i, h in enumerate(hyps):
        where = f"hypotheses[{i}]"
        if not isinstance(h, dict):
            raise PlanError(where, h, "a table")
        hid = _need(h, "id", where)
        if not isinstance(hid, str) or not hid or hid in ids:
            raise PlanError(f"{where}.id", hid, "a unique non-empty string")
        ids.add(hid)
        for key in ("claim", "statistic"):
            if not isinstance(_need(h, key, where), str) or not h[key].strip():
                raise PlanError(f"{where}.{key}", h[key], "a non-empty statement")
        kind = _need(h, "kind", where)
        if kind not in HYPOTHESIS_KINDS:
            raise PlanError(f"{where}.kind", kind, f"one of {', '.join(HYPOTHESIS_KINDS)}")
        decision = h.get("decision")
        if not isinstance(decision, dict) or "rule" not in decision:
            raise PlanError(f"{where}.decision", decision, "a table with a decision rule ('rule = ...')")
        if decision["rule"] not in HYPOTHESIS_KINDS[kind]:
            raise PlanError(f"{where}.decision.rule", decision["rule"], f"one of {', '.join(HYPOTHESIS_KINDS[kind])} for kind {kind}")
        roles = ("treatment", "control") if kind in ("loss_difference", "loss_and_cost", "every_pair") else ("arm",)
        for role in roles:
            name = _need(h, role, where)
            if name not in arm_by:
                raise PlanError(f"{where}.{role}", name, f"one of the arms {sorted(arm_by)}")
        if kind in ("intervention", "boundary", "margin") and arm_by[h["arm"]]["scheme"] != "log-distance":
            raise PlanError(f"{where}.arm", h["arm"], "a log-distance arm")
        if kind == "loss_and_cost":
            _posnum(_need(decision, "max_cost_ratio", f"{where}.decision"), f"{where}.decision.max_cost_ratio")
        if kind == "intervention":
            shifts = _need(h, "shifts", where)
            if not isinstance(shifts, list) or not shifts or not all(isinstance(s, (int, float)) and not isinstance(s, bool) and s != 0 for s in shifts):
                raise PlanError(f"{where}.shifts", shifts, "a non-empty list of non-zero exponent shifts")
            n = h.setdefault("eval_length", max(ns))
            if n not in ns:
                raise PlanError(f"{where}.eval_length", n, f"one of the evaluation lengths {ns}")
            if decision["rule"] == "sign_test":
                a = _posnum(_need(decision, "alpha", f"{where}.decision"), f"{where}.decision.alpha")
                if a >= 1:
                    raise PlanError(f"{where}.decision.alpha", a, "a number in (0, 1)")
        if kind == "boundary":
            _posnum(_need(h, "near", where), f"{where}.near")
            f = _posnum(_need(decision, "fraction", f"{where}.decision"), f"{where}.decision.fraction")
            if f > 1:
                raise PlanError(f"{where}.decision.fraction", f, "a number in (0, 1]")
        if kind == "margin":
            if "margin" not in arm_by[h["arm"]]:
                raise PlanError(f"{where}.arm", h["arm"], "an arm trained with margin = {window, tol}")
            if "control" in h and h["control"] not in arm_by:
                raise PlanError(f"{where}.control", h["control"], f"one of the arms {sorted(arm_by)}")
    mem = estimate_memory(plan)
    need = max(mem["train_bytes"], mem["eval_bytes"])
    if need > res["memory_gb"] * 2**30:
        raise PlanError("model", f"{mem['parameters']} parameters", f"a model whose largest run fits resources.memory_gb = "
                        f"{res['memory_gb']} (estimated {need / 2**30:.1f} GB)")
    return plan


def _margin_value(arm, L, n_max):
    from .margin import margin_for

    spec = arm["margin"]
    return float(margin_for(int(spec["window"]), (int(L), int(n_max)), float(spec["tol"])).margin)


def expand_runs(plan: dict) -> list:
    """The runs of a validated plan, seeds outermost (a partial study covers every hypothesis)."""
    tr, ev, model = plan["training"], plan["evaluation"], plan["model"]
    n_max = max(ev["lengths"])
    measure_by = {a["name"]: {} for a in plan["arms"]}
    for h in plan["hypotheses"]:
        if h["kind"] == "intervention":
            spec = measure_by[h["arm"]].setdefault("intervention", {"shifts": [], "eval_length": h["eval_length"]})
            spec["shifts"] = sorted(set(spec["shifts"]) | {float(s) for s in h["shifts"]})
        if h["kind"] in ("boundary", "intervention"):
            measure_by[h["arm"]]["trace_alpha"] = True
        if h["kind"] == "margin":
            arm = next(a for a in plan["arms"] if a["name"] == h["arm"])
            for name in (h["arm"], h.get("control")):
                if name is not None:
                    measure_by[name]["distant_mass"] = {"window": arm["margin"]["window"]}
                    if next(a for a in plan["arms"] if a["name"] == name)["scheme"] == "log-distance":
                        measure_by[name]["trace_alpha"] = True
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
                runs.append({"id": f"{arm['name']}/L{L}/seed{seed}", "arm": arm["name"], "seed": seed, "train_length": L,
                             "config": cfg, "measure": measure_by[arm["name"]]})
    return runs


# ---------------------------------------------------------------- statistics and decisions


def _bootstrap(values, level, resamples, seed=0):
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    a = (1 - level) / 2
    return float(x.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def _by_arm(records):
    out = {}
    for r in records:
        out.setdefault(r["arm"], {})[(r["train_length"], r["seed"])] = r
    return out


def _paired(h, arms, n, level, resamples):
    t, c = arms.get(h["treatment"], {}), arms.get(h["control"], {})
    keys = sorted(set(t) & set(c))
    diffs = [np.asarray(t[k]["loss"][str(n)]) - np.asarray(c[k]["loss"][str(n)]) for k in keys]
    return keys, diffs


def _binom_tail(k, n):
    # P(X >= k) for X ~ Binomial(n, 1/2)
    return float(sum(math.comb(n, j) for j in range(k, n + 1)) / 2**n)


def decide(plan: dict, records: list) -> list:
    """Decide every hypothesis of a validated plan from the run records.

    Returns one dict per hypothesis: ``id``, ``claim``, ``outcome`` (``"supported"``, ``"not
    supported"`` or ``"not run"``), ``estimate``, ``interval``, ``units`` (what was
    resampled and how many) and ``detail``.
    """
    st = plan["statistics"]
    level, resamples = float(st["level"]), int(st["resamples"])
    n_max = max(plan["evaluation"]["lengths"])
    # the order in which a single process runs them (seeds outermost), whatever order they were read in
    records = sorted(records, key=lambda r: (r["seed"], r["train_length"]))
    arms = _by_arm(records)
    out = []
    for h in plan["hypotheses"]:
        row = {"id": h["id"], "claim": h["claim"], "kind": h["kind"], "rule": h["decision"]["rule"], "outcome": "not run",
               "estimate": None, "interval": None, "units": None, "detail": ""}
        kind = h["kind"]
        if kind in ("loss_difference", "loss_and_cost", "every_pair"):
            keys, diffs = _paired(h, arms, n_max, level, resamples)
            if keys:
                pooled = np.mean(diffs, axis=0)
                est, lo, hi = _bootstrap(pooled, level, resamples)
                row.update(estimate=est, interval=[lo, hi], units=f"{pooled.size} evaluation sequences x {len(keys)} paired runs")
                ok = hi < 0
                if kind == "loss_and_cost":
                    cost_t = np.mean([arms[h["treatment"]][k]["seconds_per_step"] for k in keys])
                    cost_c = np.mean([arms[h["control"]][k]["seconds_per_step"] for k in keys])
                    ratio = float(cost_t / cost_c)
                    row["cost_ratio"] = ratio
                    ok = ok and ratio <= float(h["decision"]["max_cost_ratio"])
                    row["detail"] = f"training time per step {ratio:.3g}x the control's (rule: at most {h['decision']['max_cost_ratio']})"
                if kind == "every_pair":
                    pairs = []
                    for k, d in zip(keys, diffs, strict=True):
                        e, a, b = _bootstrap(d, level, resamples)
                        pairs.append({"train_length": k[0], "seed": k[1], "estimate": e, "interval": [a, b]})
                    below = sum(p["interval"][1] < 0 for p in pairs)
                    lengths = sorted({k[0] for k in keys})
                    row["pairs"] = pairs
                    row["detail"] = f"{below} of {len(pairs)} (training length, seed) pairs with interval below zero; lengths {lengths}"
                    ok = below == len(pairs)
                row["outcome"] = "supported" if ok else "not supported"
        elif kind == "intervention":
            recs = [r for r in arms.get(h["arm"], {}).values() if "intervention" in r]
            rows = [x for r in recs for x in r["intervention"] if x["shift"] in [float(s) for s in h["shifts"]]]
            if recs:
                agree = sum(x["agree"] for x in rows)
                against = sum(x["verdict"] == "against the prediction" for x in rows)
                signed = [np.mean([x["loss_change"] * x["predicted_loss_direction"] for x in r["intervention"]]) for r in recs]
                if len(signed) >= 2:
                    est, lo, hi = _bootstrap(signed, level, resamples)
                    row.update(estimate=est, interval=[lo, hi])
                row["units"] = f"{len(recs)} checkpoints x {len(h['shifts'])} shifts"
                p = _binom_tail(agree, len(rows))
                row["sign_test_p"] = p
                row["detail"] = ("estimate: mean loss change times the predicted sign (positive: in the predicted direction); "
                                 f"{agree} of {len(rows)} changes in the predicted direction (interval excludes zero), "
                                 f"{against} against, {len(rows) - agree - against} inconclusive; sign test p = {p:.3g}")
                if h["decision"]["rule"] == "all_in_predicted_direction":
                    ok = agree == len(rows)
                else:
                    ok = p < float(h["decision"]["alpha"])
                row["outcome"] = "supported" if ok else "not supported"
        elif kind == "boundary":
            recs = list(arms.get(h["arm"], {}).values())
            if len(recs) >= 2:
                near = float(h["near"])
                fr = [np.mean(np.asarray(r["alpha"]) - 1 <= near) for r in recs]
                est, lo, hi = _bootstrap(fr, level, resamples)
                allv = np.concatenate([np.ravel(r["alpha"]) for r in recs])
                row.update(estimate=est, interval=[lo, hi], units=f"{len(recs)} checkpoints")
                row["detail"] = (f"fraction of heads with alpha - 1 <= {near}; trained exponents from {allv.min():.3f} "
                                 f"to {allv.max():.3f} (median {np.median(allv):.3f})")
                row["outcome"] = "supported" if lo >= float(h["decision"]["fraction"]) else "not supported"
        elif kind == "margin":
            recs = [r for r in arms.get(h["arm"], {}).values() if "distant_mass" in r]
            arm = next(a for a in plan["arms"] if a["name"] == h["arm"])
            tol = float(arm["margin"]["tol"])
            if len(recs) >= 2:
                worst = [float(np.max(r["distant_mass"]["growth"])) for r in recs]
                est, lo, hi = _bootstrap(worst, level, resamples)
                row.update(estimate=est, interval=[lo, hi], units=f"{len(recs)} checkpoints")
                detail = f"largest head growth of mass beyond W = {arm['margin']['window']} (rule: at most tol = {tol})"
                ctrl = [r for r in arms.get(h.get("control"), {}).values() if "distant_mass" in r]
                if len(ctrl) >= 2:
                    e2, l2, h2 = _bootstrap([float(np.max(r["distant_mass"]["growth"])) for r in ctrl], level, resamples)
                    row["control"] = {"estimate": e2, "interval": [l2, h2]}
                    detail += f"; control arm {h['control']}: {e2:.4f} [{l2:.4f}, {h2:.4f}]"
                row["detail"] = detail
                row["outcome"] = "supported" if hi <= tol else "not supported"
        out.append(row)
    return out


def _table(plan, decisions, digest, records, finished):
    level = plan["statistics"]["level"]
    lines = [f"# Study {plan['plan'].get('name', '')}", "", f"Plan SHA-256: `{digest}`", "",
             f"Runs finished: {len(records)}{'' if finished else ' (study incomplete)'}; intervals are "
             f"{int(round(100 * level))}% percentile bootstrap intervals.", "",
             "| hypothesis | claim | outcome | estimate | interval | units | detail |", "|---|---|---|---|---|---|---|"]
    for d in decisions:
        est = "" if d["estimate"] is None else f"{d['estimate']:+.4g}"
        iv = "" if d["interval"] is None else f"[{d['interval'][0]:+.4g}, {d['interval'][1]:+.4g}]"
        lines.append(f"| {d['id']} | {d['claim']} | **{d['outcome']}** | {est} | {iv} | {d['units'] or ''} | {d['detail']} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- figures


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
        fig.savefig(p, dpi=130)
        fig.savefig(p.with_suffix(".pdf"))
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
            fig.savefig(p, dpi=130)
            fig.savefig(p.with_suffix(".pdf"))
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
            fig.savefig(p, dpi=130)
            fig.savefig(p.with_suffix(".pdf"))
            paths.append(p)
    return paths


# ---------------------------------------------------------------- the runner


def _read_results(out, digest):
    records = []
    for path in sorted(out.glob("results*.jsonl")):
        for i, line in enumerate(path.read_text().splitlines()):
            if not line.strip():
                continue
            rec = json.loads(line)
            if rec.get("plan_sha256") != digest:
                raise PlanError("out", str(out), f"a folder without results of another plan ({path.name} line {i + 1} has "
                                f"plan {str(rec.get('plan_sha256'))[:12]}, this plan is {digest[:12]})")
            records.append(rec)
    return records


def run_study(plan_path, out_dir=None, *, resume=True, dry_run=False, max_runs=None, time_budget_s=None, figures=True,
              spread=False, log=print) -> dict:
    """Run a preregistered study plan and decide its hypotheses.

    Parameters
    ----------
    plan_path : path or dict
        A ``.toml``/``.json`` plan file (its bytes are hashed) or a plan as a dict (its
        canonical JSON is hashed).
    out_dir : path, optional
        Results folder (default ``study-<name>``): ``results.jsonl`` (one line per run,
        with the plan hash), ``plan.json``, ``hypotheses.md`` / ``.json`` and the figures.
    resume : bool
        Skip runs already in ``results.jsonl`` (``False``: refuse a non-empty folder).
    dry_run : bool
        Validate and list the runs with the memory estimate; train nothing.
    max_runs : int, optional
        Stop after this many new runs (the study can be finished by a later call).
    time_budget_s : float, optional
        Start no new run after this many seconds (default: the plan's
        ``resources.time_budget_s``); an execution setting, not part of the plan's hash.
    figures : bool
        Draw the figures (PNG and PDF) after the decisions.
    spread : bool
        Under ``torchrun`` with several processes: ``False`` trains every run with
        DistributedDataParallel over all processes; ``True`` deals whole runs out to the
        processes (run ``i`` to process ``i mod world``), each writing its own
        ``results.rank<r>.jsonl``; process 0 decides and draws once all have finished.

    Returns
    -------
    dict
        ``plan_sha256``, ``runs`` (total), ``done``, ``decisions`` and ``paths``.
    """
    if isinstance(plan_path, dict):
        raw, digest = plan_path, plan_hash(plan_path)
    else:
        raw, digest = load_plan(plan_path)
    plan = validate_plan(raw)
    runs = expand_runs(plan)
    mem = estimate_memory(plan)
    if dry_run:
        return {"plan_sha256": digest, "runs": len(runs), "run_ids": [r["id"] for r in runs], "memory": mem}
    out = Path(out_dir or f"study-{plan['plan'].get('name', 'plan')}")
    out.mkdir(parents=True, exist_ok=True)
    records = _read_results(out, digest)
    if records and not resume:
        raise PlanError("out", str(out), "an empty folder (or resume=True)")
    (out / "plan.json").write_text(json.dumps({"plan_sha256": digest, "plan": plan}, indent=1))
    done = {r["id"] for r in records}
    from .torch.experiment import execute_run, load_data, setup_threads
    from .torch.training import distributed_context

    threads = setup_threads(plan["resources"]["threads"])
    rank, world = distributed_context()
    spread = bool(spread) and world > 1
    results_path = out / (f"results.rank{rank}.jsonl" if spread and rank else _RESULTS)
    writer = spread or rank == 0
    log(f"plan {digest[:12]}: {len(runs)} runs, {len(done)} done; {threads} threads, {world} process(es)"
        f"{', runs spread over the processes' if spread else ''}")
    data = load_data(plan["data"])
    start = time.perf_counter()
    budget = time_budget_s if time_budget_s is not None else plan["resources"].get("time_budget_s")
    ran = 0
    for index, run in enumerate(runs):
        if run["id"] in done or (spread and index % world != rank):
            continue
        if max_runs is not None and ran >= max_runs:
            break
        if budget is not None and time.perf_counter() - start > budget:
            log(f"time budget {budget} s reached; {len(runs) - len(done)} runs left (rerun to resume)")
            break
        record = execute_run(run, plan, data, checkpoint_dir=out / "checkpoints", data_parallel=not spread)
        record["plan_sha256"] = digest
        ran += 1
        done.add(run["id"])
        records.append(record)
        if writer:
            with results_path.open("a") as fh:
                fh.write(json.dumps(record) + "\n")
        n = str(max(plan["evaluation"]["lengths"]))
        log(f"[{len(done)}/{len(runs)}] {run['id']}: {record['seconds_per_step'] * 1e3:.1f} ms/step, "
            f"loss at {n} {np.mean(record['loss'][n]):.4f}")
    if spread:
        import torch.distributed as dist

        dist.barrier()
        records = _read_results(out, digest)
        done = {r["id"] for r in records}
    records.sort(key=lambda r: (r["seed"], r["train_length"]))
    decisions = decide(plan, records)
    finished = len(done) == len(runs)
    paths = []
    if rank == 0:
        (out / "hypotheses.json").write_text(json.dumps({"plan_sha256": digest, "finished": finished, "runs": len(records),
                                                         "decisions": decisions}, indent=1))
        (out / "hypotheses.md").write_text(_table(plan, decisions, digest, records, finished))
        if figures:
            paths = [str(p) for p in _figures(plan, records, decisions, out)]
    return {"plan_sha256": digest, "runs": len(runs), "done": len(done), "finished": finished, "decisions": decisions,
            "paths": [str(out / "hypotheses.md")] + paths}
