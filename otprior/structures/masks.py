"""Masks that keep the nearest keys: full causal, sliding windows, chunks (Theorems S1-S3).

The conventions are transformers' (``masking_utils``): a sliding window of width ``w`` keeps
key ``j`` for query ``i`` iff ``i - w < j <= i``, i.e. distances ``d = 0 .. w - 1`` (``w`` keys,
Mistral, Mixtral, Qwen2, Starcoder2, Gemma-2/3, Cohere-2, gpt-oss); a chunk of size ``C`` keeps
``j <= i`` with ``j // C == i // C`` (Llama-4's ``attention_chunk_size``), so the query at
0-based position ``n - 1`` sees ``((n - 1) mod C) + 1`` keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._registry import REQUIRED, param
from .._validation import check_int
from ._base import Structure, register

__all__ = ["FullCausal", "SlidingWindow", "Chunked"]


@register
@dataclass(frozen=True, repr=False)
class FullCausal(Structure):
    """Every key at or before the query: ``r(n) = n`` (the default structure)."""

    name = "causal"


@register
@dataclass(frozen=True, repr=False)
class SlidingWindow(Structure):
    """The ``width`` nearest keys, the query's own included: ``r(n) = min(n, width)`` (Theorem S1)."""

    name = "sliding-window"

    width: int = param(REQUIRED, doc="number of keys kept, the query's own included (transformers' sliding_window), >= 1")

    def __post_init__(self):
        object.__setattr__(self, "width", check_int(self.width, "width"))

    def visible(self, n):
        return min(n, self.width)


@register
@dataclass(frozen=True, repr=False)
class Chunked(Structure):
    """Keys of the query's own chunk of ``size`` positions: ``r(n) = ((n - 1) mod size) + 1`` (Theorem S2)."""

    name = "chunked"

    size: int = param(REQUIRED, doc="chunk size C >= 1 (Llama-4's attention_chunk_size)")

    def __post_init__(self):
        object.__setattr__(self, "size", check_int(self.size, "size"))

    def visible(self, n):
        return (n - 1) % self.size + 1
