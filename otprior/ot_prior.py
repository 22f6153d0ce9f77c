"""The exact prior of the causal OT operator for constant scores, and its dilution.

Theorem 2 (``proofs/constant_score_recurrence.md``). For constant scores the fixed
point on a prefix of length ``t`` is :math:`u_i = 1/\\Phi_i`, :math:`v_j = \\Psi_j^{-\\rho}`
with :math:`\\Phi_i = \\sum_{j\\le i} v_j`, :math:`\\Psi_j = \\sum_{i=j}^{t} u_i`, and the
prior of query ``t`` is :math:`\\pi_t(d) = v_{t-d}/\\Phi_t`. Given :math:`c = \\Phi_t`
the backward recurrence :math:`\\Psi_t = 1/c`, :math:`v_k = \\Psi_k^{-\\rho}`,
:math:`\\Phi_{k-1} = \\Phi_k - v_k`, :math:`\\Psi_{k-1} = \\Psi_k + 1/\\Phi_{k-1}` determines
everything, and ``c`` is the root of :math:`\\Phi_0(c) = 0`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np

from ._anderson import anderson_solve
from ._power_sums import power_sum
from ._validation import PrecisionError, check_int, check_real, check_rho, check_window
from .scale_invariant import log_normaliser

__all__ = ["ot_prior", "ot_window_mass", "ot_window_law", "ot_dilution_bound", "PriorInfo"]

_EPS = np.finfo(float).eps
_MAX_DPS = 2000


@dataclass(frozen=True)
class PriorInfo:
    """How a double-precision prior was computed and what it can vouch for.

    Attributes
    ----------
    c : float
        The root :math:`\\Phi_t` (the sum of the column scalings).
    iterations : int
        Sweeps of the fixed-point iteration.
    log_error_bound : float
        Certified bound on :math:`\\max_j |\\log v_j - \\log v_j^*|` from the contraction
        (residual / (1 - rho)); the prior entries carry a relative error of at most
        about twice this, plus rounding.
    condition : float
        :math:`c / \\Phi_1`: the factor by which the backward recurrence amplifies
        rounding; about ``log10(condition)`` digits are lost by that route in double
        precision, which is why it is run in mpmath at raised precision.
    """

    c: float
    iterations: int
    log_error_bound: float
    condition: float


def _cumsum(a: np.ndarray) -> np.ndarray:
    """Cumulative sum of non-negative terms in blocks of sqrt(n): relative error <= (2 sqrt(n) + 1) eps."""
    n = a.size
    b = math.isqrt(n - 1) + 1
    blocks = np.zeros(b * b)
    blocks[:n] = a
    inner = np.cumsum(blocks.reshape(b, b), axis=1)
    offsets = np.concatenate([[0.0], np.cumsum(inner[:, -1])[:-1]])
    return (inner + offsets[:, None]).ravel()[:n]


def _sweep_prior(n: int, rho: float, tol: float, max_iter: int):
    """Solve the fixed-point equations of Theorem 2 by O(n) sweeps (no cancellation).

    One sweep is the dual update of Theorem 1 specialised to constant scores:
    ``Phi = cumsum(v)``, ``u = 1 / Phi``, ``Psi = reverse cumsum(u)``,
    ``v' = Psi^(-rho)``; every sum has positive terms, so no digit is lost to
    cancellation. In logarithms it is a rho-contraction in the sup norm.
    """
    noise = 8.0 * (2.0 * math.sqrt(n) + 2.0) * _EPS
    threshold = max(tol * (1.0 - rho), noise)

    def G(x, rows):
        top = x[0].max()
        phi = _cumsum(np.exp(x[0] - top))  # Phi * exp(-top)
        psi = _cumsum((1.0 / phi)[::-1])[::-1]  # Psi * exp(top)
        return (-rho * (np.log(psi) - top))[None, :]

    x0 = np.zeros((1, n))
    x, info = anderson_solve(G, x0, threshold, max_iter=max_iter, memory=8)
    logv = x[0]
    top = logv.max()
    v = np.exp(logv - top)
    total = float(np.sum(v))
    prior = v[::-1] / total
    c = total * math.exp(top)
    residual = float(info["residual"][0])
    bound = residual / (1.0 - rho) if rho < 1.0 else math.inf
    condition = c / math.exp(logv[0])
    return prior, PriorInfo(c=c, iterations=int(info["iterations"][0]), log_error_bound=bound, condition=condition)


def _recurrence(n, rho, c):
    """Backward recurrence of Theorem 2 at the current mpmath precision.

    Returns ``(Phi_0, v)``, or ``(None, None)`` when some ``Phi_k``, ``k >= 1``, is
    not positive (then ``c`` is below the root).
    """
    phi = c
    psi = mpmath.mpf(0)
    v = [None] * n
    one = mpmath.mpf(1)
    for k in range(n - 1, -1, -1):
        psi += one / phi
        vk = psi ** (-rho)
        v[k] = vk
        phi -= vk
        if k > 0 and phi <= 0:
            return None, None
    return phi, v


def _recurrence_prior(n, rho, c_guess, wp):
    """Root of Phi_0(c) = 0 by bracketing and Illinois steps, at ``wp`` digits."""
    with mpmath.workdps(wp):
        rho_m = mpmath.mpf(rho)
        lo = mpmath.mpf(c_guess) * (1 - mpmath.mpf(10) ** -6)
        hi = mpmath.mpf(c_guess) * (1 + mpmath.mpf(10) ** -6)
        h_lo, _ = _recurrence(n, rho_m, lo)
        while h_lo is not None and h_lo > 0:
            lo /= 2
            h_lo, _ = _recurrence(n, rho_m, lo)
        h_hi, _ = _recurrence(n, rho_m, hi)
        while h_hi is None or h_hi <= 0:
            hi *= 2
            h_hi, _ = _recurrence(n, rho_m, hi)
        target = mpmath.mpf(10) ** (-wp + 5)
        side = 0
        for _ in range(20 * wp):
            if h_lo is None:
                mid = (lo + hi) / 2
            else:
                mid = (lo * h_hi - hi * h_lo) / (h_hi - h_lo)  # regula falsi
            h_mid, _ = _recurrence(n, rho_m, mid)
            if h_mid is not None and h_mid > 0:
                hi, h_hi = mid, h_mid
                if side == 1 and h_lo is not None:
                    h_lo /= 2  # Illinois modification
                side = 1
            else:
                lo, h_lo = mid, h_mid
                if side == -1:
                    h_hi /= 2
                side = -1
            if hi - lo <= target * hi:
                break
        c = hi
        _, v = _recurrence(n, rho_m, c)
        total = mpmath.fsum(v)
        return [vk / total for vk in reversed(v)]


def ot_prior(n, rho, *, dps=None, tol=1e-13, max_iter=20_000, return_info=False):
    """Exact constant-score prior :math:`\\pi_n(d)` of the causal OT operator.

    Parameters
    ----------
    n : int
        Query position (prefix length), ``n >= 1``.
    rho : float
        Balancing strength in [0, 1).
    dps : int, optional
        If given, return mpmath numbers correct to ``dps`` significant digits
        (relative, every entry), computed by the backward recurrence.
    tol : float
        Double path: certified sup-norm accuracy of the log scalings (the entries then
        carry a relative error of about ``2 tol`` plus rounding; see ``PriorInfo``).
    max_iter : int
    return_info : bool
        Double path: also return a :class:`PriorInfo`.

    Returns
    -------
    ndarray, shape (n,)  (or list of mpf when ``dps`` is given)
        ``prior[d]`` for distance ``d = 0 .. n-1``; sums to one.

    Notes
    -----
    Double precision (Theorem 2 as a fixed point): the equations ``u = 1/Phi``,
    ``v = Psi^(-rho)`` are solved by O(n) sweeps with Anderson mixing. The sweep
    only adds positive numbers, whereas the backward recurrence subtracts
    (``Phi_{k-1} = Phi_k - v_k``) and amplifies rounding by ``c / Phi_1`` (1e4 at
    ``n = 2048, rho = 0.5``; 1e22 at ``n = 1e6, rho = 0.99``), so it cannot give
    double-precision digits. With ``dps`` the recurrence is run in mpmath at
    ``dps + log10(c / Phi_1) + 15`` digits, rerun with 20 more, and the two must
    agree to ``10**-dps`` relative or the precision is raised (up to 2000 digits,
    then :class:`~otprior.PrecisionError`).

    Examples
    --------
    >>> p = ot_prior(4, 0.0)        # rho = 0: uniform
    >>> p.round(12).tolist()
    [0.25, 0.25, 0.25, 0.25]
    >>> round(float(ot_prior(256, 0.5)[0]), 6)
    0.045634
    """
    n = check_int(n, "n", minimum=1)
    rho = check_rho(rho)
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter")
    if rho == 0.0:
        prior = np.full(n, 1.0 / n)
        info = PriorInfo(c=float(n), iterations=0, log_error_bound=0.0, condition=float(n))
    else:
        prior, info = _sweep_prior(n, rho, tol, max_iter)
    if dps is None:
        return (prior, info) if return_info else prior
    dps = check_int(dps, "dps", minimum=1, maximum=_MAX_DPS)
    if rho == 0.0:
        with mpmath.workdps(dps):
            return [mpmath.mpf(1) / n] * n
    wp = dps + int(math.log10(max(info.condition, 1.0))) + 15
    while True:
        if wp + 20 > _MAX_DPS:
            raise PrecisionError(f"ot_prior(n={n}, rho={rho}) needs more than {_MAX_DPS} working digits for dps={dps}")
        a = _recurrence_prior(n, rho, info.c, wp)
        b = _recurrence_prior(n, rho, info.c, wp + 20)
        with mpmath.workdps(wp + 20):
            err = max(abs(x / y - 1) for x, y in zip(a, b, strict=True))
        if err <= mpmath.mpf(10) ** (-dps - 1):
            with mpmath.workdps(dps):
                return [+x for x in b]
        wp *= 2


def ot_window_mass(window, n, rho, *, dps=None):
    """Window mass :math:`m_n(W;\\rho) = \\sum_{d<W} \\pi_n(d)` of the constant-score prior.

    Exact (Theorem 2) through :func:`ot_prior`; ``dps`` returns an mpmath number
    with that many correct digits.

    Examples
    --------
    >>> round(ot_window_mass(10, 1024, 0.5), 4)
    0.1111
    """
    n = check_int(n, "n", minimum=1)
    window = check_window(window, n)
    prior = ot_prior(n, rho, dps=dps)
    if dps is not None:
        with mpmath.workdps(dps + 5):
            return +mpmath.fsum(prior[:window])
    return float(np.sum(prior[:window]))


def ot_window_law(window, n, rho):
    """Asymptotic window law :math:`H_W^{(\\rho)}\\,(Z_q/n)^{1-\\rho}` (Theorem 4).

    ``m_n(W; rho) = H_W^{(rho)} (Z_q / n)^{1 - rho} (1 + o(1))`` as ``n -> oo``, with
    ``q = 1 - rho`` and ``Z_q = q^{1/q - 1} Gamma(1/q)``. It is an asymptotic law,
    not a bound, and can exceed one for small ``n``.

    Examples
    --------
    >>> round(ot_window_law(10, 1024, 0.5), 4)
    0.1109
    """
    n = check_int(n, "n", minimum=1)
    window = check_window(window, n)
    rho = check_rho(rho)
    q = 1.0 - rho
    return power_sum(1, window, rho) * math.exp(q * (log_normaliser(q) - math.log(n)))


def ot_dilution_bound(window, n, rho, score_bound):
    """Rigorous upper bound on the window mass for every bounded score matrix.

    For all scores with :math:`|s_{ij} - c| \\le B` on the prefix (any constant
    ``c``), the window mass of the operator's row ``n`` satisfies, at every ``n``
    (Theorem 5, ``proofs/bounded_score_dilution.md``),

    .. math::

        m_n(W) \\le \\frac{K m^0}{1 + (K - 1) m^0},\\qquad
        K = \\exp\\Bigl(\\frac{2B(1+\\rho)}{1-\\rho}\\Bigr),

    where :math:`m^0 = m_n(W;\\rho)` is the exact constant-score window mass. Since
    :math:`m^0 \\to 0`, every fixed window receives a vanishing share.

    Parameters
    ----------
    window, n : int
        ``1 <= window <= n``.
    rho : float
        Balancing strength in [0, 1).
    score_bound : float
        ``B >= 0``.

    Notes
    -----
    ``m0`` is inflated by ``1e-9`` relative before use, which covers the certified
    error of :func:`ot_prior` (``PriorInfo.log_error_bound``) with a wide margin.

    Examples
    --------
    >>> round(ot_dilution_bound(10, 1024, 0.5, 0.0), 4)   # B = 0: the exact mass
    0.1111
    """
    n = check_int(n, "n", minimum=1)
    window = check_window(window, n)
    rho = check_rho(rho)
    B = check_real(score_bound, "score_bound", low=0.0)
    m0 = min(1.0, ot_window_mass(window, n, rho) * (1.0 + 1e-9))
    if m0 >= 1.0:
        return 1.0
    log_k = 2.0 * B * (1.0 + rho) / (1.0 - rho)
    # K m0 / (1 + (K - 1) m0) = 1 / (1 + (1 - m0) / (K m0)), overflow-free
    return 1.0 / (1.0 + math.exp(-log_k) * (1.0 - m0) / m0)


