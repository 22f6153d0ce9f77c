"""The paper's sizes on a GPU: run a preregistered plan (``plans/gpu-25m.toml`` or ``plans/gpu-100m.toml``) in pieces.

Each call trains until ``--budget`` seconds have passed (no new run starts after that, and a
run in progress stops at its next training-state save), writing every finished run to
``OUT/results.jsonl`` with the plan's hash; the next call with the same ``--out`` resumes
where this one stopped, mid-run included. The same as
``otprior study PLAN --out OUT --budget SECONDS``. The decisions table and figures
are rewritten at the end of every call.

Run (GPU): ``PYTHONPATH=. python bench/gpu_25m.py --plan plans/gpu-25m.toml --out $OUT --budget 420``.
``--tiny`` runs the same arms and hypotheses with a shrunken model, lengths and step count on
the CPU (a smoke test of the plan's structure; results go to ``--out`` and mean nothing).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from otprior.study import load_plan, run_study


def tiny_version(plan: dict) -> dict:
    """The plan with every size shrunk for a CPU smoke run (arms and hypotheses unchanged)."""
    plan = json.loads(json.dumps(plan))
    plan["plan"]["name"] = plan["plan"].get("name", "plan") + "-tiny"
    plan["resources"].update(device="cpu", memory_gb=4, threads="auto")
    plan["data"] = {"max_bytes": 300_000}
    plan["model"] = {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}
    plan["training"].update(steps=2, batch_size=2, train_lengths=[8, 12, 16], trace_every=1, bf16=False)
    plan["evaluation"].update(lengths=[32], sequences=2, batch_size=2)
    plan["statistics"]["resamples"] = 100
    plan["training"]["checkpoint_every_s"] = 1
    near = {h["arm"]: h["near"] for h in plan["hypotheses"] if h["kind"] == "boundary"}
    for arm in plan["arms"]:
        arm["seeds"] = arm["seeds"][: 4 if arm["scheme"] == "log-distance" else 2]
        if "margin" in arm:
            arm["margin"]["window"] = 4
        if arm["name"] in near:  # two steps reach no threshold: start just above it
            arm["init_above_floor"] = near[arm["name"]] - arm["alpha_margin"] + 1e-4
    for h in plan["hypotheses"]:
        if "eval_length" in h:
            h["eval_length"] = 32
        if h["kind"] == "prediction":
            h.update(fit_seeds=[0, 1], test_seeds=[2, 3])
    return plan


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", default=str(Path(__file__).resolve().parents[1] / "plans" / "gpu-25m.toml"))
    ap.add_argument("--out", default="gpu_results")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds after which no new run starts")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    plan = a.plan
    if a.tiny:
        plan = tiny_version(load_plan(a.plan)[0])
    result = run_study(plan, a.out, time_budget_s=a.budget)
    for d in result["decisions"]:
        iv = "" if d["interval"] is None else f" [{d['interval'][0]:+.4g}, {d['interval'][1]:+.4g}]"
        print(f"{d['id']}: {d['outcome']}{iv} {d['detail']}")
    print(f"{result['done']} of {result['runs']} runs done; plan {result['plan_sha256'][:12]}")


if __name__ == "__main__":
    main()
