"""Forgetting gates (FoX): a data-dependent cumulative log-decay added to the logits.

The logit of key ``j`` for query ``i`` gains :math:`\\sum_{k=j+1}^{i}\\log f_k` with gates
:math:`f_k = \\sigma(\\cdot) \\in [f_{min}, f_{max}]`. Increments :math:`-\\log f_k \\ge
\\varepsilon = -\\log f_{max}`; by Lemma 11b (``proofs/classification.md``) extended in
Theorem N5 (``proofs/normalisers.md``), constant increments ``epsilon`` are the worst case
for distant mass, so the pair is bounded by the encoding's bias plus :math:`-\\varepsilon d`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import softmax as _softmax

from .._registry import param
from .._validation import DomainError, check_real
from ..encodings._base import Verdict, decisive, direct_masses
from ._base import Normaliser, register, row, softmax_verdict

__all__ = ["ForgettingGate"]


@register
@dataclass(frozen=True)
class ForgettingGate(Normaliser):
    """FoX: softmax of logits plus cumulative log forget gates in ``[f_min, f_max]``."""

    name = "forgetting"

    f_max: float = param(1.0, doc="largest forget gate value, in (0, 1]")
    f_min: float = param(0.0, doc="smallest forget gate value, in [0, f_max]")

    def __post_init__(self):
        object.__setattr__(self, "f_max", check_real(self.f_max, "f_max", low=0.0, high=1.0, low_open=True))
        object.__setattr__(self, "f_min", check_real(self.f_min, "f_min", low=0.0))
        if self.f_min > self.f_max:
            raise DomainError("f_min", self.f_min, f"a value at most f_max = {self.f_max}")

    @property
    def epsilon(self) -> float:
        """The least decay increment :math:`-\\log f_{max}`."""
        return -math.log(self.f_max)

    def attention(self, logits, gates=None):
        """Softmax of ``logits[d] + sum_{k<d} log gates[k]`` (distance order; gates nearest first).

        Without ``gates`` the worst case for distant mass, all gates at ``f_max``.
        """
        z = row(logits)
        g = np.full(z.size, self.f_max) if gates is None else np.asarray(gates, dtype=float)
        if g.shape != z.shape or np.any(g < self.f_min) or np.any(g > self.f_max) or np.any(g <= 0):
            raise DomainError("gates", "out of range", f"{z.size} gates in [f_min, f_max] = [{self.f_min}, {self.f_max}], positive")
        decay = np.concatenate([[0.0], np.cumsum(np.log(g))[:-1]])
        return _softmax(z + decay)

    def _window_mass(self, encoding, window, n):
        b = np.asarray(encoding.log_weights(n), dtype=float)
        return direct_masses(b - self.epsilon * np.arange(n), window)[0]

    def classify(self, encoding, B):
        eps = self.epsilon
        mass = self.mass_function(encoding)
        if eps == 0.0:
            base = softmax_verdict(encoding, B)
            return Verdict(encoding, base.bounded, base.kind, "gates may stay at 1 (f_max = 1): the worst case adds no decay; " + base.reason,
                           base.rate, normaliser=self, score_bound=B, window_mass_fn=mass, limit_fn=base.limit_fn)
        prof = encoding.far_profile(1)
        if prof is None and encoding.name not in ("fire", "causal-ot"):
            return Verdict(encoding, None, "undecided", "the encoding's bias is not known to be bounded above.", normaliser=self, score_bound=B,
                           window_mass_fn=mass)
        return Verdict(
            encoding,
            True,
            "bounded",
            f"gates at most f_max = {decisive(self.f_max, 1.0)} < 1 add a decay of at least eps = {eps:.6g} per token; "
            "with a bias bounded above, e^(b(d) - eps d) is summable, and constant gates are the worst case (Theorem N5).",
            f"D_n(W) <= D of the bias b(d) - {eps:.6g} d",
            normaliser=self,
            score_bound=B,
            window_mass_fn=mass,
        )


