"""The committed study results: they are what the plan and the code decide, and the README says
exactly that (re-decided here from the committed run records, by the same rules)."""

import hashlib
import json
import re
from pathlib import Path

import pytest

from otprior.study import decide, expand_runs, validate_plan

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "bench" / "results" / "study-cpu-130k"


def _records():
    return [json.loads(line) for f in sorted(FOLDER.glob("results*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]


def test_results_belong_to_the_committed_plan():
    digest = hashlib.sha256((ROOT / "plans" / "cpu-130k.toml").read_bytes()).hexdigest()
    saved = json.loads((FOLDER / "plan.json").read_text())
    assert saved["plan_sha256"] == digest
    records = _records()
    runs = expand_runs(validate_plan(saved["plan"]))
    assert sorted(r["id"] for r in records) == sorted(r["id"] for r in runs)  # every run, once
    assert not [r["id"] for r in records if "failed" in r]
    for r in records:
        assert r["plan_sha256"] == digest
        p = r["provenance"]
        assert re.fullmatch(r"[0-9a-f]{40}", p["commit"]) and p["dirty"] is False
        assert p["data_sha256"] == saved["plan"]["data"]["sha256"] and p["data_pinned"] is True
        assert p["threads"] == 1 and p["processes"] == 2


def test_committed_decisions_are_what_the_rules_give():
    saved = json.loads((FOLDER / "plan.json").read_text())
    plan = validate_plan(saved["plan"])
    committed = json.loads((FOLDER / "hypotheses.json").read_text())
    assert committed["finished"] is True
    again = decide(plan, _records())
    assert [d["id"] for d in again] == [d["id"] for d in committed["decisions"]]
    for new, old in zip(again, committed["decisions"], strict=True):
        assert new["outcome"] == old["outcome"], new["id"]
        for key in ("estimate", "interval"):
            assert new[key] == pytest.approx(old[key], rel=1e-12, abs=1e-15), (new["id"], key)


def test_readme_table_matches_the_results_line_by_line():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("<!-- study-cpu-130k table -->")
    table = readme[start:readme.index("<!-- /study-cpu-130k table -->")]
    decisions = json.loads((FOLDER / "hypotheses.json").read_text())["decisions"]
    rows = [line for line in table.splitlines() if re.match(r"\| H\d ", line)]
    assert len(rows) == len(decisions)
    for row, d in zip(rows, decisions, strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == d["id"]
        assert cells[2].strip("*") == d["outcome"]
        assert cells[3] == f"{d['estimate']:+.3g}"
        lo, hi = d["interval"]
        assert cells[4] == f"[{lo:+.3g}, {hi:+.3g}]"


def test_committed_sensitivity_is_what_the_code_gives():
    from otprior.study import sensitivity_report

    saved = json.loads((FOLDER / "plan.json").read_text())
    text = sensitivity_report(validate_plan(saved["plan"]), saved["plan_sha256"], _records())
    assert (FOLDER / "sensitivity.md").read_text() == text


def test_the_plan_builds_the_committed_configurations():
    """Every run the plan expands to today has the configuration its record was trained with
    (the margin arm's exponents come from ``margin_for``: a change there changes the study)."""
    saved = json.loads((FOLDER / "plan.json").read_text())
    configs = {r["id"]: r["config"] for r in _records() if r.get("kind", "train") == "train"}
    for run in expand_runs(validate_plan(saved["plan"])):
        if run["kind"] == "train":
            for key, value in run["config"].items():
                assert configs[run["id"]][key] == value, (run["id"], key)


def _retrain(run_id, tmp_path):
    """Retrain one committed run with today's code, as a clean clone would (one thread, as the plan
    says); returns the plan, the data, the new record and the committed one."""
    torch = pytest.importorskip("torch")
    from otprior.study import check_machine
    from otprior.torch.experiment import execute_run, load_data

    saved = json.loads((FOLDER / "plan.json").read_text())
    plan = validate_plan(saved["plan"])
    run = next(r for r in expand_runs(plan) if r["id"] == run_id)
    committed = next(r for r in _records() if r["id"] == run_id)
    data = load_data(plan["data"], check_machine(plan)["files"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        record = execute_run(run, plan, data, checkpoint_dir=tmp_path, state_dir=tmp_path / "partial",
                             data_parallel=False)
    finally:
        torch.set_num_threads(threads)
    return plan, data, record, committed


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["softmax", "cable", "rope-yarn", "margin"])
def test_one_run_of_each_arm_reproduces_bit_for_bit(arm, tmp_path):
    """Every evaluated loss of a retrained run equals the committed record exactly."""
    _, _, record, committed = _retrain(f"{arm}/L32/seed0", tmp_path)
    assert record["final_train_loss"] == committed["final_train_loss"]
    assert record["loss"] == committed["loss"]


@pytest.mark.slow
def test_the_ot_and_log_distance_runs_and_their_cost_reproduce(tmp_path):
    """The two arms of H2 retrain bit for bit, and the counted work per step of the side-by-side
    cost measurement (what H2's cost rule reads) is the committed one exactly."""
    torch = pytest.importorskip("torch")
    from otprior.torch.experiment import measure_cost

    recs = {}
    for arm in ("ot", "log-distance"):
        plan, data, record, committed = _retrain(f"{arm}/L32/seed0", tmp_path)
        assert record["final_train_loss"] == committed["final_train_loss"], arm
        assert record["loss"] == committed["loss"], arm
        recs[arm] = record
    run = next(r for r in expand_runs(plan) if r["id"] == "cost/log-distance-vs-ot/L32/seed0")
    committed = next(r for r in _records() if r["id"] == run["id"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cost = measure_cost(run, plan, data, recs["log-distance"], recs["ot"], checkpoint_dir=tmp_path)
    finally:
        torch.set_num_threads(threads)
    for key in ("work_treatment", "work_control", "flops_ratio"):
        assert cost[key] == committed[key], key
