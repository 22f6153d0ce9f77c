"""Stick-breaking attention: each key, nearest first, takes a sigmoid share of what is left.

:math:`\\beta_d = \\sigma(z_d)`, :math:`a_d = \\beta_d\\prod_{k<d}(1-\\beta_k)` in distance order
(entry 0 the nearest key); the remainder :math:`\\prod_{k<n}(1-\\beta_k)` is assigned to no key.
Theorem N4 (``proofs/normalisers.md``): the window's share is
:math:`1 - \\prod_{d<W}(1-\\sigma(z_d))`, which does not depend on ``n``; with logits in
:math:`[-B', B']` it is at least :math:`1 - (1 - \\sigma(-B'))^W` at every length. Every pair
with a finite bias on the window is bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit

from ..encodings._base import Verdict
from ._base import Normaliser, register, row, softmax_verdict

__all__ = ["StickBreaking", "stick_breaking_window_floor"]


def stick_breaking_window_floor(window, logit_bound):
    """:math:`1 - (1 - \\sigma(-B))^W`: the least window share with logits in ``[-B, B]`` (Theorem N4)."""
    return -math.expm1(window * float(log_expit(logit_bound)))  # 1 - sigma(B)^W, sigma(B) = 1 - sigma(-B)


@register
@dataclass(frozen=True)
class StickBreaking(Normaliser):
    """Stick-breaking attention (nearest key first); the leftover mass goes to no key."""

    name = "stick-breaking"

    def attention(self, logits):
        z = row(logits)
        log_keep = np.concatenate([[0.0], np.cumsum(log_expit(-z))[:-1]])  # log prod_{k<d} (1 - beta_k)
        return np.exp(log_expit(z) + log_keep)

    def _window_mass(self, encoding, window, n):
        b = np.asarray(encoding.bias(np.arange(window, dtype=float), n), dtype=float)
        return float(-np.expm1(np.sum(log_expit(-b))))

    def classify(self, encoding, B):
        b = np.asarray(encoding.bias(np.arange(1, dtype=float), 1), dtype=float)
        worst = float(b[0]) - B  # the nearest key's worst logit (content - B)
        share = float(expit(worst))
        return Verdict(
            encoding,
            True,
            "bounded",
            "stick-breaking gives the nearest keys their share before any distant key: the window keeps "
            f"1 - prod_(d<W) (1 - sigma(b(d) + e_d)) >= sigma(b(0) - B) = {share:.6g} at every length (Theorem N4).",
            "m_n(W) does not depend on n",
            normaliser=self,
            score_bound=B,
            window_mass_fn=self.mass_function(encoding),
            limit_fn=lambda W: self._limit(encoding, W),
        )

    def _limit(self, encoding, W):
        """:math:`D_\\infty(W) = P_W - P_\\infty`, :math:`P_k = \\prod_{d<k}(1 - \\sigma(b(d)))` (Theorem N4).

        :math:`P_\\infty = 0` exactly when :math:`\\sum_d \\sigma(b(d)) = \\infty`, i.e. when
        :math:`e^{b}` is not summable (eventually constant biases, diluting power laws); for a
        summable bias :math:`P_\\infty > 0` is not computed here.
        """
        from .._validation import PrecisionError

        p_w = float(np.exp(np.sum(log_expit(-np.asarray(encoding.bias(np.arange(W, dtype=float), W), dtype=float)))))
        prof = encoding.far_profile(1)
        summable = softmax_verdict(encoding, 0.0).kind == "bounded"
        if (prof is not None and prof[0] == "constant-tail") or not summable:
            return p_w
        raise PrecisionError("D_oo(W) of stick-breaking with a summable bias: the infinite product P_oo > 0 is not computed")
