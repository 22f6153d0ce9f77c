"""Preregistered studies: plan validation, hashing, resuming, decisions, figures."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from otprior.study import PlanError, decide, estimate_memory, expand_runs, load_plan, run_study, validate_plan

ROOT = Path(__file__).resolve().parents[1]


def tiny_plan():
    return {
        "plan": {"name": "tiny"},
        "resources": {"device": "cpu", "memory_gb": 1, "threads": 1},
        "data": {"max_bytes": 200_000},
        "model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "d_ff": 16},
        "training": {"steps": 2, "batch_size": 2, "lr": 3e-3, "train_lengths": [8, 12], "trace_every": 1},
        "evaluation": {"lengths": [20], "sequences": 4, "batch_size": 4},
        "statistics": {"level": 0.9, "resamples": 200},
        "arms": [
            {"name": "softmax", "scheme": "nope", "seeds": [0]},
            {"name": "ot", "scheme": "causal-ot", "ot_rho": 0.5, "seeds": [0]},
            {"name": "ld", "scheme": "log-distance", "alpha_margin": 0.05, "init_above_floor": 0.2005, "seeds": [0, 1]},
            {"name": "margin", "scheme": "log-distance", "margin": {"window": 4, "tol": 0.05, "score_bound": 0.0},
             "init_above_floor": 0.02, "seeds": [0, 1]},
        ],
        "hypotheses": [
            {"id": "H1", "claim": "ot beats softmax", "kind": "loss_difference", "treatment": "ot", "control": "softmax",
             "statistic": "paired loss difference", "decision": {"rule": "interval_below_zero"}},
            {"id": "H4", "claim": "intervention", "kind": "intervention", "arm": "ld", "shifts": [0.5],
             "statistic": "loss change", "decision": {"rule": "all_in_predicted_direction"}},
            {"id": "H5", "claim": "boundary", "kind": "boundary", "arm": "ld", "near": 0.25, "statistic": "fraction",
             "decision": {"rule": "fraction_at_least", "fraction": 0.25}},
            {"id": "H6", "claim": "margin", "kind": "margin", "arm": "margin", "control": "ld", "statistic": "growth",
             "decision": {"rule": "growth_within_tol"}},
        ],
    }


def _broken(edit):
    plan = tiny_plan()
    edit(plan)
    return plan


BAD = [
    (lambda p: p["arms"][1].update(scheme="sparsemax"), "arms[1].scheme"),
    (lambda p: p["hypotheses"][2].pop("decision"), "hypotheses[2].decision"),
    (lambda p: p["hypotheses"][0].update(decision={"threshold": 0}), "hypotheses[0].decision"),
    (lambda p: p["evaluation"].update(lengths=[12]), "evaluation.lengths[0]"),
    (lambda p: p["model"].update(d_model=4096, d_ff=16384, n_layers=48), "model"),
    (lambda p: p["hypotheses"][0].update(treatment="nosuch"), "hypotheses[0].treatment"),
    (lambda p: p["hypotheses"][1].update(decision={"rule": "interval_below_zero"}), "hypotheses[1].decision.rule"),
    (lambda p: p["arms"][3]["margin"].update(window=8), "arms[3].margin.window"),
    (lambda p: p.update(extras={}), "extras"),
    # values that decide outcomes have no default
    (lambda p: p["arms"][2].pop("init_above_floor"), "arms[2].init_above_floor"),
    (lambda p: p["arms"][1].pop("ot_rho"), "arms[1].ot_rho"),
    (lambda p: p["arms"][2].pop("alpha_margin"), "arms[2].alpha_margin"),
    (lambda p: p["arms"][3]["margin"].pop("score_bound"), "arms[3].margin"),
    # a boundary statistic fixed by the start: the threshold cannot be reached in 2 steps
    (lambda p: p["hypotheses"][2].update(near=1.5), "hypotheses[2].near"),
    # hostile values (each refused before any work, naming the field)
    (lambda p: p["arms"][0].update(seeds=[2**70]), "arms[0].seeds[0]"),
    (lambda p: p["arms"][0].update(seeds=[10**5000]), "arms[0].seeds[0]"),
    (lambda p: p["arms"][0].update(name="soft\x00max"), "arms[0].name"),
    (lambda p: p["arms"][0].update(name=".."), "arms[0].name"),
    (lambda p: p["plan"].update(name="x/../../escaped"), "plan.name"),
    (lambda p: p["resources"].update(threads=10**9), "resources.threads"),
    (lambda p: p["training"].update(lr=1e308), "training.lr"),
    (lambda p: p["data"].update(paths=["/no/such/file.txt"]), "data.paths[0]"),
    (lambda p: p["data"].update(paths=["/dev/zero"]), "data.paths[0]"),
    (lambda p: p["data"].update(max_bytes=10**12), "data.max_bytes"),
    (lambda p: (p["data"].update(max_bytes=10_000), p["evaluation"].update(lengths=[2000])), "data.max_bytes"),
    (lambda p: p["evaluation"].update(seed=-1), "evaluation.seed"),
    (lambda p: p["data"].update(sha256="0" * 64), "data.sha256"),
    (lambda p: p["training"].update(train_lengths=[8, 8]), "training.train_lengths"),
    (lambda p: p["training"].update(steps=10**7, trace_every=1), "training.trace_every"),
    (lambda p: (p.update(arms=[dict(a, seeds=list(range(1000))) for a in p["arms"][:3]], hypotheses=p["hypotheses"][:1]),
                p["training"].update(train_lengths=list(range(8, 72))), p["evaluation"].update(lengths=[100])), "arms"),
    (lambda p: p["hypotheses"][0].update(id="H1\x1b[2J"), "hypotheses[0].id"),
    (lambda p: p["hypotheses"][0].update(claim="ot \x1b]0;title\x07 wins"), "hypotheses[0].claim"),
]


@pytest.mark.parametrize("edit, field", BAD, ids=[f for _, f in BAD])
def test_bad_plans_are_refused_before_training(edit, field, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(PlanError) as info:
        run_study(_broken(edit), out)
    message = str(info.value)
    assert message.startswith(field + "=") and "\n" not in message
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing was written, nothing trained


def test_memory_estimate_grows_with_the_model():
    small, big = tiny_plan(), tiny_plan()
    big["model"].update(d_model=64, d_ff=256)
    a, b = estimate_memory(validate_plan(small)), estimate_memory(validate_plan(big))
    # parameters counted independently: embeddings, head, attention and MLP per layer
    d, ff = 64, 256
    assert b["parameters"] == 2 * 256 * d + (4 * d * d + 4 * d + 2 * d * ff + ff + 5 * d)
    assert b["train_bytes"] > a["train_bytes"]


@pytest.mark.parametrize("name", ["cpu-130k", "cpu-toy", "gpu-25m", "gpu-100m"])
def test_shipped_plans_validate(name):
    raw, digest = load_plan(ROOT / "plans" / f"{name}.toml")
    plan = validate_plan(raw)  # the GPU plans are checked offline here; --dry-run on their machine checks the device
    assert len(expand_runs(plan)) > 0 and len(digest) == 64
    # every log-distance arm states its start and floor; every margin its content bound
    for arm in plan["arms"]:
        if arm["scheme"] == "log-distance":
            assert "init_above_floor" in raw["arms"][plan["arms"].index(arm)]
            assert "alpha_margin" in arm or "score_bound" in arm["margin"]


def test_cpu_plan_covers_every_hypothesis():
    from otprior.study import HYPOTHESIS_KINDS

    raw, _ = load_plan(ROOT / "plans" / "cpu-130k.toml")
    plan = validate_plan(raw)
    assert {h["kind"] for h in plan["hypotheses"]} == set(HYPOTHESIS_KINDS)
    assert len(plan["training"]["train_lengths"]) == 3
    runs = expand_runs(plan)
    arm = next(h["arm"] for h in plan["hypotheses"] if h["kind"] == "intervention")
    assert sum(r.get("arm") == arm for r in runs) >= 30
    assert all(len(a["seeds"]) >= 5 for a in plan["arms"])
    assert {r["id"] for r in runs if r["kind"] == "ngram"} == {"ngram/order2", "ngram/order4"}


def test_study_records_the_hash_and_resumes(tmp_path):
    plan = tiny_plan()
    plan["training"]["train_lengths"] = [8]
    plan["arms"] = plan["arms"][2:3]
    plan["hypotheses"] = plan["hypotheses"][2:3]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    digest = hashlib.sha256(plan_file.read_bytes()).hexdigest()
    out = tmp_path / "out"
    first = run_study(plan_file, out, max_runs=1, figures=False, log=lambda s: None)
    assert first["done"] == 1 and not first["finished"]
    second = run_study(plan_file, out, figures=False, log=lambda s: None)
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert second["finished"] and [r["id"] for r in records] == ["ld/L8/seed0", "ld/L8/seed1"]
    assert all(r["plan_sha256"] == digest for r in records)
    assert (out / "hypotheses.md").read_text().count("| H5 |") == 1
    with pytest.raises(PlanError, match="^out="):
        run_study(tiny_plan(), out)


@pytest.mark.slow
def test_tiny_study_runs_resumes_and_decides(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(tiny_plan()))
    digest = hashlib.sha256(plan_file.read_bytes()).hexdigest()
    out = tmp_path / "out"
    first = run_study(plan_file, out, max_runs=3, figures=False, log=lambda s: None)
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and not first["finished"]
    assert "incomplete" in (out / "hypotheses.md").read_text()
    assert not (out / "sensitivity.md").exists()  # written once the study is finished
    second = run_study(plan_file, out, figures=False, log=lambda s: None)
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert second["finished"] and len(records) == second["runs"] == 12
    assert len({r["id"] for r in records}) == 12  # no run repeated on resume
    assert all(r["plan_sha256"] == digest for r in records)
    third = run_study(plan_file, out, log=lambda s: None)  # everything done: nothing trains
    assert (out / "results.jsonl").read_text().count("\n") == 12 and third["finished"]
    table = (out / "hypotheses.md").read_text()
    assert digest in table and all(f"| {h} |" in table for h in ("H1", "H4", "H5", "H6"))
    sens = (out / "sensitivity.md").read_text()
    assert digest in sens and all(f"| {h} | as preregistered |" in sens for h in ("H1", "H4", "H5", "H6"))
    decisions = {d["id"]: d for d in json.loads((out / "hypotheses.json").read_text())["decisions"]}
    assert all(d["outcome"] in ("supported", "not supported") for d in decisions.values())
    assert decisions["H1"]["interval"][0] <= decisions["H1"]["estimate"] <= decisions["H1"]["interval"][1]
    for name in ("loss_vs_length", "exponent_trajectories", "intervention_effects"):
        assert (out / f"{name}.png").stat().st_size > 5000 and (out / f"{name}.pdf").exists()
    # margin arm: trained exponents respect 1 + margin_for(...)
    from otprior import margin_for

    for r in records:
        if r["arm"] == "margin":
            m = margin_for(4, (r["train_length"], 20), 0.05).margin
            assert r["alpha_margin"] == pytest.approx(m) and np.min(r["alpha"]) >= 1 + m
    # another plan into the same folder is refused
    other = tiny_plan()
    other["training"]["steps"] = 3
    with pytest.raises(PlanError, match="^out="):
        run_study(other, out)


def _record(arm, L, seed, losses, **extra):
    return dict({"id": f"{arm}/L{L}/seed{seed}", "kind": "train", "arm": arm, "train_length": L, "seed": seed,
                 "loss": {"20": list(losses), str(L): list(losses)}, "seconds_per_step": 1.0}, **extra)


def test_decisions_follow_the_rules():
    plan = validate_plan(tiny_plan())
    rng = np.random.default_rng(0)
    base = rng.normal(3.0, 0.2, size=16)
    better = [_record("softmax", L, 0, base) for L in (8, 12)] + [_record("ot", L, 0, base - 0.1) for L in (8, 12)]
    ld = []
    for L in (8, 12):
        for seed in (0, 1):
            ld.append(_record("ld", L, seed, base, alpha=[[1.1, 1.9]],
                              intervention=[{"shift": 0.5, "agree": True, "verdict": "in the predicted direction",
                                             "loss_change": -0.01, "predicted_loss_direction": -1}]))
    margin = [_record("margin", L, s, base, distant_mass={"growth": [[0.01, 0.02]]}) for L in (8, 12) for s in (0, 1)]
    d = {x["id"]: x for x in decide(plan, better + ld + margin)}
    # a constant difference: every resample of runs and windows gives -0.1
    assert d["H1"]["outcome"] == "supported" and d["H1"]["interval"][1] == pytest.approx(-0.1)
    assert d["H4"]["outcome"] == "supported" and d["H4"]["sign_test_p"] == pytest.approx(0.5**4)
    assert d["H5"]["outcome"] == "supported" and d["H5"]["estimate"] == pytest.approx(0.5)
    assert d["H6"]["outcome"] == "supported" and d["H6"]["estimate"] == pytest.approx(0.02)
    worse = [_record("ot", L, 0, base + rng.normal(0.05, 0.01, 16)) for L in (8, 12)]
    ld[0]["intervention"][0].update(agree=False, verdict="inconclusive")
    d = {x["id"]: x for x in decide(plan, better[:2] + worse + ld)}
    assert d["H1"]["outcome"] == "not supported" and d["H1"]["interval"][0] > 0
    assert d["H4"]["outcome"] == "not supported"
    assert d["H6"]["outcome"] == "incomplete" and d["H6"]["estimate"] is None  # its control ran, it did not
    # half the ld runs missing: the hypotheses on them say so instead of deciding
    d = {x["id"]: x for x in decide(plan, better + ld[:2] + margin)}
    assert d["H5"]["outcome"] == "incomplete" and d["H5"]["provisional"] == "supported"
    # a failed run: undecided, never decided from what is left
    failed = {"id": "ot/L12/seed0", "kind": "train", "arm": "ot", "train_length": 12, "seed": 0, "failed": "non-finite loss"}
    d = {x["id"]: x for x in decide(plan, better[:3] + [failed] + ld + margin)}
    assert d["H1"]["outcome"] == "undecided" and "failed" in d["H1"]["detail"]
    # H6 with min_binding: heads far above the floor mean the margin was not tested
    raw = tiny_plan()
    raw["hypotheses"][3]["decision"]["min_binding"] = 0.5
    plan6 = validate_plan(raw)
    for alpha_minus_floor, outcome in ((0.5, "not tested"), (0.01, "supported")):
        m = [_record("margin", L, s, base, distant_mass={"growth": [[0.01, 0.02]]}, alpha_margin=0.3,
                     alpha=[[1.3 + alpha_minus_floor, 1.3 + alpha_minus_floor]]) for L in (8, 12) for s in (0, 1)]
        d = {x["id"]: x for x in decide(plan6, better + ld + m)}
        assert d["H6"]["outcome"] == outcome
    assert {x["outcome"] for x in decide(plan, [])} == {"not run"}


def test_study_module_does_not_import_torch():
    code = "import sys, otprior.study; assert 'torch' not in sys.modules, 'torch imported'"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_bootstrap_and_verdict():
    pytest.importorskip("torch")
    from otprior.torch.intervention import bootstrap_interval, verdict_of

    x = np.random.default_rng(1).normal(0.3, 1.0, size=400)
    mean, lo, hi = bootstrap_interval(x, level=0.95, resamples=4000)
    se = x.std(ddof=1) / np.sqrt(x.size)  # the normal-theory interval, an independent route
    assert mean == pytest.approx(x.mean())
    assert lo == pytest.approx(mean - 1.96 * se, abs=0.25 * se) and hi == pytest.approx(mean + 1.96 * se, abs=0.25 * se)
    assert verdict_of(-1, -0.2, -0.1) == "in the predicted direction"
    assert verdict_of(1, -0.2, -0.1) == "against the prediction"
    assert verdict_of(-1, -0.2, 0.1) == "inconclusive"
    with pytest.raises(ValueError, match="values"):
        bootstrap_interval([1.0])


def test_study_command_dry_run_and_bad_plans(tmp_path):
    """``otprior study``: a dry run lists the runs under the plan's hash; a plan that names an
    unknown scheme is refused with exit status 2 and one line naming the field."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([sys.executable, "-m", "otprior", "study", str(ROOT / "plans" / "cpu-130k.toml"), "--dry-run", "--json"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    payload = json.loads(ok.stdout)
    _, digest = load_plan(ROOT / "plans" / "cpu-130k.toml")
    assert payload["plan_sha256"] == digest and payload["runs"] == len(payload["run_ids"]) > 0
    bad = tiny_plan()
    bad["arms"][0]["scheme"] = "no-such-scheme"
    plan_file = tmp_path / "bad.json"
    plan_file.write_text(json.dumps(bad))
    out = subprocess.run([sys.executable, "-m", "otprior", "study", str(plan_file), "--out", str(tmp_path / "res")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "scheme" in out.stderr
    assert not (tmp_path / "res").exists()


def _with_field(path, value):
    """The CPU plan with the field at ``path`` (a list of keys and indices) set to ``value``."""
    raw, _ = load_plan(ROOT / "plans" / "cpu-130k.toml")
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    "path, value, field",
    [
        (["training", "lr"], 10**400, "training.lr"),  # no double holds it: not an OverflowError
        (["hypotheses", 0, "kind"], [1], "hypotheses[0].kind"),  # unhashable: not a TypeError
        (["hypotheses", 0, "kind"], {}, "hypotheses[0].kind"),
        # closer to one the operator's backward pass fails where its forward converges: refused before training
        (["arms", 1, "ot_rho"], 0.99999, "arms[1].ot_rho"),
    ],
)
def test_values_of_the_wrong_size_or_type_are_refused_by_field(path, value, field):
    with pytest.raises(PlanError, match=field.replace("[", r"\[").replace("]", r"\]")):
        validate_plan(_with_field(path, value))


def test_dry_run_checks_the_output_folder(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    target = tmp_path / "a-file"
    target.write_text("")
    out = subprocess.run([sys.executable, "-m", "otprior", "study", str(ROOT / "plans" / "cpu-toy.toml"), "--dry-run",
                          "--out", str(target)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2 and "--out" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_sensitivity_redecides_under_the_other_choices():
    from otprior.study import sensitivity, sensitivity_table

    plan = validate_plan(tiny_plan())
    rng = np.random.default_rng(1)
    base = rng.normal(3.0, 0.2, size=16)
    recs = [_record("softmax", L, 0, base) for L in (8, 12)] + [_record("ot", L, 0, base - 0.1) for L in (8, 12)]
    recs += [_record("ld", L, s, base, alpha=[[1.3, 1.9]],
                     intervention=[{"shift": 0.5, "agree": True, "verdict": "in the predicted direction",
                                    "loss_change": -0.01, "predicted_loss_direction": -1}])
             for L in (8, 12) for s in (0, 1)]
    recs += [_record("margin", L, s, base, distant_mass={"growth": [[0.01, 0.02]]}) for L in (8, 12) for s in (0, 1)]
    rows = sensitivity(plan, recs)
    got = {(r["id"], r["variant"]): r["outcome"] for r in rows}
    # exponents 0.3 above one: not within 0.25 of the boundary, within 0.35
    assert got[("H5", "as preregistered")] == "not supported"
    assert got[("H5", "near = 0.35")] == "supported" and got[("H5", "near = 0.15")] == "not supported"
    # a constant difference of -0.1 is below zero at every level
    assert {got[("H1", v)] for v in ("as preregistered", "level 0.95", "level 0.99")} == {"supported"}
    # four checkpoints all in the predicted direction: the rule "all of them" holds, but a sign
    # test over four runs (or four rows) cannot reach p < 0.05 (p = 1/16)
    assert got[("H4", "as preregistered")] == "supported"
    assert got[("H4", "rule sign_test_over_runs at 0.05")] == "not supported"
    assert got[("H4", "rule sign_test at 0.05")] == "not supported"
    assert got[("H4", "rule sign_test_over_runs at 0.01")] == "not supported"
    # no variant repeats the preregistered choice: the plan's level 0.9, its single shift, its
    # content bound 0 and its min_binding 0 are not offered again
    labels = [r["variant"] for r in rows]
    assert "level 0.90" not in labels and not any(v.startswith("shift") for v in labels)
    assert got[("H6", "min_binding 0.25")] == "supported" and ("H6", "min_binding 0") not in got
    assert len(set(zip([r["id"] for r in rows], labels, strict=True))) == len(rows)
    table = sensitivity_table(rows)
    assert table.count("\n") == len(rows) + 2 and "| H5 | near = 0.35 | supported |" in table


def test_a_run_is_claimed_once_and_longest_runs_go_first(tmp_path):
    from otprior.study import _claim, _expected_cost

    assert _claim(tmp_path, "ot/L64/seed0") and not _claim(tmp_path, "ot/L64/seed0")
    assert _claim(tmp_path, "ot/L64/seed1")
    with pytest.raises(PlanError):
        _claim(tmp_path, "../escape")
    runs = [r for r in expand_runs(validate_plan(tiny_plan())) if r["kind"] == "train"]
    order = [r["id"] for r in sorted(runs, key=_expected_cost, reverse=True)]
    assert order[0] == "ot/L12/seed0" and order[1] == "ot/L8/seed0"
