"""Learned (or sinusoidal) absolute positions added to the input: no relative prior (Theorem S6)."""

from __future__ import annotations

from . import Architecture, register

for _family, _key, _kind in (
    ("gpt2", "n_positions", "learned"),
    ("opt", "max_position_embeddings", "learned"),
    ("bart", "max_position_embeddings", "learned"),
    ("mbart", "max_position_embeddings", "learned"),
    ("gpt_neo", "max_position_embeddings", "learned"),
    ("xglm", "max_position_embeddings", "sinusoidal"),
    ("gpt_bigcode", "n_positions", "learned"),
    ("biogpt", "max_position_embeddings", "learned"),
):
    register(Architecture(_family, (_family,), absolute=(_key, _kind)))
