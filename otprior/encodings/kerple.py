"""KERPLE: kernelised relative positional biases, as the KERPLE code computes them.

- log variant: :math:`b(d) = -r_1\\log(1 + r_2 d)`; the code stores :math:`r_1` as ``bias_p``
  and :math:`r_2` as ``bias_a`` and clamps both below at 0.01 before use.
- power variant: :math:`b(d) = -r_1 d^{r_2}`; the code stores the coefficient :math:`r_1` as
  ``bias_a`` (clamped below at 0.01) and the exponent :math:`r_2` as ``bias_p`` (clamped to
  [0.01, 2]), the other way round from the log variant. An optional multiplicative kernel
  :math:`w(d) = e^{-\\mathrm{wei\\_a}\\,d^{\\mathrm{wei\\_p}}}` multiplies the content logits
  (``x * wei + bias``), with the same clamps.

The clamps live in :func:`kerple_clamp` alone; ``from_stored`` applies them to stored values,
as the model's forward pass does, while the constructors refuse values outside the domain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._registry import param
from .._validation import ALPHA, OFFSET, DomainError, PrecisionError, check_real
from ._base import DIRECT_MAX, Encoding, Verdict, decisive, nonneg, per_head_values, register
from .power_law import power_law_masses, power_law_masses_array, power_law_verdict

__all__ = ["KerpleLog", "KerplePower", "kerple_clamp", "kerple_clamp_bounds", "KERPLE_EPS"]

KERPLE_EPS = 1e-2  # the KERPLE code's lower clamp (self.eps)

# stored name -> (low, high) applied by the KERPLE forward pass (high None: no upper clamp)
_CLAMPS = {
    ("log", "bias_p"): (KERPLE_EPS, None),
    ("log", "bias_a"): (KERPLE_EPS, None),
    ("power", "bias_a"): (KERPLE_EPS, None),
    ("power", "bias_p"): (KERPLE_EPS, 2.0),
    ("power", "wei_a"): (KERPLE_EPS, None),
    ("power", "wei_p"): (KERPLE_EPS, 2.0),
}


def kerple_clamp_bounds(variant: str, stored_name: str) -> tuple:
    """``(low, high)`` that KERPLE's forward pass clamps a stored parameter to (``high`` None: no upper clamp).

    For code that clamps tensors itself (the reference model's differentiable forward pass);
    :func:`kerple_clamp` applies the same bounds to numbers and arrays.
    """
    if (variant, stored_name) not in _CLAMPS:
        raise DomainError("stored_name", stored_name, f"one of {sorted(n for v, n in _CLAMPS if v == variant)} for {variant}")
    return _CLAMPS[(variant, stored_name)]


def kerple_clamp(variant: str, stored_name: str, value):
    """A stored KERPLE parameter as the forward pass uses it (``clamp(min=0.01[, max=2])``).

    ``value`` may be a number or an array (one value per head); the result has the same form.
    """
    low, high = kerple_clamp_bounds(variant, stored_name)
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise DomainError(stored_name, value, "finite stored values")
    arr = np.maximum(arr, low)
    if high is not None:
        arr = np.minimum(arr, high)
    return tuple(float(v) for v in arr.ravel()) if arr.ndim else float(arr)


def _r1(v, name):
    return check_real(v, name, low=0.0)


def _r2_log(v, name):
    return check_real(v, name, low=0.0, low_open=True)


def _r2_power(v, name):
    return check_real(v, name, low=0.0, high=2.0, low_open=True)


def _opt(v, name, check):
    return None if v is None else per_head_values(v, name, check)


@register
@dataclass(frozen=True, repr=False)
class KerpleLog(Encoding):
    """KERPLE-log: :math:`b(d) = -r_1\\log(1 + r_2 d)` (bounded iff :math:`r_1 > 1`).

    Since :math:`(1 + r_2 d)^{-r_1} = r_2^{-r_1}(d + 1/r_2)^{-r_1}` this is the log-distance
    prior with exponent :math:`r_1` and offset :math:`1/r_2` (Lemma 11a). KERPLE initialises
    :math:`r_1 \\sim U(0, 2)` and does not enforce :math:`r_1 > 1`. ``r1``/``r2`` may hold one
    value per head. Build from a checkpoint with :meth:`from_stored`.
    """

    name = "kerple-log"
    _head_fields = ("r1", "r2")

    r1: float = param(doc="r1 >= 0 in -r1 log(1 + r2 d) (stored as bias_p)")
    r2: float = param(doc="r2 > 0 in -r1 log(1 + r2 d) (stored as bias_a)")
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)

    def __post_init__(self):
        r1 = per_head_values(self.r1, "r1", _r1)
        r2 = per_head_values(self.r2, "r2", _r2_log)
        r1, r2 = _broadcast(r1, r2, "r2")
        object.__setattr__(self, "r1", r1)
        object.__setattr__(self, "r2", r2)
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    @classmethod
    def from_stored(cls, *, bias_p, bias_a, logit_bound=0.0):
        """From KERPLE's stored parameters: ``r1 = clamp(bias_p)``, ``r2 = clamp(bias_a)``."""
        return cls(kerple_clamp("log", "bias_p", bias_p), kerple_clamp("log", "bias_a", bias_a), logit_bound=logit_bound)

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        if self.heads is not None:
            r1, r2 = np.asarray(self.r1)[:, None], np.asarray(self.r2)[:, None]
            return -r1 * np.log1p(r2 * d.ravel()[None, :])
        return -self.r1 * np.log1p(self.r2 * d)

    def _in_log_distance_domain(self):
        """Whether ``(r1, 1/r2)`` lies in the log-distance routine's domain (exponent up to 1e15, offset in
        [1e-300, 1e300]); outside it the masses are the midpoints of Theorem 16c's balls."""
        return self.r1 <= ALPHA.high and OFFSET.low <= 1.0 / self.r2 <= OFFSET.high

    def _masses(self, window, n):
        if not self._in_log_distance_domain():
            if self.r1 > 2.0:
                # Theorem 16c's tail bound with H >= 1 (the d = 0 term):
                # D <= (1 + r2 W)^-r1 (1 + (W + 1/r2)/(r1 - 1)); below 2^-1075 the doubles are m = 1, D = 0
                log_bound = -self.r1 * math.log1p(self.r2 * window) + math.log1p((window + 1.0 / self.r2) / (self.r1 - 1.0))
                if log_bound < -746.0:
                    return 1.0, 0.0
            out = self.mass_enclosures(window, n)
            return out.window_mass.mid, out.distant_mass.mid
        return power_law_masses(window, n, self.r1, 1.0 / self.r2)

    def _masses_array(self, window, n):
        if not self._in_log_distance_domain():
            return None
        return power_law_masses_array(window, n, self.r1, 1.0 / self.r2)

    def far_profile(self, window):
        return ("minus-infinity",) if self.r1 > 0 else ("constant-tail", 0.0, -math.inf, 0.0)

    def _balls(self):
        """``(s, a)`` as balls: :math:`(1 + r_2 d)^{-r_1} = r_2^{-r_1}(d + a)^{-r_1}` with :math:`a = 1/r_2`
        formed in Arb (not the double ``1/r2``, which the float route uses)."""
        from .._balls import arb_from_float

        return (lambda: arb_from_float(self.r1)), (lambda: 1 / arb_from_float(self.r2))

    def _certified(self, window, n):
        """Theorem 16c: Hurwitz zeta differences in ``d + 1/r2`` at any ``n`` (the uniform prior when ``r1 = 0``)."""
        from ._certified import hurwitz_masses, uniform_masses

        if self.r1 == 0.0:
            return uniform_masses(window, n)
        return hurwitz_masses(*self._balls(), window, n, f"KERPLE-log r1={self.r1!r}, r2={self.r2!r}")

    def _limit_certified(self, window):
        """Theorem 16g: :math:`\\zeta(r_1, W + 1/r_2)/\\zeta(r_1, 1/r_2)` for ``r1 > 1``; 1 (diluting) otherwise."""
        from ._certified import ONE, hurwitz_limit

        if self.r1 <= 1.0:
            return ONE
        return hurwitz_limit(*self._balls(), window, f"KERPLE-log limit r1={self.r1!r}, r2={self.r2!r}")

    def _verdict(self):
        return power_law_verdict(self, self.r1, 1.0 / self.r2, f"r1 = {decisive(self.r1, 1.0)}, r2 = {self.r2:.6g}")


@register
@dataclass(frozen=True, repr=False)
class KerplePower(Encoding):
    """KERPLE-power: :math:`b(d) = -r_1 d^{r_2}`, :math:`r_2 \\in (0, 2]` (bounded when :math:`r_1 > 0`).

    With the multiplicative kernel (``wei_a``/``wei_p`` given) the content logits are
    multiplied by :math:`w(d) = e^{-\\mathrm{wei\\_a} d^{\\mathrm{wei\\_p}}} \\in (0, 1]`: the
    content band of Theorem 10 shrinks (``|w e| <= B``), the constant-score prior (content
    zero) and the verdict are those of the bias alone.
    """

    name = "kerple-power"
    _head_fields = ("r1", "r2", "wei_a", "wei_p")

    r1: float = param(doc="coefficient r1 >= 0 in -r1 d^r2 (stored as bias_a)")
    r2: float = param(doc="exponent r2 in (0, 2] in -r1 d^r2 (stored as bias_p)")
    wei_a: float | None = param(None, doc="multiplicative kernel coefficient (> 0), or absent", kw_only=True)
    wei_p: float | None = param(None, doc="multiplicative kernel exponent in (0, 2], or absent", kw_only=True)
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)

    def __post_init__(self):
        r1 = per_head_values(self.r1, "r1", _r1)
        r2 = per_head_values(self.r2, "r2", _r2_power)
        r1, r2 = _broadcast(r1, r2, "r2")
        object.__setattr__(self, "r1", r1)
        object.__setattr__(self, "r2", r2)
        object.__setattr__(self, "wei_a", _opt(self.wei_a, "wei_a", _r2_log))
        object.__setattr__(self, "wei_p", _opt(self.wei_p, "wei_p", _r2_power))
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    @classmethod
    def from_stored(cls, *, bias_a=None, bias_p=None, wei_a=None, wei_p=None, logit_bound=0.0):
        """From KERPLE's stored parameters: ``r1 = clamp(bias_a)``, ``r2 = clamp(bias_p, max=2)``.

        An absent ``bias_a`` (``bias_p``) means coefficient (exponent) 1, as in the code
        (``bias = -diff`` / ``diff`` unpowered); an absent kernel part likewise.
        """
        r1 = 1.0 if bias_a is None else kerple_clamp("power", "bias_a", bias_a)
        r2 = 1.0 if bias_p is None else kerple_clamp("power", "bias_p", bias_p)
        if wei_a is None and wei_p is None:
            wa = wp = None
        else:
            wa = 1.0 if wei_a is None else kerple_clamp("power", "wei_a", wei_a)
            wp = 1.0 if wei_p is None else kerple_clamp("power", "wei_p", wei_p)
        return cls(r1, r2, wei_a=wa, wei_p=wp, logit_bound=logit_bound)

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        if self.heads is not None:
            r1, r2 = np.asarray(self.r1)[:, None], np.asarray(self.r2)[:, None]
            return -r1 * d.ravel()[None, :] ** r2
        return -self.r1 * d**self.r2

    def kernel(self, d):
        """The multiplicative kernel :math:`w(d)` on the content logits (ones when absent)."""
        d = np.asarray(d, dtype=float)
        if self.wei_a is None:
            return np.ones_like(d)
        return np.exp(-self.wei_a * d**self.wei_p)

    def far_profile(self, window):
        return ("minus-infinity",) if self.r1 > 0 else ("constant-tail", 0.0, -math.inf, 0.0)

    def _sums(self, window, n):
        """Balls ``(H, T)``: ``H = sum_{d<W} e^{-r1 d^r2}``, ``T = sum_{W<=d<n}`` (``n`` None: to infinity).

        Theorem 12 (``proofs/closed_form_tails.md``): incomplete-gamma integrals with the
        Euler–Maclaurin bracket (``r2 <= 1``, completely monotone) or the convexity bracket
        (``r2 > 1``); O(1) work at any ``n``.
        """
        from .._tails import stretched_sum_arb

        H = stretched_sum_arb(self.r1, self.r2, 0, window - 1)
        T = stretched_sum_arb(self.r1, self.r2, window, None if n is None else n - 1)
        return H, T

    def _mass_balls(self, window, n):
        """``(m, D, prec)`` as Arb balls: Theorem 12's brackets at doubling precision; where they stay
        wide (``r2 > 1`` with a small ``r1``: the convexity bracket is as wide as ``|f'(N)|``),
        Theorem 15's Euler–Maclaurin sums with the closed-form integral."""
        from .._balls import arb_precision
        from .._tails import stretched_sum_em

        def tight(x):
            return x.rad() <= x.mid().abs_lower() * flint_two() ** -60 or x == 0

        prec = 128
        while True:
            with arb_precision(prec):
                if prec == 128 and self.r2 > 1.0 and self.r1 < 1.0:
                    H2 = stretched_sum_em(self.r1, self.r2, 0, window - 1, prec)
                    T2 = stretched_sum_em(self.r1, self.r2, window, None if n is None else n - 1, prec)
                    if H2 is not None and T2 is not None and H2 > 0:
                        m2 = 1 / (1 + T2 / H2)
                        D2 = T2 / (H2 + T2) if T2 == 0 else 1 / (1 + H2 / T2)
                        if tight(m2) and tight(D2):
                            return m2, D2, prec
                H, T = self._sums(window, n)
                total = H + T
                m, D = H / total, T / total
                if all(tight(x) for x in (m, D)):
                    return m, D, prec
                if prec >= 1024:
                    return m, D, prec
            prec *= 2

    def _masses(self, window, n):
        if self.r1 == 0.0:
            return window / n, (n - window) / n
        if window >= n:
            return 1.0, 0.0
        m, D, _ = self._mass_balls(window, n)
        if _tight(m) and _tight(D):
            return float(m.mid()), float(D.mid())
        # the brackets did not tighten (extreme r1, r2: cancellation in the incomplete gammas)
        if n <= DIRECT_MAX:
            return super()._masses(window, n)
        raise DomainError(
            "n",
            n,
            f"an integer at most {DIRECT_MAX} for r1 = {self.r1:g}, r2 = {self.r2:g}: the closed-form bracket "
            "(Theorem 12) does not tighten at 1024 bits and direct summation stops there",
        )

    def _certified(self, window, n):
        """Theorem 12 / 15 balls (:meth:`_mass_balls`) at any ``n``; a short row summed term by term in Arb
        (Theorem 16f) where they do not tighten; the uniform prior when ``r1 = 0`` (Theorem 16a)."""
        from .._balls import arb_from_float, arb_precision, is_tight
        from ._certified import BITS, DIRECT_ROW, MassEnclosures, direct_masses_arb, uniform_masses, unit

        if self.r1 == 0.0:
            return uniform_masses(window, n)
        m, D, prec = self._mass_balls(window, n)
        with arb_precision(max(prec, 128)):
            if is_tight(m, BITS) and is_tight(D, BITS):
                return MassEnclosures(unit(m), unit(D), "incomplete gamma / Euler-Maclaurin balls (Theorems 12, 15)", False)
        if n <= DIRECT_ROW:
            r1, r2 = arb_from_float(self.r1), arb_from_float(self.r2)
            return direct_masses_arb(lambda: [-r1 * _arb_pow(d, r2) for d in range(n)], window, "KERPLE-power row")
        return self._as_bias_certified(window, n)

    def _as_bias(self):
        """The same prior as a user bias ``-r1 d^r2`` with the doubles' exact binary values (a sympy expression, so
        no decimal is re-read): its Euler-Maclaurin and envelope routes (Theorems 15, 15c) answer where Theorem
        12's brackets do not tighten (about 2% of (r1, r2) drawn log-uniformly, e.g. 0.1605, 1.2102)."""
        import sympy as sp

        from .bias import Bias

        d = sp.Symbol("d", positive=True)
        return Bias(-sp.Rational(self.r1) * d ** sp.Rational(self.r2))

    def _as_bias_certified(self, window, n):
        try:
            out = self._as_bias().mass_enclosures(window, n)
        except ValueError:
            return None
        return out._replace(route=f"{out.route} of -r1 d^r2")

    def _limit_certified(self, window):
        """Theorem 12's sums to infinity: :math:`D_\\infty(W) = T_\\infty/(H + T_\\infty)`; 1 when ``r1 = 0``;
        where those do not tighten, Theorem 15c's envelope of ``-r1 d^r2``."""
        from .._balls import arb_precision, is_tight
        from ._certified import BITS, ONE, unit

        if self.r1 == 0.0:
            return ONE
        _, D, prec = self._mass_balls(window, None)
        with arb_precision(max(prec, 128)):
            if is_tight(D, BITS):
                return unit(D)
        try:
            return self._as_bias().limit_enclosure(window)
        except ValueError:
            return None

    def _uncertified_reason(self):
        return "Theorem 12's brackets do not tighten at 1024 bits for these r1, r2"

    def _verdict(self):
        r1, r2 = self.r1, self.r2
        if r1 == 0.0:
            return Verdict(self, False, "diluting", "r1 = 0: no bias, uniform prior.", "1 - D_n(W) = W/n")

        def limit(W):
            D = self._mass_balls(W, None)[1]
            if not _tight(D):
                raise PrecisionError(
                    f"D_oo(W) for r1 = {r1:g}, r2 = {r2:g}: the closed-form bracket (Theorem 12) does not "
                    "tighten at 1024 bits"
                )
            return float(D.mid())

        from .._balls import arb_precision
        from .._tails import stretched_sum_arb

        with arb_precision(128):
            S = float(stretched_sum_arb(r1, r2, 0, None).mid())
        kern = "" if self.wei_a is None else " The multiplicative kernel only scales content logits by w(d) in (0, 1]."
        return Verdict(
            self,
            True,
            "bounded",
            f"e^(-r1 d^r2) with r1 = {decisive(r1, 0.0)} > 0, r2 = {decisive(r2, 0.0)} > 0 decays faster than any power "
            f"of d: summable.{kern}",
            # D_oo - D_n = m_oo R_n / S_n with R_n = sum_{d>=n} e^(-r1 d^r2) ~ n^(1-r2) e^(-r1 n^r2) / (r1 r2)
            f"D_oo(W) - D_n(W) ~ m_oo(W) n^(1-r2) e^(-r1 n^r2) / (r1 r2 S), S = sum_d e^(-r1 d^r2) = {S:.6g} "
            "(Theorem 12)",
            limit_fn=limit,
        )


def _arb_pow(d, r2):
    """:math:`d^{r_2}` as a ball, ``0^{r_2} = 0`` (``r2 > 0``)."""
    import flint

    return flint.arb(0) if d == 0 else flint.arb(d) ** r2


def _tight(x):
    return x.is_finite() and (x == 0 or x.rad() <= x.mid().abs_lower() * flint_two() ** -50)


def flint_two():
    import flint

    return flint.arb(2)


def _broadcast(a, b, name_b):
    """Pair per-head tuples (or a scalar with a tuple)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        ta = a if isinstance(a, tuple) else (a,) * len(b)
        tb = b if isinstance(b, tuple) else (b,) * len(ta)
        if len(ta) != len(tb):
            raise DomainError(name_b, f"{len(tb)} values", f"one value per head ({len(ta)})")
        return ta, tb
    return a, b


