"""Sums of powers :math:`S(d_0,d_1)=\\sum_{d=d_0}^{d_1}(d+o)^{-\\alpha}`: a fast float route and a proved ball.

Two routes compute the same sums (Theorems 7 and 8, ``proofs/log_distance_prior.md``,
``proofs/window_mass_bounds.md``).

*Float route* (:func:`scaled_sum`). Every sum is returned divided by the anchor
:math:`o^{-\\alpha}`, the largest possible term, so that nothing overflows or underflows
for offsets in :math:`[10^{-300},10^{300}]`, exponents up to :math:`10^{15}` and lengths up
to :math:`10^{300}`. A term is :math:`\\exp(-\\alpha\\,\\ell(d))` with
:math:`\\ell(d)=\\log(1+d/o)` computed by ``log1p`` from the exact integer ``d`` (no
``o - 1`` is ever formed). Terms are summed exactly (``math.fsum``) until the point
:math:`x=d+o` passes :math:`\\max(x_{d_0}+16,\\,4\\alpha+16)`, or until the rest is below
:math:`2^{-64}` of the sum (for :math:`\\alpha>1`, the rest is at most
:math:`f(D)(1+(D+o)/(\\alpha-1))`). The remainder is Euler–Maclaurin of order 6 (Theorem 8),
which converges fast there because :math:`(\\alpha+2j)/(2\\pi x)\\le 1/(2\\pi)`. Its
integral is :math:`x_sF_sL\\,\\mathrm{expm1}(u)/u` with :math:`L=\\log(1+(d_1-d_s)/x_s)`
from the exact integer difference (no cancellation when :math:`d_1-d_s\\ll d_s`) and
:math:`u=(1-\\alpha)L` (no pole at :math:`\\alpha=1`).

*Ball route* (:func:`arb_sum`). Arb's Hurwitz zeta, rigorous for every real
:math:`s\\ne1`: :math:`S=\\zeta(\\alpha,d_0+o)-\\zeta(\\alpha,d_1+1+o)` (the identity
:math:`\\zeta(s,a)-\\zeta(s,a+1)=a^{-s}` holds for the continuation, so also for
:math:`\\alpha<1`); :math:`\\psi(d_1+1+o)-\\psi(d_0+o)` at :math:`\\alpha=1`; direct ball
summation for fewer than 40 terms. Cancellation (near :math:`\\alpha=1`, or when
:math:`d_1-d_0\\ll d_0`) only widens the ball; the callers raise the precision until the
ball is tight.
"""

from __future__ import annotations

import math

import flint
import numpy as np

from ._balls import arb_from_float

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
# the same as exact fractions, for the ball route: (numerator, denominator) of B_2j / (2j)!
_B2J_FRACTIONS = [
    (1, 12),
    (-1, 720),
    (1, 30240),
    (-1, 1209600),
    (1, 47900160),
    (-691, 1307674368000),
    (1, 74724249600),
    (-3617, 10670622842880000),
    (43867, 5109094217170944000),
    (-174611, 802857662698291200000),
]

_HEAD = 16  # exact terms before Euler–Maclaurin
_ORDER = 6  # Euler–Maclaurin order of the float route
_CHUNK = 64  # head terms evaluated per numpy call
_MAX_HEAD = 1 << 16  # never reached for alpha > 0 (the head ends by x >= 4 alpha + 16 or by negligibility)
_NEGLIGIBLE = 2.0**-64
_DIRECT = 40  # ball route: sums of fewer terms are added directly

__all__ = ["scaled_sum", "scaled_sum_many", "anchor_factor", "log_ratio", "power_sum", "arb_sum", "em_bracket_arb"]


def log_ratio(d, offset: float) -> float:
    """:math:`\\log(1 + d/o)` for an integer ``d >= 0`` (``log1p``; no overflow when ``d/o`` does)."""
    q = float(d) / offset
    if q < 1e300:
        return math.log1p(q)
    return math.log(float(d)) - math.log(offset) + math.log1p(offset / float(d))


def _two_sum(d0: int, offset: float) -> tuple[float, float]:
    """``d0 + o`` as an unevaluated sum ``hi + lo`` (TwoSum; exact below 2^53, then to ``eps * lo``)."""
    df = float(d0)
    rest = d0 - int(df)  # exact integer, zero below 2^53
    hi = df + offset
    bb = hi - df
    lo = (df - (hi - bb)) + (offset - bb)
    return hi, lo + rest


class _Anchor:
    """The anchor ``x_a = d0 + o`` (as ``hi + lo``) and the scaled terms ``(1 + k/x_a)^-alpha``."""

    def __init__(self, d0: int, alpha: float, offset: float):
        self.hi, self.lo = _two_sum(d0, offset)
        self.alpha = alpha
        self.corr = 1.0 - self.lo / self.hi  # k / (hi + lo) = (k / hi) (1 - lo / hi) to second order

    def terms(self, k: np.ndarray) -> np.ndarray:
        """Scaled terms for float ``k >= 0``.

        Near the anchor (``q = k/x_a <= e - 1``) as ``exp(-alpha log1p(q))``, whose exponent
        is small; farther out as ``(1/(1 + q))^alpha`` by ``pow``, whose error is about
        ``alpha`` ulps of the base rather than ``alpha log(1 + q)`` ulps. Bases below
        1e-300 go back to the exponential form, with ``log(1 + q) = log k - log x_a`` once
        ``q`` passes 1e300.
        """
        alpha = self.alpha
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            q = (k / self.hi) * self.corr
            safe = np.isfinite(q) & (q < 1e300)
            lq = np.where(safe, np.log1p(np.where(safe, q, 0.0)), np.log(k) - math.log(self.hi))
            near = np.exp(-alpha * lq)
            base = 1.0 / (1.0 + q)
            far = np.power(np.maximum(base, 1e-300), alpha)
            return np.where((q > math.e - 1.0) & (base > 1e-300) & safe, far, near)

    def term(self, k: int) -> float:
        """One scaled term, by the same rule as :meth:`terms`, in scalar arithmetic."""
        q = (float(k) / self.hi) * self.corr
        if not q < 1e300:
            return math.exp(-self.alpha * (math.log(float(k)) - math.log(self.hi)))
        base = 1.0 / (1.0 + q)
        if q > math.e - 1.0 and base > 1e-300:
            return base**self.alpha
        return math.exp(-self.alpha * math.log1p(q))


def _pow_exact_exponent(num: float, den_hi: float, den_lo: float, alpha: float) -> float:
    """:math:`(num/(den_{hi}+den_{lo}))^{\\alpha}` for positive ``num``, ``den`` whose quotient is below one.

    The quotient is split as :math:`r\\,2^{e}` with :math:`r = m_o/m_d \\in (1/2, 2)` from the
    ``frexp`` mantissas and the integer :math:`e = e_o - e_d`, so
    :math:`r^{\\alpha}2^{e\\alpha}`: the power of ``r`` is one ``pow`` of a base near one
    (error about one ulp), and :math:`e\\alpha = k + f` is split exactly in rational
    arithmetic (``alpha`` is a dyadic rational), :math:`2^f = \\exp(f\\ln 2)` with
    :math:`0 \\le f < 1` (error about one ulp), ``ldexp`` by ``k`` exact. No
    :math:`\\exp(-y)` with large ``y`` is formed: its relative error would be about
    :math:`y\\varepsilon` (Theorem 7, ``proofs/log_distance_prior.md``, "the anchor factor").
    """
    mo, eo = math.frexp(num)
    md, ed = math.frexp(den_hi)
    r = (mo / md) * (1.0 - den_lo / den_hi)
    e = eo - ed
    p, q = alpha.as_integer_ratio()  # alpha = p / q, q a power of two
    k = (e * p) // q  # floor(e alpha), exact
    f = (e * p - k * q) / q  # in [0, 1), one rounding
    scale = r**alpha * math.exp(f * math.log(2.0))
    if k < -1200:
        return 0.0
    return math.ldexp(scale, k)


def anchor_factor(d0: int, alpha: float, offset: float) -> tuple[float, float]:
    """``(F, y)`` with :math:`F = ((d_0+o)/o)^{-\\alpha} = e^{-y}`: ``F`` may underflow, ``y`` does not.

    ``F`` is formed without the :math:`y\\varepsilon` error of ``exp(-y)`` when ``y`` is large:
    near the anchor (``log(1 + d0/o) <= 1``) as ``exp(-alpha log1p(d0/o))`` (``y <= alpha``,
    the same ``alpha`` ulps as the power form), otherwise as the power of the quotient
    :math:`o/(d_0+o)` with its binary exponent split off exactly (:func:`_pow_exact_exponent`).
    """
    if d0 == 0:
        return 1.0, 0.0
    hi, lo = _two_sum(d0, offset)
    ratio_log = log_ratio(d0, offset)
    y = alpha * ratio_log
    if ratio_log <= 1.0:
        return math.exp(-y), y
    if y > 760.0:  # F below the smallest subnormal: only y is used
        return 0.0, y
    return _pow_exact_exponent(offset, hi, lo, alpha), y


def scaled_sum(d0: int, d1: int, alpha: float, offset: float) -> float:
    """:math:`\\sum_{d=d_0}^{d_1}((d+o)/(d_0+o))^{-\\alpha}` in double precision, O(1) time.

    The sum divided by its first (largest) term, so at least 1. ``d0 >= 0`` and ``d1`` are
    exact integers, ``alpha > 0``, ``offset > 0``. The head is summed with ``math.fsum``;
    the rest by Euler–Maclaurin of order 6 plus half the first omitted term (Theorem 8
    brackets the sum between the order-6 and order-7 truncations). Each term's error is a
    few ulps times :math:`1+|\\log \\text{term}|`; the error of the masses is measured in
    ``tests/test_log_distance_rigour.py``.
    """
    if d1 < d0:
        return 0.0
    anchor = _Anchor(d0, alpha, offset)
    start_em = max(anchor.hi + _HEAD, 4.0 * alpha + _HEAD)  # Euler–Maclaurin from here on
    total = []
    running = 0.0
    k, last = 0, d1 - d0
    while k <= last:
        x = anchor.hi + k
        if x >= start_em and k >= _HEAD:
            break
        if alpha > 1.0 and running > 0.0:
            # rest of the infinite sum: f(d) + int_d^oo f <= f(d) (1 + (d + o) / (alpha - 1))
            if anchor.term(k) * (1.0 + x / (alpha - 1.0)) <= _NEGLIGIBLE * running:
                return running
        if k >= _MAX_HEAD:
            break
        # up to the start of Euler–Maclaurin (at least 16 terms), at most one chunk
        needed = max(_HEAD - k, math.ceil(start_em - x), 1) if math.isfinite(start_em - x) else _CHUNK
        count = min(_CHUNK, last - k + 1, needed)
        if count <= 32:  # scalar arithmetic is faster than numpy for a few terms
            total.extend(anchor.term(j) for j in range(k, k + count))
        else:
            total.extend(anchor.terms(np.arange(k, k + count, dtype=float)).tolist())
        running = math.fsum(total)
        k += count
    if k > last:
        return running
    return running + _em_scaled(anchor, k, last, alpha)


def scaled_sum_many(d0: int, d1: np.ndarray, alpha: float, offset: float) -> np.ndarray:
    """:func:`scaled_sum` for one ``d0`` and an array of upper ends ``d1 >= d0 - 1``, in one pass.

    The same sums as the scalar route, term for term: the head of exact terms is formed once
    (for the largest ``d1``), each ``d1`` inside the head takes its exact prefix (``math.fsum``),
    and the rest takes the head total plus the order-6 Euler–Maclaurin remainder, evaluated
    for all ``d1`` at once by numpy (:func:`_em_scaled_many`, the same formula as
    :func:`_em_scaled`). ``d1`` is an int64 or float64 array (floats above 2**53 are the
    exact integers they represent).
    """
    d1 = np.asarray(d1)
    out = np.zeros(d1.shape, dtype=float)
    if d1.size == 0:
        return out
    last = d1 - d0 if d1.dtype.kind in "iu" else d1 - float(d0)  # exact below 2**53 (int64), else within an ulp
    top = int(np.max(last))
    anchor = _Anchor(d0, alpha, offset)
    start_em = max(anchor.hi + _HEAD, 4.0 * alpha + _HEAD)
    terms: list = []
    running = 0.0
    k = 0
    negligible = False
    while k <= top:
        x = anchor.hi + k
        if x >= start_em and k >= _HEAD:
            break
        if alpha > 1.0 and running > 0.0:
            if anchor.term(k) * (1.0 + x / (alpha - 1.0)) <= _NEGLIGIBLE * running:
                negligible = True
                break
        if k >= _MAX_HEAD:
            break
        needed = max(_HEAD - k, math.ceil(start_em - x), 1) if math.isfinite(start_em - x) else _CHUNK
        count = min(_CHUNK, top - k + 1, needed)
        if count <= 32:
            terms.extend(anchor.term(j) for j in range(k, k + count))
        else:
            terms.extend(anchor.terms(np.arange(k, k + count, dtype=float)).tolist())
        running = math.fsum(terms)
        k += count
    inside = last < k  # the sum ends within the exact head
    if np.any(inside):
        lasts = last[inside]
        uniq, inverse = np.unique(lasts, return_inverse=True)
        prefix = np.array([math.fsum(terms[: int(v) + 1]) if v >= 0 else 0.0 for v in uniq])
        out[inside] = prefix[inverse]
    rest = ~inside
    if np.any(rest):
        if negligible:
            out[rest] = running
        else:
            out[rest] = running + _em_scaled_many(anchor, k, last[rest], alpha)
    return out


_VEC_HEAD = 512  # longest exact head of the fully vectorised route (alpha <= 124 always fits)
_SPLIT = 134217729.0  # 2^27 + 1, Dekker's splitting constant


def _two_product(a: np.ndarray, b: np.ndarray):
    """``a * b = p + e`` exactly (Dekker; no FMA needed), element-wise."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def anchor_factor_many(d0: np.ndarray, alpha: np.ndarray, offset: np.ndarray):
    """:func:`anchor_factor` element-wise for int64 ``d0 < 2**53`` (same two forms).

    The power form: ``(o/(d0+o))^alpha = r^alpha 2^(e alpha)`` with ``r`` the quotient of the
    ``frexp`` mantissas and ``e alpha = k + f`` formed exactly as a two-product (Dekker), so no
    ``exp(-y)`` with large ``y`` is taken."""
    d0f = d0.astype(float)
    hi = d0f + offset
    bb = hi - d0f
    lo = (d0f - (hi - bb)) + (offset - bb)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        q = d0f / offset
        ratio_log = np.where(q < 1e300, np.log1p(np.minimum(q, 1e300)), np.log(d0f) - np.log(offset) + np.log1p(offset / d0f))
        y = alpha * ratio_log
        near = np.exp(-y)
        mo, eo = np.frexp(offset)
        md, ed = np.frexp(hi)
        r = (mo / md) * (1.0 - lo / hi)
        e = (eo - ed).astype(float)
        p_hi, p_lo = _two_product(e, alpha)
        k = np.floor(p_hi)
        f = (p_hi - k) + p_lo  # in (-eps, 1 + eps): exp handles either side
        scale = r**alpha * np.exp(f * math.log(2.0))
        kk = np.clip(k, -2000, 2000).astype(np.int64)
        far = np.where(k < -1200, 0.0, np.ldexp(scale, kk))
    F = np.where(d0 == 0, 1.0, np.where(ratio_log <= 1.0, near, np.where(y > 760.0, 0.0, far)))
    return F, np.where(d0 == 0, 0.0, y)


def scaled_sum_vec(d0: np.ndarray, d1: np.ndarray, alpha: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """:func:`scaled_sum` element-wise over arrays (int64 ``0 <= d0 <= d1 + 1``, ``d1 < 2**53``).

    The same route per element: exact terms (the anchor's two forms) until
    ``x >= max(x_a + 16, 4 alpha + 16)`` and at least 16 terms, summed with Kahan compensation
    over the element vector, then the order-6 Euler–Maclaurin remainder of :func:`_em_scaled`.
    Elements whose head would exceed 512 terms (``alpha`` above about 124) are not handled:
    the caller routes them to :func:`scaled_sum` (``NaN`` marks them).
    """
    last = d1 - d0  # number of terms - 1
    d0f = d0.astype(float)
    x_a = d0f + offset
    bb = x_a - d0f
    lo = (d0f - (x_a - bb)) + (offset - bb)
    corr = 1.0 - lo / x_a
    start_em = np.maximum(x_a + _HEAD, 4.0 * alpha + _HEAD)
    with np.errstate(over="ignore", invalid="ignore"):
        need = np.maximum(float(_HEAD), np.ceil(start_em - x_a))
    K = np.minimum(last + 1, np.where(np.isfinite(need), np.minimum(need, 1e18), 1e18).astype(np.int64))
    K = np.maximum(K, 0)
    bad = K > _VEC_HEAD
    Kc = np.where(bad, 0, K)
    kmax = int(Kc.max()) if Kc.size else 0
    total = np.zeros(d0.shape)
    comp = np.zeros(d0.shape)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        for k in range(kmax):
            on = k < Kc
            qk = (k / x_a) * corr
            safe = qk < 1e300
            lq = np.where(safe, np.log1p(np.where(safe, qk, 0.0)), math.log(k) - np.log(x_a) if k > 0 else 0.0)
            base = 1.0 / (1.0 + qk)
            far = np.power(np.maximum(base, 1e-300), alpha)
            term = np.where((qk > math.e - 1.0) & (base > 1e-300) & safe, far, np.exp(-alpha * lq))
            term = np.where(on, term, 0.0)
            yk = term - comp  # Kahan: the running sum of positive terms to about one ulp
            t = total + yk
            comp = (t - total) - yk
            total = t
        rest = (~bad) & (Kc <= last)
        if np.any(rest):
            ks = Kc[rest].astype(float)
            kb = last[rest].astype(float)
            a = alpha[rest]
            xs = x_a[rest] + ks
            xb = x_a[rest] + kb
            cr = corr[rest]

            def term_at(k, xa, al, c):
                qv = (k / xa) * c
                base = 1.0 / (1.0 + qv)
                far = np.power(np.maximum(base, 1e-300), al)
                lq = np.where(qv < 1e300, np.log1p(np.minimum(qv, 1e300)), np.log(k) - np.log(xa))
                return np.where((qv > math.e - 1.0) & (base > 1e-300) & (qv < 1e300), far, np.exp(-al * lq))

            fs = term_at(ks, x_a[rest], a, cr)
            fb = term_at(kb, x_a[rest], a, cr)
            L = np.log1p((last[rest] - Kc[rest]).astype(float) / xs)
            u = (1.0 - a) * L
            small = np.abs(u) <= 1.0
            ratio = np.where(u == 0.0, 1.0, np.expm1(np.where(small, u, 0.0)) / np.where(small & (u != 0.0), u, 1.0))
            integral = np.where(
                small,
                xs * fs * L * ratio,
                np.where(
                    u > 1.0,
                    xb * fb * -np.expm1(-np.where(u > 1.0, u, 0.0)) / (1.0 - a),
                    xs * fs * -np.expm1(np.where(u < -1.0, u, 0.0)) / (a - 1.0),
                ),
            )
            em = integral + 0.5 * (fs + fb)
            rs = np.ones_like(xs)
            rb = np.ones_like(xb)
            nxt = 0.0
            for j in range(1, _ORDER + 2):
                for i in (2 * j - 3, 2 * j - 2) if j > 1 else (0,):
                    rs = rs * ((a + i) / xs)
                    rb = rb * ((a + i) / xb)
                term = _B2J_OVER_FACT[j - 1] * (-rb * fb + rs * fs)
                if j <= _ORDER:
                    em = em + term
                else:
                    nxt = term
            total[rest] = total[rest] + (em + 0.5 * nxt)
    total[bad] = np.nan
    return total


def _em_scaled_many(anchor: _Anchor, ks: int, kb: np.ndarray, alpha: float) -> np.ndarray:
    """:func:`_em_scaled` for an array of upper ends ``kb`` (Theorem 8, order 6), in numpy."""
    kbf = kb.astype(float)
    x_s = anchor.hi + float(ks)
    x_b = anchor.hi + kbf
    f_s = anchor.term(ks)
    f_b = anchor.terms(kbf)
    diff = kb - ks if kb.dtype.kind in "iu" else kbf - float(ks)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        L = np.log1p(diff.astype(float) / x_s)
        u = (1.0 - alpha) * L
        au = np.abs(u)
        small = au <= 1.0
        ratio = np.where(u == 0.0, 1.0, np.expm1(np.where(small, u, 0.0)) / np.where(small & (u != 0.0), u, 1.0))
        integral = np.where(
            small,
            x_s * f_s * L * ratio,
            np.where(
                u > 1.0,
                x_b * f_b * -np.expm1(-np.where(u > 1.0, u, 0.0)) / (1.0 - alpha),
                x_s * f_s * -np.expm1(np.where(u < -1.0, u, 0.0)) / (alpha - 1.0),
            ),
        )
        total = integral + 0.5 * (f_s + f_b)
        rs = 1.0
        rb = np.ones_like(x_b)
        nxt = 0.0
        for j in range(1, _ORDER + 2):
            for i in (2 * j - 3, 2 * j - 2) if j > 1 else (0,):
                rs *= (alpha + i) / x_s
                rb = rb * ((alpha + i) / x_b)
            term = _B2J_OVER_FACT[j - 1] * (-rb * f_b + rs * f_s)
            if j <= _ORDER:
                total = total + term
            else:
                nxt = term
    return total + 0.5 * nxt


def _em_scaled(anchor: _Anchor, ks: int, kb: int, alpha: float) -> float:
    """Euler–Maclaurin estimate of order 6 for the scaled sum over ``k = ks .. kb`` (Theorem 8)."""
    x_s, x_b = anchor.hi + float(ks), anchor.hi + float(kb)
    f_s, f_b = anchor.term(ks), anchor.term(kb)
    L = math.log1p(float(kb - ks) / x_s)  # log(x_b / x_s) from the exact integer difference
    u = (1.0 - alpha) * L
    # int (x + o)^-alpha dx over [ks, kb], scaled, in a form without a pole at alpha = 1
    if abs(u) <= 1.0:
        integral = x_s * f_s * L * (1.0 if u == 0.0 else math.expm1(u) / u)
    elif u > 1.0:
        integral = x_b * f_b * -math.expm1(-u) / (1.0 - alpha)
    else:
        integral = x_s * f_s * -math.expm1(u) / (alpha - 1.0)
    total = integral + 0.5 * (f_s + f_b)
    # f^(m)(x) = -(alpha)_m x^-m f(x) for odd m; (alpha)_m x^-m as a product of ratios
    rs, rb = 1.0, 1.0
    nxt = 0.0
    for j in range(1, _ORDER + 2):
        for i in (2 * j - 3, 2 * j - 2) if j > 1 else (0,):
            rs *= (alpha + i) / x_s
            rb *= (alpha + i) / x_b
        term = _B2J_OVER_FACT[j - 1] * (-rb * f_b + rs * f_s)
        if j <= _ORDER:
            total += term
        else:
            nxt = term
    return total + 0.5 * nxt


def power_sum(a: int, b: int, alpha: float, shift: float = 0.0) -> float:
    """:math:`\\sum_{k=a}^{b}(k+s)^{-\\alpha}` in double precision (``a + s > 0``), O(1) time.

    The float route of the module docstring with anchor :math:`(a+s)^{-\\alpha}`; the
    result itself may overflow or underflow where the sum does.
    """
    if b < a:
        return 0.0
    x_a = a + shift
    return scaled_sum(0, b - a, alpha, x_a) * x_a ** (-alpha)


def _arb_int(k: int) -> flint.arb:
    return flint.arb(int(k))  # exact: Arb stores integers of any size without rounding


def arb_sum(d0: int, d1: int, alpha: float, offset: float) -> flint.arb:
    """A ball containing :math:`\\sum_{d=d_0}^{d_1}(d+o)^{-\\alpha}` at the current Arb precision.

    Call inside :func:`otprior._balls.arb_precision`. Hurwitz zeta difference (digamma at
    ``alpha = 1``), direct summation below 40 terms; where the zeta ball is not finite
    (exponents beyond Arb's zeta range), the first terms plus the tail bound
    :math:`0\\le\\sum_{d\\ge D}f(d)\\le f(D)\\,(1+(D+o)/(\\alpha-1))`.
    """
    if d1 < d0:
        return flint.arb(0)
    a = arb_from_float(alpha)
    o = arb_from_float(offset)
    if d1 - d0 < _DIRECT:
        return sum(((_arb_int(d) + o) ** (-a) for d in range(d0, d1 + 1)), flint.arb(0))
    lo_arg, hi_arg = _arb_int(d0) + o, _arb_int(d1 + 1) + o
    if alpha == 1.0:
        value = hi_arg.digamma() - lo_arg.digamma()
    else:
        value = a.zeta(lo_arg) - a.zeta(hi_arg)
    if value.is_finite() or alpha <= 1.0:
        return value
    return _arb_head_and_tail(d0, d1, a, o, alpha)


def _arb_head_and_tail(d0, d1, a, o, alpha):
    """Direct terms until the tail bound is below 2^-prec of the head (alpha > 1 only)."""
    head = flint.arb(0)
    one = flint.arb(1)
    d = d0
    eps = flint.arb(2) ** (-flint.ctx.prec)
    while d <= d1:
        x = _arb_int(d) + o
        term = x ** (-a)
        bound = term * (one + x / (a - one))
        if d > d0 and bound < eps * head:
            half = bound.upper() / 2  # the tail lies in [0, bound] = [half +- half]
            return head + flint.arb(half, half)
        head += term
        d += 1
        if d - d0 > _MAX_HEAD:
            break
    if d > d1:
        return head
    return flint.arb("nan")


def em_bracket_arb(d0: int, d1: int, alpha: float, offset: float, order: int, head: int = 8) -> flint.arb:
    """Theorem 8's Euler–Maclaurin bracket of order ``order`` as one ball, in Arb arithmetic.

    ``head`` terms are added exactly; on the rest the sum lies between :math:`E_p` and
    :math:`E_p+\\tau_{p+1}`; the ball returned covers both (and their rounding).
    """
    if d1 < d0:
        return flint.arb(0)
    a = arb_from_float(alpha)
    o = arb_from_float(offset)
    head_end = min(d1, d0 + head - 1)
    total = sum(((_arb_int(d) + o) ** (-a) for d in range(d0, head_end + 1)), flint.arb(0))
    if head_end == d1:
        return total
    xa, xb = _arb_int(head_end + 1) + o, _arb_int(d1) + o
    one = flint.arb(1)
    if alpha == 1.0:
        integral = (xb / xa).log()
    else:
        integral = (xb ** (one - a) - xa ** (one - a)) / (one - a)
    est = integral + (xa ** (-a) + xb ** (-a)) / 2

    def odd_derivative(x, m):  # f^(m)(x) = -(alpha)_m x^(-alpha-m), m odd
        rising = one
        for i in range(m):
            rising *= a + i
        return -rising * x ** (-a - m)

    for j in range(1, order + 1):
        p, q = _B2J_FRACTIONS[j - 1]
        est += flint.arb(p) / q * (odd_derivative(xb, 2 * j - 1) - odd_derivative(xa, 2 * j - 1))
    p, q = _B2J_FRACTIONS[order]
    nxt = flint.arb(p) / q * (odd_derivative(xb, 2 * order + 1) - odd_derivative(xa, 2 * order + 1))
    # the sum lies between est and est + nxt (Theorem 8): the ball covering both
    return total + est.union(est + nxt)
