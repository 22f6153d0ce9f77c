"""Training under torchrun with DistributedDataParallel (gloo on the CPU) keeps the loss curve."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys, torch
from otprior.torch.data import byte_corpus
from otprior.torch.model import ModelConfig
from otprior.torch.training import distributed_context, train

torch.set_num_threads(1)
data, _ = byte_corpus(max_bytes=200_000)
cfg = ModelConfig(scheme="log-distance", d_model=16, n_layers=1, n_heads=2, d_ff=32, train_length=16)
result = train(cfg, data, steps=6, batch_size=4, seed=3)
rank, world = distributed_context()
if rank == 0:
    json.dump({"world": world, "losses": result.losses,
               "alpha": result.model.blocks[0].attn.pos.alpha().tolist()}, open(sys.argv[1], "w"))
"""


@pytest.mark.slow
def test_two_processes_give_the_one_process_loss_curve(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    env.pop("WORLD_SIZE", None)
    subprocess.run([sys.executable, str(script), str(tmp_path / "one.json")], check=True, env=env, timeout=300)
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
                    str(tmp_path / "two.json")], check=True, env=env, timeout=300, capture_output=True)
    one = json.loads((tmp_path / "one.json").read_text())
    two = json.loads((tmp_path / "two.json").read_text())
    assert one["world"] == 1 and two["world"] == 2
    # the same global batch, half per process, gradients averaged: the same curve up to float sums
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-5, atol=0)
    np.testing.assert_allclose(two["alpha"], one["alpha"], rtol=1e-5, atol=0)
    assert len(set(one["losses"])) > 1  # the curve moves: the comparison is not of constants


STUDY = """
import json, sys
sys.path.insert(0, sys.argv[2])
from test_study import tiny_plan
from otprior.study import run_study

plan = tiny_plan()
plan["training"]["train_lengths"] = [8]
plan["arms"] = plan["arms"][2:3]
plan["hypotheses"] = plan["hypotheses"][2:3]
run_study(plan, sys.argv[1], spread=True, figures=False, log=lambda s: None)
"""


@pytest.mark.slow
def test_study_spreads_runs_over_processes(tmp_path):
    script = tmp_path / "study.py"
    script.write_text(STUDY)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
                    str(out), str(ROOT / "tests")], check=True, env=env, timeout=300, capture_output=True)
    files = sorted(p.name for p in out.glob("results*.jsonl"))
    assert set(files) <= {"results.jsonl", "results.rank1.jsonl"}
    ids = [json.loads(line)["id"] for f in files for line in (out / f).read_text().splitlines()]
    assert sorted(ids) == ["ld/L8/seed0", "ld/L8/seed1"]  # each run exactly once, whichever process took it
    claims = sorted(p.name for p in (out / "partial").glob("*/claims/*"))
    assert claims == ["ld-L8-seed0", "ld-L8-seed1"]
    assert json.loads((out / "hypotheses.json").read_text())["finished"]
