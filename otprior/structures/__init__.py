"""Attention structure beside the encodings and the normalisers: which keys a query sees, and what else
enters its softmax (``proofs/attention_structure.md``).

One registry, as for the encodings: :func:`names`, :func:`get` ``(name, **params)``, :func:`lookup`,
:func:`parameters`. :func:`compose` puts several on one row (a sliding window and a sink);
``otprior.classify(encoding, structure=...)`` classifies a bias under one;
:func:`layer_structures` reads the per-layer structure of a transformers config.

==================  =====================================================================  =======
name                the row of the query with ``n`` keys                                   theorem
==================  =====================================================================  =======
``causal``          every key, distances ``0 .. n-1`` (the default)                        Thm 11
``sliding-window``  the ``width`` nearest keys (transformers' ``sliding_window``)          S1
``chunked``         the ``(n-1) mod size + 1`` keys of the query's chunk (Llama-4)         S2
``sink``            a logit ``s`` per head joining the denominator only (gpt-oss)          S3
``softcap``         logits c tanh(z / c) (Gemma-2 ``attn_logit_softcapping``)              S4
``global-tokens``   ``ceil(n/block)`` summary tokens in the denominator (LongT5, in part)  S5
``absolute``        learned absolute positions: no relative prior, nothing past the table  S6
==================  =====================================================================  =======
"""

from __future__ import annotations

from ._base import REGISTRY, Structure, row_masses
from ._verdicts import explicit_row
from .absolute import AbsolutePositions
from .composed import Composed, compose
from .global_tokens import GlobalTokens
from .layers import LAYER_TYPES, LayerStructure, layer_structures
from .masks import Chunked, FullCausal, SlidingWindow
from .sink import AttentionSink
from .softcap import SoftCap

__all__ = [
    "names",
    "get",
    "lookup",
    "parameters",
    "compose",
    "Structure",
    "Composed",
    "FullCausal",
    "SlidingWindow",
    "Chunked",
    "AttentionSink",
    "SoftCap",
    "GlobalTokens",
    "AbsolutePositions",
    "LayerStructure",
    "layer_structures",
    "LAYER_TYPES",
    "row_masses",
    "explicit_row",
]


def names() -> tuple:
    """The registered structure names."""
    return REGISTRY.names()


def get(name, **params) -> Structure:
    """The structure registered as ``name``, built from ``params``."""
    return REGISTRY.get(name, **params)


def lookup(name) -> type:
    """The class registered as ``name``."""
    return REGISTRY.lookup(name)


def parameters(name) -> tuple:
    """The constructor parameters of structure ``name``."""
    return REGISTRY.parameters(name)
