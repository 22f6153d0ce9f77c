"""The causal OT operator's constant-score prior, seen as an encoding (Theorems 2, 4, 5)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._registry import param
from .._validation import check_rho
from ._base import Encoding, Verdict, decisive, nonneg, register

__all__ = ["CausalOT"]


@register
@dataclass(frozen=True, repr=False)
class CausalOT(Encoding):
    """The causal OT operator with balancing strength ``rho < 1`` (Theorems 4, 5: diluting)."""

    name = "causal-ot"

    rho: float = param(doc="balancing strength rho in [0, 1)")
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)

    _EXACT_N = 65536  # the prior itself up to here (D_n(W) summed directly); ot_window_mass beyond

    def __post_init__(self):
        object.__setattr__(self, "rho", check_rho(self.rho))
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    def bias(self, d, n=None):
        from ..ot_prior import ot_prior

        d = np.asarray(d, dtype=np.int64)
        n = int(d.max()) + 1 if n is None else int(n)
        return np.log(ot_prior(n, self.rho))[d]

    def _masses(self, window, n):
        from ..ot_prior import ot_prior, ot_window_mass

        if n > self._EXACT_N:
            # any length: ot_window_mass's own rule picks the exact route or the bounds route
            # (proofs/ot_asymptotics.md, Lemmas 4.1 and 4.2); here m_n(W) < H_W n^(rho-1) is small,
            # so D_n(W) = 1 - m_n(W) loses no relative accuracy
            m = float(ot_window_mass(window, n, self.rho))
            return m, 1.0 - m
        prior = ot_prior(n, self.rho)
        return float(np.sum(prior[:window])), float(np.sum(prior[window:]))

    def _certified(self, window, n):
        """:func:`otprior.ot_window_mass` with ``certified=True`` (its own rule picks the exact recurrence
        or Theorem 4's bounds, ``proofs/ot_asymptotics.md``); :math:`D = 1 - m`, its ends rounded outward."""
        import math

        from .._balls import Enclosure
        from ..ot_prior import ot_window_mass
        from ._certified import MassEnclosures

        e = ot_window_mass(window, n, self.rho, certified=True)
        lo, hi = max(e.lo, 0.0), min(e.hi, 1.0)
        # 1 - x rounded to nearest is within half an ulp of the exact difference: one step outward bounds it
        Dlo, Dhi = max(math.nextafter(1.0 - hi, -math.inf), 0.0), min(math.nextafter(1.0 - lo, math.inf), 1.0)
        m = Enclosure(lo=lo, hi=hi, mid=e.mid, rad=e.rad)
        D = Enclosure(lo=Dlo, hi=Dhi, mid=1.0 - e.mid, rad=math.nextafter(max(Dhi - (1.0 - e.mid), (1.0 - e.mid) - Dlo), math.inf))
        return MassEnclosures(m, D, "ot_window_mass(certified=True)", False)

    def _limit_certified(self, window):
        from ._certified import ONE

        return ONE  # diluting: m_t(W) <= H_W t^-(1 - rho) -> 0 (Theorem 4(iii))

    def _verdict(self):
        q = 1.0 - self.rho
        return Verdict(
            self,
            False,
            "diluting",
            f"the operator's prior is scale-invariant (depends on d/n): window mass H_W^(rho) (Z_q/n)^(1-rho) -> 0 "
            f"for rho = {decisive(self.rho, 1.0)} < 1.",
            f"1 - D_n(W) ~ H_W (Z_q / n)^{q:.6g}",
        )
