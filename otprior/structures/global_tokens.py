"""Global (summary) tokens beside the keys: LongT5's transient-global attention, in part (Theorem S5).

LongT5's ``transient-global`` encoder lets every token attend, beside its local keys, one summary
token per block of ``global_block_size`` tokens (the block's normalised sum), with a learned bias
of the block distance. Modelled here: the *count* of summary tokens, :math:`g(n) = \\lceil n/k\\rceil`,
each with one constant logit ``logit`` (their weights join the denominator: the window's share
is :math:`H/(Z + g(n) e^{s})`). Not modelled: the summary tokens' own per-block-distance bias (a
bounded table: Theorem S5 needs only a lower bound on it), their values, LongT5's blocked local
mask (three blocks of ``local_radius + 1``, not a sliding window), and that its encoder is
bidirectional (a causal prior describes its causal half only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._registry import REQUIRED, param
from .._validation import check_int, check_real
from ._base import Structure, register

__all__ = ["GlobalTokens"]


@register
@dataclass(frozen=True, repr=False)
class GlobalTokens(Structure):
    """``ceil(n / block)`` summary tokens, each with logit ``logit``, joining every row's denominator."""

    name = "global-tokens"

    block: int = param(REQUIRED, doc="tokens per summary token (LongT5's global_block_size), >= 1")
    logit: float = param(0.0, doc="the summary tokens' logit (a lower bound on it for Theorem S5)")

    def __post_init__(self):
        object.__setattr__(self, "block", check_int(self.block, "block"))
        object.__setattr__(self, "logit", check_real(self.logit, "logit"))

    def count(self, n: int) -> int:
        return -(-n // self.block)

    def extra_log_weight(self, n):
        return self.logit + math.log(self.count(n))
