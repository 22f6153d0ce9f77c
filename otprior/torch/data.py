"""Training and evaluation data: byte-level text windows.

Default data: the source text of the Python standard library, byte-level (every machine
with Python has it; nothing is downloaded). Any text files can be named instead.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np
import torch

__all__ = ["byte_corpus", "sample_batch"]


def byte_corpus(paths=None, *, max_bytes=4_000_000, val_fraction=0.1):
    """``(train, val)`` uint8 tensors of bytes: the named files, or the standard library's ``.py`` files."""
    if paths is None:
        root = Path(sysconfig.get_paths()["stdlib"])
        paths = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts)
    from .._files import read_regular

    chunks, total = [], 0
    for p in paths:
        data = read_regular(p, max(int(max_bytes) - total, 0), "data", prefix=True)
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    if total < 10_000:
        raise ValueError(f"paths hold {total} bytes; the corpus needs at least 10000")
    blob = np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8)
    split = int(len(blob) * (1 - val_fraction))
    return torch.from_numpy(blob[:split].copy()), torch.from_numpy(blob[split:].copy())


def sample_batch(data, length, batch_size, generator):
    """``batch_size`` random windows of ``length + 1`` bytes, as int64.

    The windows depend on ``generator`` alone, so two models evaluated with generators of
    the same seed see the same windows (the pairing of the study's comparisons).
    """
    if len(data) <= length + 1:
        raise ValueError(f"length={length} is outside the valid domain: below the data size {len(data)} - 1")
    starts = torch.randint(0, len(data) - length - 1, (batch_size,), generator=generator)
    return torch.stack([data[s : s + length + 1] for s in starts.tolist()]).long()
