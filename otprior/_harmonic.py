"""Generalised harmonic numbers and the normaliser Z_q (numeric core)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
from scipy.special import gammaln

# Below this many terms the sum is taken directly (pairwise summation in numpy,
# relative error O(log W) ulps); above it through the Hurwitz zeta function.
_DIRECT_TERMS = 1 << 20


def generalized_harmonic(W: int, a: float) -> float:
    """:math:`H_W^{(a)} = \\sum_{k=1}^{W} k^{-a}` for an integer ``W >= 1`` and real ``a >= 0``.

    Direct pairwise summation for ``W <= 2**20``; otherwise
    ``zeta(a) - zeta(a, W + 1)`` (Hurwitz, analytic continuation for ``a < 1``) or
    ``harmonic(W)`` at ``a = 1``, evaluated by mpmath with 30 guard digits so the
    cancellation between the two zeta values costs no double-precision digit.
    """
    if W <= _DIRECT_TERMS:
        k = np.arange(1, W + 1, dtype=float)
        return float(np.sum(k ** (-a)))
    with mpmath.workdps(50):
        if a == 1.0:
            return float(mpmath.harmonic(W))
        return float(mpmath.zeta(a) - mpmath.zeta(a, W + 1))


def log_normaliser(q: float) -> float:
    """:math:`\\log Z_q`, :math:`Z_q = \\int_0^\\infty e^{-s^q/q}\\,ds = q^{1/q-1}\\Gamma(1/q)` (Lemma 3)."""
    return (1.0 / q - 1.0) * math.log(q) + float(gammaln(1.0 / q))
