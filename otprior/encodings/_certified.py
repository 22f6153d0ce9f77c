"""Proved enclosures of the registered encodings' masses: the shared ball machinery (Theorem 16).

Every family's certified route forms the two sums of its constant-score prior,
:math:`H = \\sum_{d<W} e^{b(d)}` and :math:`T = \\sum_{W\\le d<n} e^{b(d)}` (or their ratio), as Arb
balls in a closed form (``proofs/closed_form_tails.md``, Theorem 16), at a precision raised until
both masses have relative radius below :math:`2^{-55}`, and returns outward-rounded
:class:`~otprior._balls.Enclosure` ends clipped to :math:`[0, 1]`. The OT prior is the exception: its
masses come from :func:`otprior.ot_window_mass` (``certified=True``), whose enclosures are as wide as
Theorem 4's bounds beyond the exact route (relative widths up to about 1e-2), and its distant mass is
``1 - m`` rounded outward.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import NamedTuple

import flint

from .._balls import Enclosure, arb_precision, enclosure_from_arb, is_tight
from .._validation import PrecisionError

__all__ = ["MassEnclosures", "BITS", "MAX_LENGTH", "ONE", "unit", "exact", "masses_from_sums", "certify", "hurwitz_sum",
           "geometric_masses", "uniform_masses"]

BITS = 55  # relative radius of every closed-form certified mass: at most 2^-55 (not the OT prior's)
START_PREC, MAX_PREC = 96, 4096
MAX_LENGTH = int(1e300)  # the longest row a certified route accepts (the double 1e300 as an exact integer)
_DIRECT = 64  # ranges shorter than this are summed term by term in Arb
DIRECT_ROW = 4096  # rows up to this length may be summed term by term in Arb (Theorem 16f)
ONE = Enclosure(lo=1.0, hi=1.0, mid=1.0, rad=0.0)  # D_oo(W) = 1 of a diluting prior, exactly
ZERO = Enclosure(lo=0.0, hi=0.0, mid=0.0, rad=0.0)


class MassEnclosures(NamedTuple):
    """Proved enclosures of an encoding's masses at one length (``Encoding.mass_enclosures``).

    Also a user bias's result (``BiasMasses`` is this type): ``window_mass`` and
    ``distant_mass`` (:class:`~otprior._balls.Enclosure`), ``route`` (the closed form that
    answered, naming its theorem) and ``exact`` (True where the value is a finite sum of terms
    each enclosed directly, with no tail bound).
    """

    window_mass: Enclosure
    distant_mass: Enclosure
    route: str
    exact: bool


def unit(x) -> Enclosure:
    """An Arb ball of a mass as an outward-rounded enclosure clipped to [0, 1] (a mass lies there)."""
    if not x.is_finite():
        raise PrecisionError("a mass ball is not finite")
    e = enclosure_from_arb(x)
    return dataclasses.replace(e, lo=min(max(e.lo, 0.0), 1.0), hi=min(max(e.hi, 0.0), 1.0))


def exact(q: Fraction) -> Enclosure:
    """The rational ``q`` in [0, 1] as an enclosure: a ball of the exact fraction, rounded outward."""
    f = float(q)
    if Fraction(f) == q:  # representable: the enclosure is the point itself
        return Enclosure(lo=f, hi=f, mid=f, rad=0.0)
    with arb_precision(START_PREC):
        return unit(flint.arb(flint.fmpq(q.numerator, q.denominator)))


def masses_from_sums(H, T):
    """``(m, D)`` balls from the window sum ``H > 0`` and the distant sum ``T >= 0``:
    ``m = 1/(1 + T/H)`` and ``D = 1/(1 + H/T)``, each a ratio of positive balls (no cancellation)."""
    m = 1 / (1 + T / H)
    D = T / (H + T) if T == 0 else 1 / (1 + H / T)
    return m, D


def certify(balls, what):
    """Run ``balls()`` (returning ``(m, D)`` Arb balls, or ``None``) at 96, 192, ... bits up to
    ``MAX_PREC`` until both are tight to ``2^-BITS``; the pair of enclosures, or ``PrecisionError``
    naming ``what``."""
    prec = START_PREC
    while True:
        with arb_precision(prec):
            pair = balls()
            if pair is not None and all(is_tight(x, BITS) for x in pair):
                return unit(pair[0]), unit(pair[1])
        if prec >= MAX_PREC:
            raise PrecisionError(f"{what}: the closed form's balls stay wider than 2^-{BITS} at {MAX_PREC} bits")
        prec *= 2


def hurwitz_sum(s, a, d0: int, d1):
    """A ball containing :math:`\\sum_{d=d_0}^{d_1}(d + a)^{-s}` for balls ``s`` (real) and ``a > 0``;
    ``d1`` None: to infinity (``s > 1``). Call inside :func:`otprior._balls.arb_precision`.

    Theorem 16c (``proofs/closed_form_tails.md``): term by term below 64 terms; else the Hurwitz
    zeta difference :math:`\\zeta(s, d_0 + a) - \\zeta(s, d_1 + 1 + a)` (every real ``s != 1``), the
    digamma difference at ``s = 1``; where Arb's zeta is not finite (huge ``s``), the first terms and
    the tail bound :math:`0 \\le \\sum_{d\\ge D}(d+a)^{-s} \\le (D+a)^{-s}(1 + (D+a)/(s-1))` (``s > 1``),
    taken at once for ``s > 2^30``.
    """
    if d1 is not None and d1 < d0:
        return flint.arb(0)
    if d1 is not None and d1 - d0 < _DIRECT:
        return sum(((flint.arb(d) + a) ** (-s) for d in range(d0, d1 + 1)), flint.arb(0))
    lo = flint.arb(d0) + a
    if s == 1:
        if d1 is None:
            return flint.arb("nan")
        return (flint.arb(d1 + 1) + a).digamma() - lo.digamma()
    if not (s > 2**30):  # beyond, Arb's zeta is slow to give up; the first terms and the tail bound decide at once
        value = s.zeta(lo) if d1 is None else s.zeta(lo) - s.zeta(flint.arb(d1 + 1) + a)
        if value.is_finite() or not (s > 1):
            return value
    # Arb's zeta out of range: direct terms until the tail bound is below 2^-prec of the sum
    eps = flint.arb(2) ** (-flint.ctx.prec)
    head, d = flint.arb(0), d0
    one = flint.arb(1)
    while d1 is None or d <= d1:
        x = flint.arb(d) + a
        term = x ** (-s)
        bound = term * (one + x / (s - one))
        if d > d0 and bound < eps * head:
            half = bound.upper() / 2
            return head + flint.arb(half, half)  # the tail lies in [0, bound]
        head += term
        d += 1
        if d - d0 > 4 * flint.ctx.prec:
            return flint.arb("nan")
    return head


def uniform_masses(window: int, n: int) -> MassEnclosures:
    """Theorem 16a: a constant bias gives :math:`m_n(W) = W/n` and :math:`D_n(W) = (n - W)/n` exactly."""
    return MassEnclosures(exact(Fraction(window, n)), exact(Fraction(n - window, n)), "exact rational W/n (Theorem 16a)", True)


def geometric_masses(slope, window: int, n: int, what: str) -> MassEnclosures:
    """Theorem 16b: the linear bias :math:`-\\mu d`, ``slope() -> mu`` a ball (``mu > 0``), in closed form:

    .. math:: m_n(W) = \\frac{\\operatorname{expm1}(-\\mu W)}{\\operatorname{expm1}(-\\mu n)},\\qquad
              D_n(W) = \\frac{e^{-\\mu W}\\operatorname{expm1}(-\\mu(n - W))}{\\operatorname{expm1}(-\\mu n)},

    each a ratio of balls of one sign (no cancellation), at any ``n``.
    """
    def balls():
        mu = slope()
        den = (-mu * n).expm1()
        m = (-mu * window).expm1() / den
        D = (-mu * window).exp() * (-mu * (n - window)).expm1() / den
        return m, D

    m, D = certify(balls, what)
    return MassEnclosures(m, D, "geometric closed form (Theorem 16b)", False)


def direct_masses_arb(row, window: int, what: str) -> MassEnclosures:
    """Theorem 16f: every term of a short row summed in Arb, ``row() -> [b(0), ..., b(n-1)]`` as balls."""
    def balls():
        w = [b.exp() for b in row()]
        H = sum(w[:window], flint.arb(0))
        T = sum(w[window:], flint.arb(0))
        return masses_from_sums(H, T)

    m, D = certify(balls, what)
    return MassEnclosures(m, D, "direct Arb sum (Theorem 16f)", True)


def hurwitz_masses(s, a, window: int, n: int, what: str) -> MassEnclosures:
    """Theorem 16c: weights :math:`(d + a)^{-s}` (``s``, ``a`` callables returning balls), :math:`H` and
    :math:`T` by :func:`hurwitz_sum` (each a sum of positive terms, enclosed without subtracting masses)."""
    def balls():
        ss, aa = s(), a()
        return masses_from_sums(hurwitz_sum(ss, aa, 0, window - 1), hurwitz_sum(ss, aa, window, n - 1))

    m, D = certify(balls, what)
    return MassEnclosures(m, D, "Hurwitz zeta differences (Theorem 16c)", False)


def hurwitz_limit(s, a, window: int, what: str) -> Enclosure:
    """Theorem 16g: :math:`D_\\infty(W) = \\zeta(s, W + a)/\\zeta(s, a)` for ``s > 1``, as ``1/(1 + H/T_\\infty)``."""
    def balls():
        ss, aa = s(), a()
        H, T = hurwitz_sum(ss, aa, 0, window - 1), hurwitz_sum(ss, aa, window, None)
        D = 1 / (1 + H / T)
        return D, D

    return certify(balls, what)[0]
