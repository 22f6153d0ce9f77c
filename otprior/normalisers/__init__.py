"""Normalisers beside the biases: softmax, temperature, SSMax, log-n, stick-breaking, forgetting gates, entmax, causal OT.

One registry, as for the encodings: :func:`names`, :func:`get` ``(name, **params)``,
:func:`lookup`, :func:`parameters`. ``otprior.classify(encoding, normaliser, score_bound)``
classifies a pair (``proofs/normalisers.md``).
"""

from __future__ import annotations

from ._base import REGISTRY, Normaliser
from .entmax import Entmax, entmax
from .forgetting import ForgettingGate
from .operator import CausalOTNormaliser
from .scalable import LogN, SSMax
from .softmax import Softmax, Temperature
from .stick_breaking import StickBreaking, stick_breaking_window_floor

__all__ = [
    "names",
    "get",
    "lookup",
    "parameters",
    "Normaliser",
    "Softmax",
    "Temperature",
    "SSMax",
    "LogN",
    "StickBreaking",
    "ForgettingGate",
    "Entmax",
    "CausalOTNormaliser",
    "entmax",
    "stick_breaking_window_floor",
]


def names() -> tuple:
    """The registered normaliser names."""
    return REGISTRY.names()


def get(name, **params) -> Normaliser:
    """The normaliser registered as ``name``, built from ``params``."""
    return REGISTRY.get(name, **params)


def lookup(name) -> type:
    """The class registered as ``name``."""
    return REGISTRY.lookup(name)


def parameters(name) -> tuple:
    """The constructor parameters of normaliser ``name``."""
    return REGISTRY.parameters(name)
