"""The causal OT operator as a normaliser (Theorems 2, 4, 5)."""

from __future__ import annotations

from dataclasses import dataclass

from .._registry import param
from .._validation import check_rho
from ..encodings._base import Verdict, decisive
from ._base import Normaliser, register

__all__ = ["CausalOTNormaliser"]


@register
@dataclass(frozen=True)
class CausalOTNormaliser(Normaliser):
    """The prefix-consistent causal unbalanced OT operator with balancing strength ``rho``.

    Its constant-score prior is ``otprior.ot_prior`` (Theorem 2); under content within ``B``
    the window mass is at most ``otprior.ot_dilution_bound`` (Theorem 5): diluting. Pairs
    with a positional bias are not analysed (undecided).
    """

    name = "causal-ot"

    rho: float = param(0.5, doc="balancing strength rho in [0, 1)")

    def __post_init__(self):
        object.__setattr__(self, "rho", check_rho(self.rho))

    def attention(self, logits):
        import numpy as np

        from ..causal_ot import causal_ot_attention

        z = np.asarray(logits, dtype=float)[::-1]  # key order, the query last
        n = z.size
        scores = np.zeros((n, n))
        scores[n - 1] = z
        return np.asarray(causal_ot_attention(scores, self.rho))[n - 1][::-1]

    def _window_mass(self, encoding, window, n):
        from ..ot_prior import ot_window_mass

        return ot_window_mass(window, n, self.rho)

    def classify(self, encoding, B):
        prof = encoding.far_profile(1)
        if prof is None or prof[0] != "constant-tail" or prof[1] != prof[3] or prof[2] > prof[3]:
            return Verdict(encoding, None, "undecided", "the causal OT operator with a positional bias is not analysed.", normaliser=self, score_bound=B)

        return Verdict(
            encoding,
            False,
            "diluting",
            f"the operator's constant-score prior is scale-invariant; under content within B = {B:.6g} its window mass is at most "
            f"ot_dilution_bound(W, n, rho = {decisive(self.rho, 1.0)}, B) -> 0 (Theorem 5).",
            f"1 - D_n(W) ~ H_W (Z_q / n)^{1 - self.rho:.6g}",
            normaliser=self,
            score_bound=B,
            window_mass_fn=self.mass_function(encoding),
            limit_fn=lambda W: 1.0,
        )

