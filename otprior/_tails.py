"""Sums of stretched exponentials :math:`\\sum_{d=a}^{b} e^{-r_1 d^{r_2}}` at any length, in Arb balls.

Theorem 12 (``proofs/closed_form_tails.md``). With :math:`f(x) = e^{-r_1 x^{r_2}}`,
:math:`s = 1/r_2`:

* the integral is a difference of upper incomplete gamma functions,
  :math:`\\int_a^b f = (\\Gamma(s, r_1 a^{r_2}) - \\Gamma(s, r_1 b^{r_2})) / (r_2 r_1^{s})`
  (substitute :math:`u = r_1 x^{r_2}`), and :math:`\\int_a^\\infty f = \\Gamma(s, r_1 a^{r_2}) / (r_2 r_1^s)`;
* for :math:`0 < r_2 \\le 1`, ``f`` is completely monotone on :math:`x > 0` (``e^{-u}``
  composed with the Bernstein function :math:`r_1 x^{r_2}`), so every even derivative is
  positive and Theorem 8's Euler–Maclaurin bracket (Steffensen's bound; it uses only the
  sign of the even derivatives) encloses the sum between the truncations of orders ``p``
  and ``p + 1``; the odd derivatives at the ends are the Taylor coefficients of ``f`` as an
  Arb power series;
* for :math:`1 < r_2 \\le 2`, ``f`` is decreasing on :math:`x > 0` and convex for
  :math:`x \\ge x_c = ((r_2 - 1)/(r_1 r_2))^{1/r_2}`; there the trapezoid rule over-, the
  midpoint rule under-estimates the integral, so
  :math:`\\int_N^b f + (f(N) + f(b))/2 \\le \\sum_{d=N}^{b} f(d) \\le \\int_{N-1/2}^{b+1/2} f`.

Every quantity is an Arb ball (``otprior._balls``); ``b = None`` means :math:`b = \\infty`.
"""

from __future__ import annotations

import math

import flint

from ._balls import arb_from_float
from ._power_sums import _B2J_FRACTIONS

__all__ = ["stretched_sum_arb", "stretched_integral_arb", "stretched_sum_em"]

_HEAD = 64  # terms added directly before the Euler–Maclaurin / convexity bracket
_ORDER = 6
_MAX_HEAD = 4096


def _f(r1, r2, x):
    if x == 0:
        return flint.arb(1)
    return (-r1 * x**r2).exp()


def stretched_integral_arb(r1, r2, a, b):
    """:math:`\\int_a^b e^{-r_1 x^{r_2}}dx` as a ball (``b = None``: to infinity), ``a >= 0``."""
    s = 1 / r2
    scale = r2 * r1**s
    za = r1 * a**r2 if a > 0 else flint.arb(0)
    if b is None:
        return (za.gamma_upper(s) if a > 0 else s.gamma()) / scale
    zb = r1 * b**r2
    if zb <= s:
        # both ends below the peak of u^(s-1) e^-u: the lower functions, ~ z^s / s, do not cancel
        return (zb.gamma_lower(s) - (za.gamma_lower(s) if a > 0 else flint.arb(0))) / scale
    return ((za.gamma_upper(s) if a > 0 else s.gamma()) - zb.gamma_upper(s)) / scale


def _odd_derivatives(r1, r2, x, order):
    """``f^(2j-1)(x)``, ``j = 1 .. order + 1``, from the Taylor coefficients of ``f`` at ``x``."""
    terms = 2 * order + 3
    # python-flint truncates every series to flint.ctx.cap terms (10 by default): raised for the
    # call (the caller holds arb_precision's lock), else the coefficients past 9 would read as 0
    old = flint.ctx.cap
    flint.ctx.cap = max(old, terms)
    try:
        ser = flint.arb_series([x, 1], prec=terms)
        fs = (-r1 * (ser.log() * r2).exp()).exp()
        coeffs = fs.coeffs()
    finally:
        flint.ctx.cap = old
    out = []
    for j in range(1, order + 2):
        m = 2 * j - 1
        c = coeffs[m] if m < len(coeffs) else flint.arb(0)
        out.append(c * math.factorial(m))
    return out


def stretched_sum_arb(r1f: float, r2f: float, a: int, b: int | None) -> flint.arb:
    """A ball containing :math:`\\sum_{d=a}^{b} e^{-r_1 d^{r_2}}` (``b = None``: to infinity).

    Call inside :func:`otprior._balls.arb_precision`. ``r1 > 0``, ``0 < r2 <= 2``, ``a >= 0``.
    O(1) work in ``b - a`` (at most ``_HEAD`` direct terms, or up to ``_MAX_HEAD`` before the
    convex region when ``r2 > 1``).
    """
    r1, r2 = arb_from_float(r1f), arb_from_float(r2f)
    if b is not None and b < a:
        return flint.arb(0)
    head_to = a + _HEAD
    if r2f > 1.0:
        # convex from x_c on: the bracket starts at N with N - 1/2 >= x_c
        xc = ((r2f - 1.0) / (r1f * r2f)) ** (1.0 / r2f)
        head_to = max(head_to, min(a + _MAX_HEAD, int(math.ceil(xc + 0.5)) + 1))
    last = head_to - 1 if b is None else min(b, head_to - 1)
    total = flint.arb(0)
    for d in range(a, last + 1):
        total += _f(r1, r2, flint.arb(d))
    if b is not None and last == b:
        return total
    N = last + 1
    xN = flint.arb(N)
    if r2f <= 1.0:
        # Theorem 8's bracket for a completely monotone f
        est = stretched_integral_arb(r1, r2, xN, None if b is None else flint.arb(b))
        fa = _f(r1, r2, xN)
        fb = flint.arb(0) if b is None else _f(r1, r2, flint.arb(b))
        est += (fa + fb) / 2
        da = _odd_derivatives(r1, r2, xN, _ORDER)
        db = [flint.arb(0)] * (_ORDER + 1) if b is None else _odd_derivatives(r1, r2, flint.arb(b), _ORDER)
        for j in range(1, _ORDER + 1):
            p, q = _B2J_FRACTIONS[j - 1]
            est += flint.arb(p) / q * (db[j - 1] - da[j - 1])
        p, q = _B2J_FRACTIONS[_ORDER]
        nxt = flint.arb(p) / q * (db[_ORDER] - da[_ORDER])
        return total + est.union(est + nxt)
    xc = ((r2f - 1.0) / (r1f * r2f)) ** (1.0 / r2f)
    if N - 0.5 >= xc * (1 + 1e-12) + 1e-300:
        half = flint.arb(1) / 2
        lower = stretched_integral_arb(r1, r2, xN, None if b is None else flint.arb(b))
        lower += (_f(r1, r2, xN) + (flint.arb(0) if b is None else _f(r1, r2, flint.arb(b)))) / 2
        upper = stretched_integral_arb(r1, r2, xN - half, None if b is None else flint.arb(b) + half)
        return total + lower.union(upper)
    # not yet convex within the head cap: f decreasing gives int_N^{b+1} f <= sum <= f(N) + int_N^b f
    lower = stretched_integral_arb(r1, r2, xN, None if b is None else flint.arb(b + 1))
    upper = _f(r1, r2, xN) + stretched_integral_arb(r1, r2, xN, None if b is None else flint.arb(b))
    return total + lower.union(upper)


def stretched_sum_em(r1f: float, r2f: float, a: int, b: int | None, prec: int):
    """A ball containing :math:`\\sum_{d=a}^{b} e^{-r_1 d^{r_2}}` by Theorem 15 (``b = None``: to infinity), or ``None``.

    For ``r2 > 1`` with a small ``r1`` the convexity bracket of Theorem 12(iii) is only as narrow
    as :math:`|f'(N)|`, far from 2^-50 of the sum (``r1 = 1e-6, r2 = 2``: 1e-4). Here: 64 direct
    terms, then Euler–Maclaurin of order 12 (24, 48 where needed) with its remainder bounded by the Taylor
    coefficient of that order of ``f`` on pieces ``[x, 2x]`` (Arb power series on each piece as a ball), the
    integral by Theorem 12(i)'s incomplete gammas. To infinity the sum is cut at
    :math:`X=\\lceil(2(\\mathrm{prec}+64)\\ln 2/r_1)^{1/r_2}\\rceil`, beyond which
    :math:`0\\le\\sum_{d\\ge X}f(d)\\le f(X)+\\int_X^\\infty f` (``f`` decreasing).
    Call inside :func:`otprior._balls.arb_precision`.
    """
    from .encodings._bias_tail import em_sum_arb

    r1, r2 = arb_from_float(r1f), arb_from_float(r2f)
    tree = ("mul", (_q(-r1f), ("powc", ("x",), _q(r2f))))
    head_end = a + 63 if b is None else min(b, a + 63)
    total = flint.arb(0)
    for d in range(a, head_end + 1):
        total += _f(r1, r2, flint.arb(d))
    if b is not None and head_end == b:
        return total
    N = head_end + 1
    X = int(math.ceil((2 * (prec + 64) * math.log(2) / r1f) ** (1 / r2f))) + N + 1
    if b is None or b >= X:
        # sum_{d >= X} f(d) <= f(X) + int_X^oo f (f decreasing), below 2^-(prec + 64) of f(0) = 1
        xX = flint.arb(X)
        rest = _f(r1, r2, xX) + stretched_integral_arb(r1, r2, xX, None)
        last, extra = X - 1, flint.arb(0).union(rest)
    else:
        last, extra = b, flint.arb(0)
    if last - N < 16:
        return total + sum((_f(r1, r2, flint.arb(d)) for d in range(N, last + 1)), flint.arb(0)) + extra
    for order in (6, 12, 24):  # a Gaussian-like f needs a higher order: its derivatives do not shrink with x
        tail = em_sum_arb(
            tree, N, last, prec, order,
            integral=lambda lo, hi: stretched_integral_arb(r1, r2, flint.arb(lo), flint.arb(hi)), doubling=True,
        )
        if tail is not None:
            return total + tail + extra
    return None


def _q(x: float):
    """A binary64 number as the exact fraction node of the expression trees (``encodings._bias_tail``)."""
    num, den = float(x).as_integer_ratio()
    return ("q", num, den)
