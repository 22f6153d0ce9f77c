"""CABLE: token-dependent cumulative biases :math:`b(i, j) = -\\sum_{k=j+1}^{i}\\mathrm{softplus}(h_k)`.

The CABLE code computes ``b = cumsum(-softplus(h))`` over positions and adds
``b_i - b_j`` to the logit of query ``i`` and key ``j <= i`` (:func:`cable_row_bias`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._registry import param
from .._validation import DomainError
from ._base import Encoding, Verdict, decisive, nonneg, register

__all__ = ["CABLE", "cable_row_bias"]


def cable_row_bias(h):
    """The bias row of the last query from per-token pre-activations ``h`` (shape ``(..., T)``).

    Returns the bias in distance order: entry ``d`` is :math:`b_{T-1} - b_{T-1-d}` with
    :math:`b_t = -\\sum_{k\\le t}\\mathrm{softplus}(h_k)`.
    """
    h = np.asarray(h, dtype=float)
    if h.ndim < 1 or h.shape[-1] < 1 or not np.all(np.isfinite(h)):
        raise DomainError("h", f"array of shape {h.shape}", "finite pre-activations, shape (..., T), T >= 1")
    b = np.cumsum(-np.logaddexp(0.0, h), axis=-1)
    row = b[..., -1:] - b  # b_{T-1} - b_j for key j
    return row[..., ::-1]


@register
@dataclass(frozen=True, repr=False)
class CABLE(Encoding):
    """CABLE with softplus increments at least ``min_increment`` (the worst case, Lemma 11b).

    The increments depend on the tokens; the bias here is the worst case for distant mass,
    constant increments :math:`\\varepsilon`, so :math:`D_n(W) \\le D_\\infty(W) = e^{-\\varepsilon W}`
    for every admissible input. A pre-activation bound ``h >= h_min`` gives
    ``min_increment = softplus(h_min)``.
    """

    name = "cable"

    min_increment: float = param(doc="smallest softplus increment epsilon >= 0")
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)

    def __post_init__(self):
        object.__setattr__(self, "min_increment", nonneg(self.min_increment, "min_increment"))
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    def bias(self, d, n=None):
        return -self.min_increment * np.asarray(d, dtype=float)

    def _masses(self, window, n):
        from .alibi import ALiBi

        linear = ALiBi(self.min_increment)  # constant increments: the linear bias, in closed form
        return linear.window_mass(window, n), linear.distant_mass(window, n)

    def _masses_array(self, window, n):
        """Geometric closed form over an array of lengths, ``r = e^-eps``:
        ``m = expm1(-eps W) / expm1(-eps n)``, ``D = e^(-eps W) expm1(-eps (n - W)) / expm1(-eps n)``
        (each a ratio of accurately formed terms, no cancellation)."""
        e = self.min_increment
        nf = n.astype(float)
        if e == 0.0:
            return window / nf, (nf - window) / nf
        den = np.expm1(-e * nf)
        m = math.expm1(-e * window) / den
        D = math.exp(-e * window) * np.expm1(-e * (nf - window)) / den
        return m, D

    def _certified(self, window, n):
        """Theorem 16b: the worst-case prior (constant increments ``epsilon``) is ALiBi's with slope ``epsilon``:
        the geometric closed form at any ``n`` (the uniform prior when ``epsilon = 0``). The token-dependent
        prior itself is not a closed form; :math:`D_n(W) \\le e^{-\\varepsilon W}` bounds it (Lemma 11b)."""
        from .._balls import arb_from_float
        from ._certified import geometric_masses, uniform_masses

        if self.min_increment == 0.0:
            return uniform_masses(window, n)
        return geometric_masses(lambda: arb_from_float(self.min_increment), window, n, f"CABLE epsilon {self.min_increment!r}")

    def _limit_certified(self, window):
        """:math:`e^{-\\varepsilon W}` of the worst case (Theorem 16g), 1 when ``epsilon = 0``."""
        from .._balls import arb_from_float
        from ._certified import ONE, certify

        if self.min_increment == 0.0:
            return ONE
        return certify(lambda: ((-arb_from_float(self.min_increment) * window).exp(),) * 2, "CABLE limit")[0]

    def _verdict(self):
        e = self.min_increment
        if e == 0.0:
            return Verdict(self, False, "diluting", "increments may vanish (min_increment = 0): the worst case is no bias, a uniform prior.", "1 - D_n(W) = W/n")
        return Verdict(
            self,
            True,
            "bounded",
            f"softplus increments >= {decisive(e, 0.0)} make e^b(d) <= e^(-{decisive(e, 0.0)} d), summable; constant increments are the worst case.",
            "geometric, as ALiBi with slope min_increment",
            limit_fn=lambda W: math.exp(-e * W),
        )

    def far_profile(self, window):
        e = self.min_increment
        return ("minus-infinity",) if e > 0 else ("constant-tail", 0.0, -math.inf, 0.0)
