"""Loading and reporting a 100M-parameter checkpoint: seconds, and only positional tensors read.

Writes a synthetic 100M-parameter safetensors file (float32, 12 layers, KERPLE-log names)
into a temporary folder, then times ``analyse_checkpoint`` against reading the whole file.
Run: ``python bench/bench_checkpoint.py``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from otprior.torch import analyse_checkpoint


def synthetic(path: Path, layers=12, d=768, heads=12, vocab=50304):
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


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.safetensors"
        n = synthetic(path)
        size = path.stat().st_size
        from otprior.torch import load_checkpoint

        start = time.perf_counter()
        ckpt = load_checkpoint(path, scheme="kerple-log")
        t_load = time.perf_counter() - start
        start = time.perf_counter()
        report = analyse_checkpoint(ckpt)
        t_report = time.perf_counter() - start
        start = time.perf_counter()
        # safetensors maps the file lazily: touch every tensor so the baseline really reads it
        checksum = sum(float(v.double().sum()) for v in load_file(str(path)).values())
        t_full = time.perf_counter() - start
        print(f"checkpoint: {n / 1e6:.1f}M parameters, {size / 1e6:.0f} MB")
        print(f"load_checkpoint: {t_load * 1e3:.1f} ms, read {len(ckpt.keys_read)} tensors = {ckpt.bytes_read} bytes of {size} ({ckpt.bytes_read / size:.1e})")
        print(f"analysis (verdicts, margin, distant masses for every head): {t_report:.2f} s")
        print(f"for scale: materialising every tensor takes {t_full:.2f} s with the file in the page cache (checksum {checksum:.3g})")
        print(f"ratio load_checkpoint / full read: {t_load / t_full:.2e}")
        print(f"{len(report.rows)} heads, {len(report.near_boundary)} within the margin of the boundary")


if __name__ == "__main__":
    main()
