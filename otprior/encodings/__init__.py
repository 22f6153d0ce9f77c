"""Positional encodings as biases on attention logits, one registry, and their classification.

Every encoding is a frozen dataclass in the file of its family, registered by name where it
is defined. The registry is the single list:

- :func:`names` -> the registered names;
- :func:`get` ``(name, **params)`` -> an instance (unknown name or keyword: ``DomainError``);
- :func:`lookup` ``(name)`` -> the class;
- :func:`parameters` ``(name)`` -> :class:`~otprior._registry.Parameter` records
  ``(name, type, default, doc, choices)`` from the dataclass fields, for generated options.

Adding an encoding is one file: a frozen dataclass subclassing :class:`Encoding`, decorated
with ``@register`` (from ``._base``), its fields declared with ``param(default, doc=...)`` so that
options can be generated, ``bias`` and ``_verdict`` implemented (``_masses`` for a closed form,
``far_profile`` for the normalisers), imported below; then its test and its proof.

Each encoding offers ``bias(d, n=None)``, ``window_mass(window, n)`` and
``distant_mass(window, n)`` (``n`` array-like; multi-head instances answer with a leading
head axis), proved enclosures ``mass_enclosures(window, n)`` (:class:`MassEnclosures`) and
``limit_enclosure(window)`` at any ``n`` up to 1e300 (Theorem 16, ``proofs/closed_form_tails.md``;
a FIRE with a general callable ``f`` has none), and is classified by :func:`otprior.classify`
(Theorem 11, ``proofs/classification.md``; with a normaliser, ``proofs/normalisers.md``).
A new family gives its closed form in ``_certified(window, n)`` and ``_limit_certified(window)``.
"""

from __future__ import annotations

from ._base import REGISTRY, Encoding, MassEnclosures, Verdict, register
from .alibi import ALiBi, alibi_slopes, bf16_round
from .bias import Bias
from .cable import CABLE, cable_row_bias
from .fire import FIRE, fire_input
from .kerple import KerpleLog, KerplePower, kerple_clamp, kerple_clamp_bounds
from .operator import CausalOT
from .power_law import LogDistance
from .rotary import ROPE_TYPES, NoPE, RoPE, YaRN, rope_inverse_frequencies
from .t5 import T5Buckets, t5_bucket

__all__ = [
    "REFERENCE_MODEL_SCHEMES",
    "names",
    "get",
    "lookup",
    "parameters",
    "classify",
    "Encoding",
    "Verdict",
    "MassEnclosures",
    "register",
    "NoPE",
    "RoPE",
    "YaRN",
    "ALiBi",
    "KerpleLog",
    "KerplePower",
    "T5Buckets",
    "FIRE",
    "CABLE",
    "LogDistance",
    "CausalOT",
    "Bias",
    "alibi_slopes",
    "bf16_round",
    "cable_row_bias",
    "fire_input",
    "kerple_clamp",
    "kerple_clamp_bounds",
    "rope_inverse_frequencies",
    "t5_bucket",
    "ROPE_TYPES",
]


def names() -> tuple:
    """The registered encoding names, e.g. ``('nope', 'rope', 'yarn', 'alibi', ...)``."""
    return REGISTRY.names()


def get(name, **params) -> Encoding:
    """The encoding registered as ``name``, built from ``params`` (validated by the class)."""
    return REGISTRY.get(name, **params)


def lookup(name) -> type:
    """The class registered as ``name``."""
    return REGISTRY.lookup(name)


def parameters(name) -> tuple:
    """The constructor parameters of encoding ``name`` (``Parameter`` records)."""
    return REGISTRY.parameters(name)


def classify(encoding, normaliser=None, score_bound=None, *, structure=None):
    """:func:`otprior.classification.classify` (kept here for existing callers)."""
    from ..classification import classify as _classify

    return _classify(encoding, normaliser, score_bound, structure=structure)


#: The positional schemes the reference model (``otprior.torch.ReferenceModel``) implements,
#: each a registered name; kept here, free of torch, so that study plans can be checked
#: without the torch extra.
REFERENCE_MODEL_SCHEMES = ("nope", "rope", "alibi", "kerple-log", "cable", "log-distance", "causal-ot")
