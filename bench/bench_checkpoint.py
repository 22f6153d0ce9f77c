"""Loading and reporting a 100M-parameter checkpoint: seconds, and only positional tensors read.

Writes a synthetic 100M-parameter safetensors file (float32, 12 layers, KERPLE-log names)
into a temporary folder, then times, as CPU time of warm calls on one thread, medians of
runs interleaved in this process: ``load_checkpoint`` (which reads the positional tensors
only) against reading and touching every tensor of the file, and ``analyse_checkpoint`` on
the loaded checkpoint. Writes ``bench/results/checkpoint.json``.

Run: ``python bench/bench_checkpoint.py [--quick]`` (``--quick``: 2 layers, width 128).
"""

from __future__ import annotations

import os

# one thread for every BLAS, fixed before numpy (and torch) start their threads; only when
# run as a script (an importing test process keeps its settings)
if __name__ == "__main__":
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared timing
from _timing import interleaved  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "checkpoint.json"


def synthetic(path: Path, layers=12, d=768, heads=12, vocab=50304):
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(0)
    sd = {"embed.weight": torch.randn(vocab, d, generator=g)}
    for i in range(layers):
        sd[f"layers.{i}.attention.query_key_value.weight"] = torch.randn(3 * d, d, generator=g)
        sd[f"layers.{i}.attention.dense.weight"] = torch.randn(d, d, generator=g)
        sd[f"layers.{i}.mlp.dense_h_to_4h.weight"] = torch.randn(4 * d, d, generator=g)
        sd[f"layers.{i}.mlp.dense_4h_to_h.weight"] = torch.randn(d, 4 * d, generator=g)
        sd[f"layers.{i}.attention.bias_p"] = torch.rand(heads, 1, 1, generator=g) * 2
        sd[f"layers.{i}.attention.bias_a"] = torch.rand(heads, 1, 1, generator=g)
    save_file(sd, str(path))
    return sum(v.numel() for v in sd.values())




def main(argv=None, *, sizes=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small checkpoint (seconds)")
    ap.add_argument("--out", default=None, help="where to write the JSON (default: the committed results file; a "
                    "--quick run writes nothing unless told, so it never replaces the figures the README quotes)")
    a = ap.parse_args(argv)
    if a.out is None and not a.quick:
        a.out = str(RESULTS)
    import torch
    from safetensors.torch import load_file

    from otprior.torch import analyse_checkpoint, load_checkpoint

    torch.set_num_threads(1)
    cfg = {"layers": 2, "d": 128, "vocab": 1024, "reps": 1} if a.quick else {"layers": 12, "d": 768, "vocab": 50304,
                                                                            "reps": 3}
    cfg.update(sizes or {})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.safetensors"
        n = synthetic(path, layers=cfg["layers"], d=cfg["d"], vocab=cfg["vocab"])
        size = path.stat().st_size

        def full_read():
            # safetensors maps the file lazily: touch every tensor so the baseline really reads it
            return sum(float(v.double().sum()) for v in load_file(str(path)).values())

        med, out = interleaved(
            {"load_checkpoint": lambda: load_checkpoint(path, scheme="kerple-log"), "full_read": full_read},
            cfg["reps"],
        )
        ckpt = out["load_checkpoint"]
        med_report, rep = interleaved({"analyse_checkpoint": lambda: analyse_checkpoint(ckpt)}, cfg["reps"])
        report = rep["analyse_checkpoint"]
        row = {
            "quick": a.quick,
            "clock": "process_time (CPU), median of interleaved warm runs, one thread",
            "parameters": n,
            "file_bytes": size,
            "tensors_read": len(ckpt.keys_read),
            "bytes_read": ckpt.bytes_read,
            "fraction_read": ckpt.bytes_read / size,
            "load_checkpoint_s": med["load_checkpoint"],
            "full_read_s": med["full_read"],
            "load_over_full_read": med["load_checkpoint"] / med["full_read"],
            "analyse_checkpoint_s": med_report["analyse_checkpoint"],
            "heads": len(report.rows),
            "near_boundary": len(report.near_boundary),
        }
    print(json.dumps(row, indent=1))
    if a.out is None:
        print("quick run: nothing written (--out PATH keeps it)")
        return row
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(row, indent=1) + "\n")
    return row


if __name__ == "__main__":
    main()
