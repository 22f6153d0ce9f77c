"""Log-distance priors: exact window and distant masses, and certified bounds.

Definition (``proofs/log_distance_prior.md``). The bias :math:`b(d) = -\\alpha\\log(d + o)`
(offset ``o = 1`` by default) gives the prior :math:`\\pi_n(d) = (d+o)^{-\\alpha}/H_n`,
``d = 0..n-1``, with :math:`H_n = \\sum_{k=1}^{n}(k+o-1)^{-\\alpha}`, so

.. math::

    m_n(W;\\alpha) = H_W / H_n,\\qquad D_n(W;\\alpha) = 1 - m_n = T / (H_W + T),\\quad
    T = \\sum_{k=W+1}^{n}(k+o-1)^{-\\alpha}.

``D`` is computed from ``T`` directly (never as ``1 - m``), so it keeps its relative
accuracy when it is tiny.
"""

from __future__ import annotations

import math

import mpmath

from ._power_sums import power_sum, power_sum_bounds
from ._validation import DomainError, PrecisionError, check_int, check_real

__all__ = ["window_mass", "distant_mass", "window_mass_bounds", "distant_mass_bounds"]

_MAX_DPS = 1000


def _check(window, n, alpha, offset):
    n = check_int(n, "n", minimum=1)
    window = check_int(window, "window", minimum=1)
    if window > n:
        raise DomainError("n", n, f"an integer at least window={window}")
    alpha = check_real(alpha, "alpha", low=0.0, low_open=True)
    offset = check_real(offset, "offset", low=0.0, low_open=True)
    return window, n, alpha, offset - 1.0


def _head_and_tail(window, n, alpha, offset, dps):
    """H_W and T = sum_{k=W+1}^{n}: doubles, or mpmath numbers correct to ``dps`` digits."""
    window, n, alpha, shift = _check(window, n, alpha, offset)
    if dps is None:
        return power_sum(1, window, alpha, shift), power_sum(window + 1, n, alpha, shift)
    dps = check_int(dps, "dps", minimum=1, maximum=_MAX_DPS - 50)
    return _mp_sum(1, window, alpha, shift, dps), _mp_sum(window + 1, n, alpha, shift, dps)


def _share(part, head, tail, dps):
    """part / (head + tail); with ``dps`` the sum too is taken at the raised precision."""
    if dps is None:
        return part / (head + tail)
    with mpmath.workdps(dps + 5):
        return +(part / (head + tail))


def _mp_sum(a, b, alpha, shift, dps):
    """sum_{k=a}^{b} (k+s)^-alpha in mpmath: Hurwitz zeta difference (digamma at alpha = 1),
    at a working precision raised until two runs agree to 10^-dps relative."""
    if b < a:
        return mpmath.mpf(0)
    alpha_m = mpmath.mpf(alpha)
    shift_m = mpmath.mpf(shift)
    cancel = 0 if alpha == 1.0 else max(0, int(-math.log10(abs(alpha - 1.0))))
    wp = dps + 15 + cancel + int(math.log10(b + 1))
    previous = None
    while wp <= _MAX_DPS:
        with mpmath.workdps(wp):
            if b - a < 64:
                value = mpmath.fsum((k + shift_m) ** (-alpha_m) for k in range(a, b + 1))
            elif alpha == 1.0:
                value = mpmath.digamma(b + 1 + shift_m) - mpmath.digamma(a + shift_m)
            else:
                value = mpmath.zeta(alpha_m, a + shift_m) - mpmath.zeta(alpha_m, b + 1 + shift_m)
            if previous is not None and abs(value - previous) <= abs(value) * mpmath.mpf(10) ** (-dps - 2):
                return value
            previous = value
        wp += 20
    raise PrecisionError(f"sum of (k + {shift})^-{alpha} for k = {a}..{b} needs more than {_MAX_DPS} digits")


def window_mass(window, n, alpha, *, offset=1.0, dps=None):
    """Window mass :math:`m_n(W;\\alpha)` of the log-distance prior :math:`(d+o)^{-\\alpha}`.

    Parameters
    ----------
    window : int
        ``W >= 1``: the ``W`` nearest keys, ``d < W``.
    n : int
        Context length ``n >= W`` (up to 1e18 and beyond; float ``1e15`` accepted).
    alpha : float
        Exponent ``> 0``; ``alpha = 1`` and its neighbourhood are exact.
    offset : float
        ``o > 0`` in :math:`b(d) = -\\alpha\\log(d + o)`.
    dps : int, optional
        Return an mpmath number correct to ``dps`` significant digits.

    Notes
    -----
    Double precision: both sums by :func:`otprior._power_sums.power_sum` (16 exact terms,
    then Euler–Maclaurin of order 6 with the integral in a pole-free form), O(1) time,
    within 4 ulps of 60-digit mpmath for ``alpha = 1``, ``1 +- 1e-12`` and ``n = 1e18``.
    ``dps``: Hurwitz zeta differences at raised working precision (Theorem 7).

    Examples
    --------
    >>> round(window_mass(64, 8192, 1.0), 6)  # H_64 / H_8192
    0.494764
    >>> window_mass(1, 10**15, 2.0) > 6 / math.pi**2
    True
    """
    head, tail = _head_and_tail(window, n, alpha, offset, dps)
    return _share(head, head, tail, dps)


def distant_mass(window, n, alpha, *, offset=1.0, dps=None):
    """Distant mass :math:`D_n(W;\\alpha) = 1 - m_n(W;\\alpha)`, computed as ``T / (H_W + T)``.

    Parameters and algorithm as :func:`window_mass`.

    Examples
    --------
    >>> round(distant_mass(64, 8192, 1.0), 6)
    0.505236
    >>> distant_mass(5, 5, 1.3)
    0.0
    """
    head, tail = _head_and_tail(window, n, alpha, offset, dps)
    return _share(tail, head, tail, dps)


def _sum_bounds(window, n, alpha, shift, order):
    return power_sum_bounds(1, window, alpha, shift, order=order), power_sum_bounds(
        window + 1, n, alpha, shift, order=order
    )


def window_mass_bounds(window, n, alpha, *, offset=1.0, order=2):
    """Certified closed-form bounds ``(lower, upper)`` on :math:`m_n(W;\\alpha)` (Theorem 8).

    Each of :math:`H_W` and :math:`T` is bracketed by 8 exact terms plus the
    Euler–Maclaurin truncations of orders ``order`` and ``order + 1``. For
    :math:`f(x)=(x+o-1)^{-\\alpha}` all even derivatives are positive, so the remainder
    lies between 0 and the first omitted term. ``order = 0`` is the integral comparison
    ``integral + (f(a) + f(b)) / 2`` sharpened by one term. ``m = H_W / (H_W + T)``
    increases in ``H_W`` and decreases in ``T``, which gives the bounds. Relative width
    at most 1e-4 for ``window >= 16`` at the default order (measured: below 1e-7).

    Examples
    --------
    >>> lo, hi = window_mass_bounds(64, 10**12, 1.05)
    >>> lo <= window_mass(64, 10**12, 1.05) <= hi and (hi - lo) / lo < 1e-6
    True
    """
    window, n, alpha, shift = _check(window, n, alpha, offset)
    order = check_int(order, "order", minimum=0, maximum=8)
    (h_lo, h_hi), (t_lo, t_hi) = _sum_bounds(window, n, alpha, shift, order)
    return _outward(h_lo / (h_lo + t_hi), h_hi / (h_hi + t_lo))


def distant_mass_bounds(window, n, alpha, *, offset=1.0, order=2, score_bound=0.0):
    """Certified bounds ``(lower, upper)`` on :math:`D_n(W;\\alpha)`, optionally over content scores.

    With ``score_bound = B > 0`` the bounds cover every attention row whose content
    scores lie within ``B`` of a constant (Theorem 10):
    :math:`T/(T + e^{2B}H_W) \\le D \\le T/(T + e^{-2B}H_W)`.

    Examples
    --------
    >>> lo, hi = distant_mass_bounds(64, 8192, 1.3)
    >>> lo <= distant_mass(64, 8192, 1.3) <= hi
    True
    """
    window, n, alpha, shift = _check(window, n, alpha, offset)
    order = check_int(order, "order", minimum=0, maximum=8)
    B = check_real(score_bound, "score_bound", low=0.0)
    (h_lo, h_hi), (t_lo, t_hi) = _sum_bounds(window, n, alpha, shift, order)
    k = math.exp(2.0 * B)
    return _outward(t_lo / (t_lo + k * h_hi), t_hi / (t_hi + h_lo / k))


def _outward(lo, hi):
    """Round a bracket of a mass outward by the rounding of the final division (2 ulps);
    a mass lies in [0, 1], which caps the widened bracket."""
    eps = 2.0 * 2.220446049250313e-16
    return max(0.0, lo * (1.0 - eps) - 1e-300), min(1.0, hi * (1.0 + eps))
