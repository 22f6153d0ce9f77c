"""Learned absolute positions (GPT-2, OPT, BART, GPT-Neo, XGLM, GPTBigCode, MPT without ALiBi; Theorem S6).

A table of ``max_positions`` learned vectors is added to the token embeddings. No term of the
logits depends on the distance alone: the positions reach the scores only through the content
(``q_i . k_j`` of embeddings that carry them). So there is no relative prior to classify, and
nothing at all beyond the table: the model has no position ``>= max_positions``. What can be
said: at constant content (every score equal) the row is uniform, :math:`m_n(W) = W/n` for
``n <= max_positions``, and with scores (content *and* positions) within ``B`` of a constant
Theorem 10 bands it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._registry import REQUIRED, param
from .._validation import DomainError, check_int
from ._base import Structure, register

__all__ = ["AbsolutePositions"]


@register
@dataclass(frozen=True, repr=False)
class AbsolutePositions(Structure):
    """Learned absolute positions: uniform constant-content rows up to ``max_positions``, nothing beyond."""

    name = "absolute"

    max_positions: int = param(REQUIRED, doc="size of the learned position table (the longest input the model takes)")
    table: str = param("learned", doc="learned (nothing beyond the table) or sinusoidal (computed at any position)", choices=("learned", "sinusoidal"))

    def __post_init__(self):
        object.__setattr__(self, "max_positions", check_int(self.max_positions, "max_positions"))
        if self.table not in ("learned", "sinusoidal"):
            raise DomainError("table", self.table, "learned or sinusoidal")

    def visible(self, n):
        if n > self.max_positions and self.table == "learned":
            raise DomainError("n", n, f"a length at most max_positions = {self.max_positions} (no learned position beyond the table)")
        return n
