"""Attention sinks: a learned logit per head that joins the softmax denominator only (gpt-oss; Theorem S3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._registry import REQUIRED, param
from .._validation import DomainError, check_real
from ..encodings._base import per_head_values
from ._base import Structure, register

__all__ = ["AttentionSink"]


def _finite(v, name):
    return check_real(v, name)


@register
@dataclass(frozen=True, repr=False)
class AttentionSink(Structure):
    """gpt-oss's ``sinks``: the row is :math:`e^{\\beta(d)}/(\\sum_k e^{\\beta(k)} + e^{s})`, no value attached.

    ``logit`` is the sink's logit on the scale of the row's (gpt-oss concatenates ``sinks`` to the
    scaled, masked scores before the softmax and drops that column after it).
    """

    name = "sink"

    logit: float = param(REQUIRED, doc="sink logit s (finite); one per head allowed")

    def __post_init__(self):
        if self.logit is None:
            raise DomainError("logit", None, "a finite sink logit (or one per head)")
        v = per_head_values(self.logit, "logit", _finite)
        if isinstance(v, tuple) and len(v) == 1:
            v = v[0]
        object.__setattr__(self, "logit", v)

    @property
    def sink_logit(self):
        return self.logit

    def for_head(self, h):
        if isinstance(self.logit, tuple):
            return AttentionSink(self.logit[h])
        return self

    def sink_weights(self):
        """``e^s`` per head (array)."""
        return np.exp(np.asarray(self.logit, dtype=float))
