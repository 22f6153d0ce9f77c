"""Logit soft-capping: :math:`z \\mapsto c\\tanh(z/c)` (Gemma-2's ``attn_logit_softcapping``; Theorem S4)."""

from __future__ import annotations

from dataclasses import dataclass

from .._registry import REQUIRED, param
from .._validation import check_real
from ._base import Structure, register

__all__ = ["SoftCap"]


@register
@dataclass(frozen=True, repr=False)
class SoftCap(Structure):
    """Every logit (content and bias together) becomes :math:`c\\tanh(z/c) \\in (-c, c)` before the mask.

    Theorem S4 (``proofs/attention_structure.md``): the capped logits lie within ``c`` of 0 whatever
    the weights, so Theorem 10 holds with ``B = c`` around the uniform row: with every key visible the
    window keeps at most :math:`W e^{2c}/(W e^{2c} + n - W)`, whatever the bias and the content.
    """

    name = "softcap"

    cap: float = param(REQUIRED, doc="the cap c > 0 (logits c tanh(z / c))")

    def __post_init__(self):
        object.__setattr__(self, "cap", check_real(self.cap, "cap", low=0.0, low_open=True))

    @property
    def logit_cap(self):
        return self.cap
