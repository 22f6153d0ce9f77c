"""Power-law biases: the log-distance prior :math:`b(d) = -\\alpha\\log(d + o)`.

KERPLE-log (``kerple.py``) reduces to it (Lemma 11a, ``proofs/classification.md``); the
masses come from the certified log-distance routines (Theorem 7, ``proofs/log_distance_prior.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from .._registry import param
from .._validation import ALPHA, OFFSET
from ._base import Encoding, Verdict, decisive, nonneg, per_head_values, register

__all__ = ["LogDistance", "power_law_masses", "power_law_masses_array", "power_law_verdict"]


def power_law_masses(window, n, alpha, offset):
    """``(m_n(W), D_n(W))`` of :math:`(d + o)^{-\\alpha}`, through ``otprior.log_distance`` (Theorem 7)."""
    from ..log_distance import distant_mass, window_mass

    if alpha == 0.0:
        return window / n, (n - window) / n
    return window_mass(window, n, alpha, offset=offset), distant_mass(window, n, alpha, offset=offset)


def power_law_masses_array(window, n, alpha, offset):
    """``(m, D)`` arrays over an int64 array ``n``: the vectorised log-distance route (Theorem 7)."""
    from ..log_distance import _fast_arrays, _float_masses_many

    if alpha == 0.0:
        return window / n, (n - window) / n
    fast = _fast_arrays(window, n, alpha, offset)
    return None if fast is None else _float_masses_many(*fast)


def power_law_verdict(encoding, alpha, offset, label) -> Verdict:
    """Theorem 11 for :math:`e^{b(d)} \\propto (d + o)^{-\\alpha}`: bounded iff ``alpha > 1``.

    The exponent is printed with the digits that decide the comparison with 1
    (:func:`decisive`), so that the sentence is true as printed.
    """
    a = decisive(alpha, 1.0)
    o = decisive(offset, 0.0)
    if alpha > 1.0:

        def limit(W):
            ctx = mpmath.MPContext()
            ctx.dps = 30
            return ctx.zeta(ctx.mpf(alpha), ctx.mpf(W) + ctx.mpf(offset)) / ctx.zeta(ctx.mpf(alpha), ctx.mpf(offset))

        return Verdict(
            encoding,
            True,
            "bounded",
            f"{label}: e^b(d) = (d + {o})^(-{a}) up to a constant, summable since the exponent {a} > 1; "
            "D_oo(W) = zeta(a, W + o) / zeta(a, o).",
            f"D_oo(W) - D_n(W) ~ n^-({decisive(alpha - 1.0, 0.0)}): slow when the exponent is near 1",
            limit_fn=limit,
        )
    if alpha == 1.0:
        rate = "1 - D_n(W) ~ H_W / log n"
        why = f"not summable since the exponent {a} = 1 (harmonic series)"
    else:
        rate = f"1 - D_n(W) ~ n^-({decisive(1.0 - alpha, 0.0)})"
        why = f"not summable since the exponent {a} < 1"
    return Verdict(encoding, False, "diluting", f"{label}: e^b(d) = (d + {o})^(-{a}) up to a constant, {why}.", rate)


def _alpha(v, name):
    return ALPHA.check(v, name)  # the one domain of alpha (otprior._validation), as the mass routines check it


def _offset(v, name):
    return OFFSET.check(v, name)


@register
@dataclass(frozen=True, repr=False)
class LogDistance(Encoding):
    """The log-distance bias :math:`b(d) = -\\alpha\\log(d + o)` (bounded iff :math:`\\alpha > 1`).

    ``alpha`` may hold one exponent per head.
    """

    name = "log-distance"
    _head_fields = ("alpha",)

    alpha: float = param(doc="exponent alpha > 0 (bias -alpha log(d + offset)); one per head allowed")
    offset: float = param(1.0, doc="offset o > 0", kw_only=True)
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)

    def __post_init__(self):
        object.__setattr__(self, "alpha", per_head_values(self.alpha, "alpha", _alpha))
        object.__setattr__(self, "offset", _offset(self.offset, "offset"))
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    def bias(self, d, n=None):
        a = np.asarray(self.alpha, dtype=float)
        d = np.asarray(d, dtype=float)
        if a.ndim:
            return -a[:, None] * np.log(d.ravel() + self.offset)[None, :]
        return -a * np.log(d + self.offset)

    def _masses(self, window, n):
        return power_law_masses(window, n, self.alpha, self.offset)

    def _masses_array(self, window, n):
        return power_law_masses_array(window, n, self.alpha, self.offset)

    def _certified(self, window, n):
        """Theorem 8's Hurwitz zeta balls (:func:`otprior.log_distance.window_mass_bounds` and
        :func:`~otprior.log_distance.distant_mass_bounds`), relative width at most :math:`2^{-61}`."""
        from ..log_distance import distant_mass_bounds, window_mass_bounds
        from ._certified import MassEnclosures

        m = window_mass_bounds(window, n, self.alpha, offset=self.offset)
        D = distant_mass_bounds(window, n, self.alpha, offset=self.offset)
        return MassEnclosures(m, D, "Hurwitz zeta balls (Theorem 8)", False)

    def _limit_certified(self, window):
        """Theorem 16g: :math:`\\zeta(\\alpha, W + o)/\\zeta(\\alpha, o)` for ``alpha > 1``; 1 (diluting) otherwise."""
        from .._balls import arb_from_float
        from ._certified import ONE, hurwitz_limit

        if self.alpha <= 1.0:
            return ONE
        return hurwitz_limit(lambda: arb_from_float(self.alpha), lambda: arb_from_float(self.offset), window,
                             f"log-distance limit alpha={self.alpha!r}")

    def _verdict(self):
        return power_law_verdict(self, self.alpha, self.offset, f"alpha = {decisive(self.alpha, 1.0)}")

    def far_profile(self, window):
        return ("minus-infinity",)
