"""alpha-entmax (sparsemax at alpha = 2): sparse normalisers.

:math:`p_d = [(\\alpha-1)z_d - \\tau]_+^{1/(\\alpha-1)}` with :math:`\\tau` such that
:math:`\\sum p = 1` (computed by bisection on :math:`\\tau`, exactly by sorting for sparsemax).
Theorem N6 (``proofs/normalisers.md``): with a bias constant (``c_T``) far away and at most
``c_T`` on distant keys, the window keeps a share bounded away from zero iff its advantage
``Delta > c_T - b*``: for NoPE, any positive advantage; the limit share at advantage
``Delta`` over a flat row is :math:`\\min(1, W((\\alpha-1)\\Delta)^{1/(\\alpha-1)})`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._registry import param
from .._validation import check_real
from ..encodings._base import Verdict, decisive
from ._base import Normaliser, register, row, threshold_verdict

__all__ = ["Entmax", "entmax"]


def entmax(z, alpha):
    """:math:`\\alpha`-entmax of a 1-D row (``alpha > 1``); sparsemax exactly at ``alpha = 2``."""
    z = row(z)
    if alpha == 2.0:
        s = np.sort(z)[::-1]
        cs = np.cumsum(s)
        k = np.arange(1, z.size + 1)
        support = k[1 + k * s > cs]
        kk = support[-1]
        tau = (cs[kk - 1] - 1) / kk
        return np.maximum(z - tau, 0.0)
    x = (alpha - 1.0) * (z - z.max())
    k = 1.0 / (alpha - 1.0)
    lo, hi = -1.0, 0.0  # sum [x - tau]_+^k is >= 1 at tau = -1 (max term 1) and 0 at tau = 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.sum(np.maximum(x - mid, 0.0) ** k) >= 1.0:
            lo = mid
        else:
            hi = mid
    p = np.maximum(x - lo, 0.0) ** k
    return p / p.sum()


@register
@dataclass(frozen=True)
class Entmax(Normaliser):
    """alpha-entmax, alpha > 1 (``alpha = 2``: sparsemax)."""

    name = "entmax"

    alpha: float = param(1.5, doc="alpha > 1 (2 = sparsemax)")

    def __post_init__(self):
        object.__setattr__(self, "alpha", check_real(self.alpha, "alpha", low=1.0, low_open=True))

    def attention(self, logits):
        return entmax(logits, self.alpha)

    def classify(self, encoding, B):
        prof = encoding.far_profile(1)
        mass = self.mass_function(encoding)
        if prof is None:
            return Verdict(encoding, None, "undecided", "no analysis of this encoding's far bias under entmax.", normaliser=self, score_bound=B,
                           window_mass_fn=mass)
        if prof[0] == "minus-infinity":
            b = np.asarray(encoding.bias(np.arange(2, dtype=float)), dtype=float)
            gap = float(b[0] - b[1])
            if 2 * B <= gap:
                return Verdict(encoding, True, "bounded",
                               f"the bias falls to -oo: the support is finite and holds the nearest key, whose logit stays the largest "
                               f"since 2B = {2 * B:.6g} <= b(0) - b(1) = {gap:.6g} (Theorem N6b).",
                               "D_n(W) is constant once n passes the support", normaliser=self, score_bound=B, window_mass_fn=mass)
            return Verdict(encoding, None, "undecided",
                           f"content within B = {B:.6g} can lift a distant key above the nearest one (2B > b(0) - b(1) = {gap:.6g}); "
                           "whether the window stays in the support depends on the content.", normaliser=self, score_bound=B, window_mass_fn=mass)
        _, b_star, distant, tail = prof
        if distant > tail:
            return Verdict(encoding, None, "undecided", "distant keys before the constant part carry larger biases than it; not analysed.",
                           normaliser=self, score_bound=B, window_mass_fn=mass)
        a = self.alpha
        why = f"{decisive(a, 1.0)}-entmax gives zero weight below its threshold; a constant far bias ({tail:.6g}) holds infinitely many tied keys (Theorem N6)."
        return threshold_verdict(encoding, self, B, tail - b_star, strict=True, why=why,
                                 rate="limit window share min(1, W ((alpha - 1) Delta')^(1/(alpha - 1))) at advantage Delta' over the far keys",
                                 window_mass=mass)


