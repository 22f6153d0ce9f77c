"""Sums of powers :math:`\\sum_{k=a}^{b}(k+s)^{-\\alpha}` with certified Euler–Maclaurin brackets.

Theorem 8 (``proofs/window_mass_bounds.md``). For :math:`f(x) = (x+s)^{-\\alpha}`, every
even derivative is positive on :math:`x > -s`, so the Euler–Maclaurin remainder after
the :math:`B_{2p}` term lies between 0 and the first omitted term (Steffensen). The
truncations at orders ``p`` and ``p + 1`` therefore bracket the sum.

The integral :math:`\\int_a^b (x+s)^{-\\alpha}dx` is evaluated as
:math:`(a+s)^{1-\\alpha}\\,L\\,\\mathrm{expm1}(u)/u` with :math:`L=\\log\\frac{b+s}{a+s}`,
:math:`u=(1-\\alpha)L`: no pole at :math:`\\alpha=1`, no cancellation near it.
"""

from __future__ import annotations

import math

# Bernoulli numbers B_2, B_4, ..., B_20 divided by (2j)!
_B2J_OVER_FACT = [
    1 / 12,
    -1 / 720,
    1 / 30240,
    -1 / 1209600,
    1 / 47900160,
    -691 / 1307674368000,
    1 / 74724249600,
    -3617 / 10670622842880000,
    43867 / 5109094217170944000,
    -174611 / 802857662698291200000,
]

# exact terms before the Euler–Maclaurin tail in point evaluations
_HEAD = 16
_POINT_ORDER = 6


def _expm1_over(u: float) -> float:
    """expm1(u) / u, equal to 1 at u = 0 (relative error a few ulps for all u)."""
    if abs(u) < 1e-5:
        return 1.0 + u / 2.0 + u * u / 6.0
    return math.expm1(u) / u


def power_integral(a: float, b: float, alpha: float, shift: float = 0.0) -> float:
    """:math:`\\int_a^b (x+s)^{-\\alpha} dx` without a pole at ``alpha = 1``."""
    if b <= a:
        return 0.0
    xa, xb = a + shift, b + shift
    L = math.log(xb / xa)
    u = (1.0 - alpha) * L
    if abs(u) > 1.0:
        # the two powers differ by a factor e or more: the difference loses under 1 digit,
        # whereas exp(u) would amplify the rounding of u by |u|
        # x^(1-alpha) as x * x^(-alpha): the exponent 1 - alpha is rounded, alpha is exact
        return (xb * xb ** (-alpha) - xa * xa ** (-alpha)) / (1.0 - alpha)
    return xa * xa ** (-alpha) * L * _expm1_over(u)


def _odd_derivative(x: float, alpha: float, m: int) -> float:
    """f^{(m)}(x) for f = x^{-alpha}, m odd: -(alpha)_m x^{-alpha-m}."""
    rising = 1.0
    for i in range(m):
        rising *= alpha + i
    return -rising * x ** (-alpha - m)


def em_terms(a: int, b: int, alpha: float, shift: float, order: int):
    """Euler–Maclaurin estimate of order ``order`` for sum_{k=a}^{b} f(k) and the first omitted term.

    Returns ``(estimate, next_term)``; the sum lies between ``estimate`` and
    ``estimate + next_term`` (Theorem 8).
    """
    xa, xb = a + shift, b + shift
    total = power_integral(a, b, alpha, shift) + 0.5 * (xa ** (-alpha) + xb ** (-alpha))
    for j in range(1, order + 1):
        m = 2 * j - 1
        total += _B2J_OVER_FACT[j - 1] * (_odd_derivative(xb, alpha, m) - _odd_derivative(xa, alpha, m))
    m = 2 * order + 1
    nxt = _B2J_OVER_FACT[order] * (_odd_derivative(xb, alpha, m) - _odd_derivative(xa, alpha, m))
    return total, nxt


def power_sum(a: int, b: int, alpha: float, shift: float = 0.0) -> float:
    """:math:`\\sum_{k=a}^{b}(k+s)^{-\\alpha}` to double precision, O(1) time for any ``b``.

    The first 16 terms are summed exactly (``math.fsum``), the rest by Euler–Maclaurin of
    order 6, whose bracket is below 1e-17 relative once ``a + s >= 16``.
    """
    if b < a:
        return 0.0
    head_end = min(b, a + _HEAD - 1)
    head = math.fsum((k + shift) ** (-alpha) for k in range(a, head_end + 1))
    if head_end == b:
        return head
    est, nxt = em_terms(head_end + 1, b, alpha, shift, _POINT_ORDER)
    return head + est + 0.5 * nxt


def power_sum_bounds(a: int, b: int, alpha: float, shift: float = 0.0, *, order: int = 2, head: int = 8):
    """Certified ``(lower, upper)`` for :math:`\\sum_{k=a}^{b}(k+s)^{-\\alpha}` (Theorem 8).

    ``head`` terms are summed exactly; the rest is bracketed by the Euler–Maclaurin
    truncations of orders ``order`` and ``order + 1``. Rounding is covered by widening
    each side by 8 ulps of the sum of absolute terms.
    """
    if b < a:
        return 0.0, 0.0
    head_end = min(b, a + head - 1)
    exact = math.fsum((k + shift) ** (-alpha) for k in range(a, head_end + 1))
    if head_end == b:
        slack = 4 * (b - a + 1) * 2.2e-16 * exact
        return exact - slack, exact + slack
    est, nxt = em_terms(head_end + 1, b, alpha, shift, order)
    lo, hi = sorted((exact + est, exact + est + nxt))
    slack = 8 * 2.2e-16 * (abs(exact) + abs(est) + abs(nxt))
    return lo - slack, hi + slack
