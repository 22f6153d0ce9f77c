"""Log-distance priors: window and distant masses, fast in floats and proved in balls.

Definition (Theorem 7, ``proofs/log_distance_prior.md``). The bias
:math:`b(d) = -\\alpha\\log(d + o)` (offset ``o = 1`` by default) gives the prior
:math:`\\pi_n(d) = (d+o)^{-\\alpha}/Z_n`, ``d = 0..n-1``, so

.. math::

    m_n(W;\\alpha) = \\frac{H}{H+T},\\qquad D_n(W;\\alpha) = 1 - m_n = \\frac{T}{H + T},\\qquad
    H = \\sum_{d=0}^{W-1}(d+o)^{-\\alpha},\\quad T = \\sum_{d=W}^{n-1}(d+o)^{-\\alpha}.

Both masses are formed from the two sums (never as ``1 - m``), so each keeps its
relative accuracy when it is tiny. Two routes:

* the float route (:func:`window_mass`, :func:`distant_mass`) evaluates ``H`` and ``T``
  divided by the largest term :math:`o^{-\\alpha}` (``otprior._power_sums.scaled_sum``):
  no overflow for offsets in :math:`[10^{-300}, 10^{300}]`, exponents up to
  :math:`10^{15}`, lengths up to :math:`10^{300}`;
* the ball route (:func:`window_mass_bounds`, :func:`distant_mass_bounds`, and ``dps=``)
  evaluates them with Arb's Hurwitz zeta and returns an :class:`~otprior._balls.Enclosure`
  proved by outward-rounded ball arithmetic (Theorem 8, ``proofs/window_mass_bounds.md``),
  raising the working precision until the ball is tight.

Every function broadcasts over array-like arguments (numpy rules) and returns an array
(or an :class:`~otprior._balls.EnclosureArray`); scalars in give scalars out.
"""

from __future__ import annotations

import math

import flint
import mpmath
import numpy as np

from ._balls import Enclosure, EnclosureArray, arb_precision, enclosure_from_arb, enclosure_from_ends, is_tight
from ._power_sums import (
    anchor_factor,
    anchor_factor_many,
    arb_sum,
    em_bracket_arb,
    scaled_sum,
    scaled_sum_many,
    scaled_sum_vec,
)
from ._validation import (
    ALPHA,
    BAND_SCORE_BOUND,
    OFFSET,
    DomainError,
    PrecisionError,
    check_int,
    check_real,
    refuse_masked,
)
from .content_bound import content_band_balls

__all__ = ["window_mass", "distant_mass", "window_mass_bounds", "distant_mass_bounds"]

MAX_LENGTH = int(1e300)  # the double 1e300 as an exact integer (10**300 + 5.3e283): the bound is inclusive of it
MAX_ALPHA = ALPHA.high  # the one domain of alpha and offset: otprior._validation (API, encoding, CLI)
MIN_OFFSET, MAX_OFFSET = OFFSET.low, OFFSET.high
_MAX_DPS = 950
_START_PREC = 96
_MAX_PREC = 1 << 14
_FLOAT_BITS = 62  # ball radius at most 2^-62 of the value: its float end points are within 2 ulps


def _check(window, n, alpha, offset):
    """Validated ``(window, n, alpha, offset)``: exact integers and floats in the supported domain."""
    n = check_int(n, "n", minimum=1)
    window = check_int(window, "window", minimum=1)
    if n > MAX_LENGTH:
        raise DomainError("n", n, "an integer in [window, 1e300] (at most the double 1e300 as an exact integer)")
    if window > n:
        raise DomainError("n", n, f"an integer in [window, 1e300] = [{window}, 1e300]")
    alpha = _real(alpha, "alpha", "a real number in (0, 1e15]", low=0.0, high=MAX_ALPHA, low_open=True)
    offset = _real(offset, "offset", "a real number in [1e-300, 1e300]", low=MIN_OFFSET, high=MAX_OFFSET)
    return window, n, alpha, offset


def _is_array(x) -> bool:
    if not isinstance(x, (list, tuple, np.ndarray)):
        return False
    try:
        return np.ndim(x) > 0
    except ValueError:  # ragged: refused element by element
        return True


def _real(value, name, domain, **bounds):
    """``check_real`` with booleans refused and integers too large for a double refused."""
    if isinstance(value, (bool, np.bool_)):
        raise DomainError(name, value, domain)
    try:
        return check_real(value, name, **bounds)
    except OverflowError:
        raise DomainError(name, value, domain) from None


def _as_object_array(x, name):
    try:
        return np.asarray(x, dtype=object)
    except ValueError:
        raise DomainError(name, x, "a number or a rectangular array of numbers") from None


def _scalar(x):
    return x.item() if isinstance(x, np.ndarray) else x


def _broadcast(func, names, args, out="float"):
    """Apply ``func`` to scalars, or element-wise over the broadcast of array-like arguments.

    ``out``: ``"float"`` gives a float array, ``"object"`` an object array (mpf results),
    ``"enclosure"`` an :class:`EnclosureArray`.
    """
    for a, name in zip(args, names, strict=True):
        refuse_masked(a, name)
    if not any(_is_array(a) for a in args):
        return func(*(_scalar(a) for a in args))
    arrays = [_as_object_array(a, name) for a, name in zip(args, names, strict=True)]
    try:
        arrays = np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(f"{name}: {np.shape(a)}" for a, name in zip(args, names, strict=True))
        raise DomainError(names[0], shapes, "arrays whose shapes broadcast together") from None
    shape = arrays[0].shape
    results = [func(*(a[index] for a in arrays)) for index in np.ndindex(shape)]
    if out == "enclosure":
        return EnclosureArray.stack(results, shape)
    if out == "object":
        res = np.empty(len(results), dtype=object)
        res[:] = results
        return res.reshape(shape)
    return np.array(results, dtype=float).reshape(shape)


# ---------------------------------------------------------------------------------------
# float route


def _float_masses(window, n, alpha, offset):
    """``(m, D)`` in double precision from the scaled sums (Theorem 7, part 1)."""
    window, n, alpha, offset = _check(window, n, alpha, offset)
    head = scaled_sum(0, window - 1, alpha, offset)  # H / o^-alpha, at least 1
    if window == n:
        return 1.0, 0.0
    tail = scaled_sum(window, n - 1, alpha, offset)  # T / (W + o)^-alpha, at least 1
    factor, y = anchor_factor(window, alpha, offset)  # ((W + o)/o)^-alpha = e^-y
    if factor > 1e-290:
        t = factor * tail
        return head / (head + t), t / (head + t)
    # the factor underflows: H/T = e^(log h - log t + y), formed in logarithms
    log_ratio = math.log(head) - math.log(tail) + y
    r = math.exp(-log_ratio) if log_ratio > -700.0 else math.inf
    if math.isinf(r):
        return 0.0, 1.0
    return 1.0 / (1.0 + r), r / (1.0 + r)


def _fast_arrays(window, n, alpha, offset):
    """The broadcast numeric arrays ``(W, n, alpha, offset)`` when every element is valid and
    the lengths are machine integers (int64/uint64, or integral floats up to 2**53), else ``None``
    (the element-wise route then answers, or raises the element's own error)."""
    try:
        arrs = [np.asarray(x) for x in (window, n, alpha, offset)]
    except (ValueError, TypeError):
        return None
    for a in arrs:
        if a.dtype.kind not in "iuf" or a.dtype == np.bool_:
            return None
    W, N, A, Off = arrs
    try:
        W, N, A, Off = np.broadcast_arrays(W, N, A, Off)
    except ValueError:
        return None
    ints = []
    for a in (W, N):
        if a.dtype.kind == "f":
            if not (np.all(np.isfinite(a)) and np.all(a == np.floor(a)) and np.all(np.abs(a) <= 2.0**53)):
                return None
            a = a.astype(np.int64)
        elif a.dtype.kind == "u" and a.dtype.itemsize == 8:
            if a.size and a.max() > np.iinfo(np.int64).max:
                return None
            a = a.astype(np.int64)
        else:
            a = a.astype(np.int64)
        ints.append(a)
    W, N = ints
    A = A.astype(float)
    Off = Off.astype(float)
    with np.errstate(invalid="ignore"):
        ok = (
            np.all(W >= 1)
            and np.all(N >= W)
            and np.all((A > 0.0) & (A <= MAX_ALPHA))
            and np.all((Off >= MIN_OFFSET) & (Off <= MAX_OFFSET))
        )
    return (W, N, A, Off) if ok else None


def _combine(head, tail, factor, y):
    """``(m, D)`` from the scaled sums and the anchor factor, as :func:`_float_masses` does."""
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        t = factor * tail
        m1, D1 = head / (head + t), t / (head + t)
        log_ratio = np.log(head) - np.log(tail) + y
        r = np.where(log_ratio > -700.0, np.exp(-np.maximum(log_ratio, -700.0)), np.inf)
        fin = np.isfinite(r)
        rr = np.where(fin, r, 0.0)
        m2 = np.where(fin, 1.0 / (1.0 + rr), 0.0)
        D2 = np.where(fin, rr / (1.0 + rr), 1.0)
    use_first = factor > 1e-290
    return np.where(use_first, m1, m2), np.where(use_first, D1, D2)


def _float_masses_vec(W, N, A, Off, shape):
    """``(m, D)`` for arrays of distinct ``(window, alpha, offset)``: one vectorised pass over all
    elements (``scaled_sum_vec``, ``anchor_factor_many``), element-wise where a head is too long;
    ``None`` when a length exceeds 2**53 (then the element-wise route answers)."""
    if W.size and int(N.max()) >= 1 << 53:
        return None
    m = np.ones(W.size)
    D = np.zeros(W.size)
    part = N > W
    if np.any(part):
        w, n, a, o = W[part], N[part], A[part], Off[part]
        head = scaled_sum_vec(np.zeros_like(w), w - 1, a, o)
        tail = scaled_sum_vec(w, n - 1, a, o)
        factor, y = anchor_factor_many(w, a, o)
        mp, Dp = _combine(head, tail, factor, y)
        redo = np.flatnonzero(np.isnan(head) | np.isnan(tail))
        for i in redo:  # heads beyond the vectorised cap: the scalar route
            mp[i], Dp[i] = _float_masses(int(w[i]), int(n[i]), float(a[i]), float(o[i]))
        m[part], D[part] = mp, Dp
    return m.reshape(shape), D.reshape(shape)


def _float_masses_many(W, N, A, Off):
    """``(m, D)`` arrays of :func:`_float_masses` over validated broadcast arrays, one numpy pass
    per distinct ``(window, alpha, offset)`` (the sums over the lengths by ``scaled_sum_many``);
    ``None`` when most triples are distinct (the element-wise route is then faster)."""
    shape = W.shape
    W, N, A, Off = (x.ravel() for x in (W, N, A, Off))
    m = np.empty(W.size)
    D = np.empty(W.size)
    single = W.size and all(x.min() == x.max() for x in (W, A, Off))
    if single:  # one (window, alpha, offset): no grouping
        uniq, order, bounds = [None], np.arange(W.size), [0, W.size]
    elif W.size:
        keys = np.stack([W.astype(float), A, Off], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        if len(uniq) > max(8, W.size // 4):
            # mostly distinct (window, alpha, offset): every element in one vectorised pass
            return _float_masses_vec(W, N, A, Off, shape)
        inverse = inverse.ravel()
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    else:
        uniq, order, bounds = [], np.zeros(0, dtype=int), [0]
    for g in range(len(uniq)):
        sel = order[bounds[g] : bounds[g + 1]]
        w, alpha, offset = int(W[sel[0]]), float(A[sel[0]]), float(Off[sel[0]])
        nn = N[sel]
        full = nn == w
        m_g = np.ones(sel.size)
        D_g = np.zeros(sel.size)
        part = ~full
        if np.any(part):
            head = scaled_sum(0, w - 1, alpha, offset)
            tail = scaled_sum_many(w, nn[part] - 1, alpha, offset)
            factor, y = anchor_factor(w, alpha, offset)
            if factor > 1e-290:
                t = factor * tail
                m_g[part] = head / (head + t)
                D_g[part] = t / (head + t)
            else:  # as _float_masses: H/T = e^(log h - log t + y), formed in logarithms
                log_ratio = math.log(head) - np.log(tail) + y
                with np.errstate(over="ignore", under="ignore"):
                    r = np.where(log_ratio > -700.0, np.exp(-np.maximum(log_ratio, -700.0)), np.inf)
                    fin = np.isfinite(r)
                    m_p = np.where(fin, 1.0 / (1.0 + np.where(fin, r, 0.0)), 0.0)
                    D_p = np.where(fin, np.where(fin, r, 0.0) / (1.0 + np.where(fin, r, 0.0)), 1.0)
                m_g[part] = m_p
                D_g[part] = D_p
        m[sel] = m_g
        D[sel] = D_g
    return m.reshape(shape), D.reshape(shape)


# ---------------------------------------------------------------------------------------
# ball route


def _sum_balls(window, n, alpha, offset, order):
    if order is None:
        return arb_sum(0, window - 1, alpha, offset), arb_sum(window, n - 1, alpha, offset)
    return em_bracket_arb(0, window - 1, alpha, offset, order), em_bracket_arb(window, n - 1, alpha, offset, order)


def _mass_ball(kind, window, n, alpha, offset, *, score_bound=0.0, order=None, bits=_FLOAT_BITS, dps=None):
    """The mass (``kind`` = "window" or "distant") as an Arb ball, precision raised until tight.

    Returns ``(ball, prec)``; with ``score_bound`` a pair of balls, the two ends of
    Theorem 10's band.
    With ``order`` (Theorem 8's Euler–Maclaurin bracket) the bracket's own width is the
    answer: one evaluation at 192 bits.
    """
    prec = _START_PREC if dps is None else int(dps * 3.33) + 40
    while True:
        with arb_precision(prec):
            head, tail = _sum_balls(window, n, alpha, offset, order)
            if kind == "window":
                ball = flint.arb(1) if tail == 0 else flint.arb(1) / (flint.arb(1) + tail / head)
                parts = [ball]
            else:
                lo, hi = content_band_balls(tail, head, score_bound)
                ball = lo if score_bound == 0.0 else (lo, hi)
                parts = [lo] if score_bound == 0.0 else [lo, hi]
            if order is not None:
                if prec >= 192 and all(x.is_finite() for x in parts):
                    return ball, prec
            elif all(is_tight(x, bits) for x in parts):
                return ball, prec
        if prec >= _MAX_PREC:
            if all(x.is_finite() for x in parts):
                return ball, prec
            raise PrecisionError(
                f"{kind} mass for window={window}, n={n}, alpha={alpha!r}, offset={offset!r}: "
                f"no finite ball at {_MAX_PREC} bits"
            )
        prec *= 2


def _enclosure(kind, window, n, alpha, offset, score_bound, order):
    window, n, alpha, offset = _check(window, n, alpha, offset)
    if order is not None:
        order = check_int(order, "order", minimum=0, maximum=8)
    B = BAND_SCORE_BOUND.check(score_bound, "score_bound")  # booleans and huge integers refused too
    ball, prec = _mass_ball(kind, window, n, alpha, offset, score_bound=B, order=order)
    with arb_precision(prec):
        enc = enclosure_from_ends(*ball) if isinstance(ball, tuple) else enclosure_from_arb(ball)
    # a mass lies in [0, 1]: intersecting the proved enclosure with it keeps it proved. The
    # enclosure is the ball's (relative radius below 2^-62, rounded outward to doubles):
    # it is not widened to hold the float route's value, which is within its own stated
    # error of the ball instead (Theorem 7, proofs/log_distance_prior.md)
    return Enclosure(lo=max(0.0, enc.lo), hi=min(1.0, enc.hi), mid=enc.mid, rad=enc.rad)


def _mp_mass(kind, window, n, alpha, offset, dps):
    """The mass as an mpmath number correct to ``dps`` digits, proved by an Arb ball.

    The ball's relative radius is brought below ``10^-(dps+2)``; its midpoint becomes an
    ``mpf`` of a private context (:class:`mpmath.MPContext`) at ``dps + 5`` digits, so the
    caller's global mpmath precision is neither read nor changed.
    """
    window, n, alpha, offset = _check(window, n, alpha, offset)
    dps = check_int(dps, "dps", minimum=1, maximum=_MAX_DPS)
    bits = int(math.ceil((dps + 2) * math.log2(10)))
    ball, prec = _mass_ball(kind, window, n, alpha, offset, bits=bits, dps=dps)
    ctx = mpmath.MPContext()
    ctx.dps = dps + 5
    with arb_precision(prec):
        man, exp = ball.mid().man_exp()
    return ctx.mpf((int(man), int(exp)))


# ---------------------------------------------------------------------------------------
# public functions


def window_mass(window, n, alpha, *, offset=1.0, dps=None):
    """Window mass :math:`m_n(W;\\alpha)` of the log-distance prior :math:`(d+o)^{-\\alpha}`.

    Parameters
    ----------
    window : int or array_like of int
        ``W >= 1``: the ``W`` nearest keys, ``d < W``.
    n : int or array_like of int
        Context length, ``W <= n <= 1e300`` (the double ``1e300`` as an exact integer, included).
        Integers are taken exactly: ``int``, ``np.integer``, a ``Fraction`` with denominator 1, an
        integral ``Decimal`` or float (a float above ``2**53`` is the exact integer it represents).
    alpha : float or array_like
        Exponent in :math:`(0, 10^{15}]`; ``alpha = 1`` and its neighbourhood are exact.
    offset : float or array_like
        ``o`` in :math:`[10^{-300}, 10^{300}]`, in :math:`b(d) = -\\alpha\\log(d + o)`.
    dps : int, optional
        Return an ``mpmath.mpf`` correct to ``dps`` significant digits (at most 950),
        proved by an Arb ball (the route of :func:`window_mass_bounds`).

    Returns
    -------
    float, or ndarray when an argument is an array (object array of ``mpf`` with ``dps``).

    Notes
    -----
    Float route: ``H`` and ``T`` divided by :math:`o^{-\\alpha}` (module docstring), summed
    exactly up to :math:`x = \\max(x_0 + 16, 4\\alpha + 16)` and by Euler–Maclaurin of order 6
    beyond (Theorem 8). O(1) time in ``n``. Stated relative error
    :math:`8\\varepsilon(1 + |\\ln m|)`: an estimate, not a proof, measured against the proved
    ball on seeded random grids (worst found :math:`1.22\\,\\varepsilon(1 + |\\ln m|)`,
    ``tests/test_log_distance_rigour.py``); results below :math:`2^{-1022}` carry absolute
    error :math:`2^{-1074}`. The proved value is :func:`window_mass_bounds`, whose
    enclosure (relative width at most :math:`2^{-61}`) is not widened to hold this float.

    Examples
    --------
    >>> round(window_mass(64, 8192, 1.0), 6)  # H_64 / H_8192
    0.494764
    >>> window_mass(1, 10**15, 2.0) > 6 / math.pi**2
    True
    >>> window_mass(64, [1024, 2048], 1.05).round(4)
    array([0.6743, 0.6274])
    """
    if dps is not None:
        return _broadcast(lambda w, m, a, o: _mp_mass("window", w, m, a, o, dps), _NAMES, (window, n, alpha, offset), "object")
    return _masses_route(0, window, n, alpha, offset)


def distant_mass(window, n, alpha, *, offset=1.0, dps=None):
    """Distant mass :math:`D_n(W;\\alpha) = T/(H+T)`, the share of keys at distance ``>= W``.

    Parameters, returns and algorithm as :func:`window_mass`; computed from the tail sum
    ``T`` (never as ``1 - m``), with the same relative error bound in terms of ``D``.

    Examples
    --------
    >>> round(distant_mass(64, 8192, 1.0), 6)
    0.505236
    >>> distant_mass(5, 5, 1.3)
    0.0
    """
    if dps is not None:
        return _broadcast(lambda w, m, a, o: _mp_mass("distant", w, m, a, o, dps), _NAMES, (window, n, alpha, offset), "object")
    return _masses_route(1, window, n, alpha, offset)


_NAMES = ("window", "n", "alpha", "offset")


def _masses_route(which, window, n, alpha, offset):
    """The float route: vectorised over arrays of machine integers, element-wise otherwise."""
    args = (window, n, alpha, offset)
    for a, name in zip(args, _NAMES, strict=True):
        refuse_masked(a, name)  # np.asarray would read the masked entries' stored numbers
    if any(_is_array(a) for a in args):
        fast = _fast_arrays(*args)
        if fast is not None:
            out = _float_masses_many(*fast)
            if out is not None:
                return out[which]
    return _broadcast(lambda w, m, a, o: _float_masses(w, m, a, o)[which], _NAMES, args)


def window_mass_bounds(window, n, alpha, *, offset=1.0, order=None):
    """Proved enclosure of :math:`m_n(W;\\alpha)` (Theorem 8).

    Parameters
    ----------
    window, n, alpha, offset : as :func:`window_mass` (broadcast).
    order : int, optional
        ``None`` (default): ``H`` and ``T`` are Arb balls of Hurwitz zeta differences
        (digamma at ``alpha = 1``), at a precision raised until the mass's ball has
        relative radius below :math:`2^{-62}`. An integer ``p`` in ``0..8``: Theorem 8's
        closed-form Euler–Maclaurin bracket of order ``p`` (8 exact terms, then the
        truncations of orders ``p`` and ``p + 1``), evaluated in ball arithmetic; its width
        is the truncation's.

    Returns
    -------
    Enclosure
        ``lo <= m <= hi`` proved (ball end points rounded outward to doubles, then
        intersected with [0, 1]; the float route's :func:`window_mass` lies within its
        stated error of ``mid``, not necessarily inside);
        ``mid`` is the ball's midpoint and ``rad`` covers both; ``as_dict()``.
        Unpacks as ``(lo, hi)``. An :class:`~otprior._balls.EnclosureArray` for array input.

    Examples
    --------
    >>> e = window_mass_bounds(64, 10**12, 1.05)
    >>> e.lo <= window_mass(64, 10**12, 1.05) <= e.hi and e.relative_width() < 1e-15
    True
    >>> lo, hi = window_mass_bounds(1, 11, 1.0, offset=950)
    >>> from fractions import Fraction
    >>> lo <= 1 / sum(Fraction(950, 950 + d) for d in range(11)) <= hi  # exact rational value
    True
    """
    return _broadcast(
        lambda w, m, a, o: _enclosure("window", w, m, a, o, 0.0, order), _NAMES, (window, n, alpha, offset), "enclosure"
    )


def distant_mass_bounds(window, n, alpha, *, offset=1.0, order=None, score_bound=0.0):
    """Proved enclosure of :math:`D_n(W;\\alpha)`, optionally over content scores (Theorems 8, 10).

    With ``score_bound = B > 0`` (at most 350, :data:`otprior._validation.BAND_SCORE_BOUND`: beyond
    it :math:`e^{2B}` overflows a double) the enclosure covers every attention row
    whose content scores lie within ``B`` of a constant (Theorem 10,
    :func:`otprior.content_bound.content_band_balls`):
    :math:`T/(T + e^{2B}H) \\le D \\le T/(T + e^{-2B}H)`, the two ends proved.

    Parameters and returns as :func:`window_mass_bounds`.

    Examples
    --------
    >>> e = distant_mass_bounds(64, 8192, 1.3, score_bound=0.25)
    >>> e.lo < distant_mass(64, 8192, 1.3) < e.hi
    True
    """
    return _broadcast(
        lambda w, m, a, o: _enclosure("distant", w, m, a, o, score_bound, order), _NAMES, (window, n, alpha, offset), "enclosure"
    )
