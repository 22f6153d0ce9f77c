"""Softmax, and softmax with a constant temperature (YaRN's attention factor)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.special import softmax as _softmax

from .._registry import param
from .._validation import check_real
from ..encodings._base import decisive
from ._base import Normaliser, register, row, softmax_verdict

__all__ = ["Softmax", "Temperature"]


@register
@dataclass(frozen=True)
class Softmax(Normaliser):
    """:math:`a_d = e^{z_d} / \\sum_k e^{z_k}`: the pair's verdict is the encoding's (Theorem 11)."""

    name = "softmax"

    def attention(self, logits):
        return _softmax(row(logits))

    def window_mass(self, encoding, window, n):
        return encoding.window_mass(window, n)

    def classify(self, encoding, B):
        return replace(softmax_verdict(encoding, B), normaliser=self)


@register
@dataclass(frozen=True)
class Temperature(Normaliser):
    """Logits multiplied by a constant ``factor`` (YaRN: ``(0.1 ln s + 1)^2``).

    Theorem N2 (``proofs/normalisers.md``): ``softmax(a z)`` with bias ``b`` is softmax with bias
    ``a b`` and content bound ``a B``; the verdict is that of the scaled bias (for the
    encodings here, whose summability does not change under a positive factor on a power
    law only when ``a alpha`` crosses 1: the scaled encoding is classified directly).
    """

    name = "temperature"

    factor: float = param(1.0, doc="positive factor a on the logits")

    def __post_init__(self):
        object.__setattr__(self, "factor", check_real(self.factor, "factor", low=0.0, low_open=True))

    def attention(self, logits):
        return _softmax(self.factor * row(logits))

    def _window_mass(self, encoding, window, n):
        return float(np.sum(self.attention(encoding.log_weights(n))[:window]))

    def classify(self, encoding, B):
        from ..encodings import CABLE, ALiBi, KerpleLog, KerplePower, LogDistance
        from ..encodings._base import Verdict

        a = self.factor
        base = softmax_verdict(encoding, B)
        prof = encoding.far_profile(1)
        mass = self.mass_function(encoding)
        if isinstance(encoding, (LogDistance, KerpleLog)):
            alpha = a * (encoding.alpha if isinstance(encoding, LogDistance) else encoding.r1)
            kind = "bounded" if alpha > 1 else "diluting"
            why = f"a factor a = {a:.6g} turns the exponent into a alpha = {decisive(alpha, 1.0)}, {'>' if alpha > 1 else '<='} 1."
        elif isinstance(encoding, (ALiBi, CABLE, KerplePower)) or (prof is not None and prof[0] == "constant-tail"):
            kind = base.kind  # e^(a b) is summable iff e^b is, for these exponential or eventually constant biases
            why = f"a factor a = {a:.6g} on the logits keeps the verdict: " + base.reason
        else:
            return Verdict(encoding, None, "undecided", f"no analysis of this encoding under a factor a = {a:.6g} on the logits.",
                           normaliser=self, score_bound=B, window_mass_fn=mass)
        # score_bound keeps one meaning for every normaliser: the bound B on the content of the logits z;
        # the scaled logits a z carry content within a B (Theorem N2), which the reason states
        why += f" (content within B = {B:.6g} of a constant becomes a B = {a * B:.6g} after the factor.)"
        return Verdict(encoding, kind == "bounded", kind, why, base.rate if a == 1.0 else None, normaliser=self,
                       score_bound=B, window_mass_fn=mass, limit_fn=(lambda W: 1.0) if kind == "diluting" else None)
