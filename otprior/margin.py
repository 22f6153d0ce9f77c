"""Margin selection: how far above one must a log-distance exponent stay?

Definition (Theorem 9, ``proofs/margin_selection.md``). For a window ``W``, lengths
``L0 < L1`` (``Lrange``) and a tolerance ``tol``, the margin is the smallest ``delta >= 0``
such that every exponent ``alpha >= 1 + delta`` keeps the growth of distant mass

* absolute: :math:`g(\\alpha) = D_{L_1}(W;\\alpha) - D_{L_0}(W;\\alpha) \\le tol`, or
* relative: :math:`D_{L_1}/D_{L_0} - 1 \\le tol` (searched as :math:`\\log(D_{L_1}/D_{L_0})\\le\\log(1+tol)`),

where, with a content-score bound ``B`` (Theorem 10, :mod:`otprior.content_bound`),
:math:`D_{L_1}` is replaced by its largest and :math:`D_{L_0}` by its smallest value over
content scores within ``B`` of a constant.

Everything that decides the answer is evaluated in Arb ball arithmetic: the sums
``H``, ``T_{L0}``, ``T_{L1}`` (Hurwitz zeta differences), the growth, the Lipschitz bound
of Lemma 9a, the closed-form tail bound of Lemma 9b and every comparison with ``tol``
(an Arb comparison is true only when it holds for every point of the balls). The search
does not assume that ``g`` is monotone: a top-down branch and bound over
:math:`[1, \\alpha_{hi}]` drops an interval once the Lipschitz bound proves ``g <= tol``
on all of it.
"""

from __future__ import annotations

import collections.abc
import math
from dataclasses import dataclass, field

import flint
import numpy as np

from ._balls import Enclosure, arb_from_float, arb_precision, enclosure_from_arb
from ._validation import BAND_SCORE_BOUND, OFFSET, TOL, DomainError, check_int, check_real
from .content_bound import content_band_balls

__all__ = ["margin_for", "MarginResult", "NoMarginError"]

_START_PREC = 96
_MAX_PREC = 1 << 13
_GROWTH_BITS = 40  # growth balls are refined to a relative radius of 2^-40
_MAX_EXPONENT = 1e300


_DIRECT_CAP = 512  # direct terms of a scaled sum before its tail bound or Euler–Maclaurin
_EM_MAX_ORDER = 48
_B_OVER_FACT = []  # B_2j / (2j)!, j = 1, 2, ... (exact fractions, filled on first use)


def _b_over_fact(j):
    while len(_B_OVER_FACT) < j:
        k = 2 * (len(_B_OVER_FACT) + 1)
        _B_OVER_FACT.append(flint.fmpq.bernoulli(k) / math.factorial(k))
    return _B_OVER_FACT[j - 1]


def arb_sum(d0: int, d1: int, alpha: float, offset: float) -> flint.arb:
    """A ball containing :math:`o^{\\alpha}\\sum_{d=d_0}^{d_1}(d+o)^{-\\alpha}=\\sum_{d=d_0}^{d_1}(1+d/o)^{-\\alpha}` (Lemma 9d).

    The common factor :math:`o^{-\\alpha}` is left out: every quantity of the growth is a ratio of
    these sums with the same ``alpha`` and ``o`` (homogeneous of degree 0), and without it an
    exponent of 1e20 at an offset of 1e23 needs no more bits than an exponent of 2 at offset 1.
    Terms :math:`g(d)=e^{-\\alpha\\log(1+d/o)}` are added one by one while :math:`d+o<\\max(2\\alpha,32)`
    (there they fall by a factor :math:`e^{-\\alpha/(d+o+1)}\\le e^{-1/3}` each), at most ``max(512, 4 prec)``;
    the rest is bounded by :math:`0\\le\\sum_{d\\ge D}g(d)\\le g(D)(1+(D+o)/(\\alpha-1))` when that is
    below :math:`2^{-prec}` of the head, else enclosed by Theorem 8's Euler–Maclaurin bracket for the
    completely monotone ``g`` (closed-form integral and derivatives
    :math:`g^{(m)}(x)=(-1)^m(\\alpha)_m(x+o)^{-m}g(x)`), its order raised until the bracket is below
    :math:`2^{-prec}` of the sum. Call inside :func:`otprior._balls.arb_precision`.
    """
    if d1 < d0:
        return flint.arb(0)
    a = arb_from_float(alpha)
    o = arb_from_float(offset)
    one = flint.arb(1)
    eps = flint.arb(2) ** (-flint.ctx.prec)

    def g(d):
        return (-a * (flint.arb(d) / o).log1p()).exp()

    head = flint.arb(0)
    d = d0
    reach = max(2.0 * alpha, 32.0)
    cap = max(_DIRECT_CAP, 4 * flint.ctx.prec)
    while d <= d1 and float(d) + offset < reach:
        term = g(d)
        if d > d0 and alpha > 1.0:
            bound = term * (one + (flint.arb(d) + o) / (a - one))
            if bound < eps * head:
                return head + flint.arb(bound.upper() / 2, bound.upper() / 2)
        head += term
        d += 1
        if d - d0 >= cap:
            return flint.arb("nan")  # not reached for alpha > 1 (the tail bound ends the head first)
    if d > d1:
        return head
    if d1 - d < 8:
        return head + sum((g(k) for k in range(d, d1 + 1)), flint.arb(0))
    xa, xb = flint.arb(d) + o, flint.arb(d1) + o
    ga, gb = g(d), g(d1)
    log_ratio = (flint.arb(d1 - d) / xa).log1p()  # log((d1 + o)/(d + o)), the difference exact
    # int_d^d1 g = (d + o) g(d) (1 - e^{-(alpha - 1) L}) / (alpha - 1), L = log((d1 + o)/(d + o))
    if alpha == 1.0:
        integral = xa * ga * log_ratio
    else:
        x = (a - one) * log_ratio  # > 0: alpha > 1 and d1 > d
        integral = xa * ga * log_ratio * (-(-x).expm1() / x)
    est = integral + (ga + gb) / 2
    m = 0
    ra, rb = ga, gb  # (alpha)_m (x + o)^-m g(x) at the two ends
    for j in range(1, _EM_MAX_ORDER + 1):
        while m < 2 * j - 1:
            ra, rb = ra * (a + m) / xa, rb * (a + m) / xb
            m += 1
        # B_2j/(2j)! (g^(2j-1)(d1) - g^(2j-1)(d)), g^(2j-1)(x) = -(alpha)_(2j-1) (x + o)^-(2j-1) g(x)
        term = flint.arb(_b_over_fact(j)) * (ra - rb)
        if j > 1 and abs(term) < eps * est:
            # the sum lies between the truncations of orders j - 1 and j (Theorem 8)
            return head + est.union(est + term)
        est += term
    return flint.arb("nan")


class NoMarginError(DomainError):
    """No exponent keeps the growth within ``tol``."""


@dataclass(frozen=True)
class MarginResult:
    """What :func:`margin_for` found, and what proves it.

    Attributes
    ----------
    margin : float
        ``delta``: every ``alpha >= 1 + margin`` keeps the growth at most ``tol`` (proved).
    exponent : float
        ``1 + margin``.
    growth : float
        The growth at ``exponent`` (the midpoint of its ball, at most ``tol``).
    growth_bounds : Enclosure
        Proved enclosure of the growth at ``exponent``.
    distant_mass : tuple of float
        ``(D_{L0}, D_{L1})`` at ``exponent`` (the extremes over content scores when
        ``score_bound > 0``; midpoints of their balls).
    bracket : Enclosure
        ``[lower, upper]`` with ``upper = margin``, both proved: every exponent
        ``>= 1 + upper`` keeps the growth within ``tol``, and the growth at ``1 + lower``
        exceeds ``tol`` (so no margin below ``lower`` works), or ``lower = 0``. Unpacks as
        ``(lower, upper)``.
    window, Lrange, tol, growth_kind, score_bound, offset : echo of the inputs
        (``lengths`` is a read-only alias of ``Lrange``).
    evaluations : int
        Growth balls evaluated by the search.
    """

    margin: float
    exponent: float
    growth: float
    growth_bounds: Enclosure
    distant_mass: tuple
    bracket: Enclosure
    window: int
    Lrange: tuple
    tol: float
    growth_kind: str
    score_bound: float
    offset: float
    evaluations: int = field(default=0, compare=False)

    @property
    def lengths(self) -> tuple:
        """Alias of :attr:`Lrange`."""
        return self.Lrange

    def __float__(self) -> float:
        return self.margin

    def as_dict(self) -> dict:
        return {
            "margin": self.margin,
            "exponent": self.exponent,
            "growth": self.growth,
            "growth_bounds": self.growth_bounds.as_dict(),
            "distant_mass": list(self.distant_mass),
            "bracket": list(self.bracket),
            "window": self.window,
            "Lrange": list(self.Lrange),
            "tol": self.tol,
            "growth_kind": self.growth_kind,
            "score_bound": self.score_bound,
            "offset": self.offset,
            "evaluations": self.evaluations,
        }


@dataclass(frozen=True)
class _Record:
    """Balls at one exponent: ``phi = log G`` with ``G`` the growth, the extreme distant
    masses ``d0`` (smallest at L0) and ``d1`` (largest at L1), and ``G`` itself."""

    phi: flint.arb
    d0: flint.arb
    d1: flint.arb
    growth: flint.arb
    log_up: flint.arb  # log of the factor of G that increases in alpha
    log_down: flint.arb  # log of the product of the factors that decrease
    prec: int
    # the second split of Lemma 9a(iii): G = F1 F2, F1 increasing, F2 = P/(T_{L1} + H/k) decreasing
    log_up2: flint.arb = None
    log_down2: flint.arb = None


class _Growth:
    """Growth of distant mass between two lengths, in Arb balls (Lemma 9a).

    With ``k = e^{2B}``, ``E = T_{L1} - T_{L0}`` and ``P = T_{L0}(k - 1/k) + k E``:

    * absolute: ``G = D+_{L1} - D-_{L0} = H P / ((T_{L1} + H/k)(T_{L0} + k H))``;
    * relative: ``G = D+_{L1} / D-_{L0} - 1 = H P / (T_{L0} (T_{L1} + H/k))``.

    Each factor is a positive combination of the terms ``(d + o)^-alpha``, ``d < L1``, so
    ``|d log G / d alpha| <= 2 Lambda`` with ``Lambda = log((L1 - 1 + o)/o)``. And ``G`` is a
    product of monotone factors: ``A = H/(T_{L1} + H/k)`` increases in alpha, while
    ``P/T_{L0}`` and ``T_{L0}/(T_{L0} + kH)`` (absolute growth only) decrease.
    """

    def __init__(self, window, L0, L1, relative, B, offset):
        self.W, self.L0, self.L1 = window, L0, L1
        self.relative = relative
        self.B = B
        self.offset = offset
        self.evaluations = 0
        with arb_precision(128):
            o = arb_from_float(offset)
            # Lemma 9a: Lipschitz constant of log G, 2 Lambda
            self.lipschitz = (2 * ((flint.arb(L1 - 1) + o) / o).log()).upper()

    def record(self, alpha: float) -> _Record:
        """Balls at ``alpha``, precision raised until ``phi`` has radius below 2^-40."""
        self.evaluations += 1
        prec = _START_PREC
        while True:
            with arb_precision(prec):
                rec = self._record(alpha, prec)
                tight = rec.phi.is_finite() and rec.phi.rad() <= flint.arb(2) ** -_GROWTH_BITS
            if tight or prec >= _MAX_PREC:
                return rec
            prec *= 2

    def _record(self, alpha, prec):
        W, o = self.W, self.offset
        H = arb_sum(0, W - 1, alpha, o)
        T0 = arb_sum(W, self.L0 - 1, alpha, o)
        E = arb_sum(self.L0, self.L1 - 1, alpha, o)
        T1 = T0 + E
        d0, _ = content_band_balls(T0, H, self.B)  # D_{L0} at its smallest (Theorem 10)
        _, d1 = content_band_balls(T1, H, self.B)  # D_{L1} at its largest
        if self.B == 0.0:
            k = flint.arb(1)
            P = E
        else:
            k = (2 * arb_from_float(self.B)).exp()
            P = T0 * (k - 1 / k) + k * E
        up = H / (T1 + H / k)
        down = P / T0 if self.relative else P / T0 * (T0 / (T0 + k * H))
        G = up * down
        # Lemma 9a(iii): where G is close to its limit the factors of (ii) vary much faster than G
        up2 = H / T0 if self.relative else H / (T0 + k * H)
        down2 = P / (T1 + H / k)
        if not (G > 0):
            nan = flint.arb("nan")
            return _Record(phi=nan, d0=d0, d1=d1, growth=G, log_up=nan, log_down=nan, prec=prec, log_up2=nan, log_down2=nan)
        return _Record(
            phi=G.log(),
            d0=d0,
            d1=d1,
            growth=G,
            log_up=up.log(),
            log_down=down.log(),
            prec=prec,
            log_up2=up2.log() if up2 > 0 else flint.arb("nan"),
            log_down2=down2.log() if down2 > 0 else flint.arb("nan"),
        )

    def interval_bound(self, a, b, ra, rb) -> flint.arb:
        """Ball containing an upper bound on max phi over [a, b] (Lemma 9a): the smallest of
        the Lipschitz bound ``(phi+(a) + phi+(b)) / 2 + Lambda (b - a)`` and the two monotone
        bounds ``log A(b) + log (G/A)(a)`` and ``log F1(b) + log F2(a)`` (part iii)."""
        with arb_precision(max(ra.prec, rb.prec, 128)):
            width = arb_from_float(b) - arb_from_float(a)
            lipschitz = ((ra.phi.upper() + rb.phi.upper()) / 2 + self.lipschitz * width / 2).upper()
            best = lipschitz
            for bound in (rb.log_up.upper() + ra.log_down.upper(), rb.log_up2.upper() + ra.log_down2.upper()):
                bound = bound.upper()
                if bound.is_finite() and bound < best:
                    best = bound
            return best

    def beyond_upper(self, alpha: float) -> flint.arb:
        """Lemma 9e: an upper bound on G at every exponent ``>= alpha``, from the record at ``alpha``.

        ``G = A (G/A)`` with ``A = H/(T_{L1} + H/k) < k`` for every exponent and ``G/A`` decreasing
        (Lemma 9a(ii)), so ``G(a') <= k (G/A)(alpha)`` for ``a' >= alpha``; for absolute growth also
        ``G = F1 F2`` with ``F1 = H/(T_{L0} + kH) < 1/k`` and ``F2`` decreasing (Lemma 9a(iii)).
        """
        rec = self.record(alpha)
        with arb_precision(max(rec.prec, 128)):
            k = (2 * arb_from_float(self.B)).exp()
            best = k * rec.log_down.exp()
            if not self.relative and rec.log_down2.is_finite():
                other = rec.log_down2.exp() / k
                if other.is_finite() and (not best.is_finite() or other.upper() < best.upper()):
                    best = other
            return best if best.is_finite() else flint.arb("inf")

    def decreasing_upper(self, alpha: float) -> flint.arb:
        """Lemma 9b: a closed-form upper bound on G for alpha > 1, decreasing in alpha.

        ``T_oo / H <= rho(alpha) = ((W + o)/o)^-alpha (1 + (W + o)/(alpha - 1))`` (first term
        of ``H``; first term plus integral for the tail). Absolute growth is at most
        ``e^{2B} rho``; the ratio ``D+_{L1} / D-_{L0}`` is at most
        ``(1 + (L1 - L0) ((W + o)/(L0 + o))^alpha)(e^{2B} rho + e^{4B})``.
        """
        with arb_precision(_upper_bits(alpha, self.offset, self.W)):
            a, o = arb_from_float(alpha), arb_from_float(self.offset)
            one = flint.arb(1)
            xw = flint.arb(self.W) + o
            rho = (xw / o) ** (-a) * (one + xw / (a - one))
            k = (2 * arb_from_float(self.B)).exp()
            if not self.relative:
                return k * rho
            # (1 + s)(k rho + k^2) - 1 = s (k rho + k^2) + k rho + expm1(4B), with
            # s = (L1 - L0)((W + o)/(L0 + o))^alpha: a sum of non-negative terms, so no
            # cancellation however small the tolerance (Lemma 9b, proofs/margin_selection.md)
            s = flint.arb(self.L1 - self.L0) * (xw / (flint.arb(self.L0) + o)) ** a
            return s * (k * rho + k * k) + k * rho + (4 * arb_from_float(self.B)).expm1()


def _upper_bits(alpha, offset, window):
    """Working precision of Lemma 9b's bound: forming ``(W + o)/o`` loses ``log2(o/W)`` bits and
    raising it to ``-alpha`` another ``log2(alpha)`` (at offset 1e300 the ratio is 1 + 6e-299)."""
    try:
        extra = max(0.0, math.log2(float(offset) / float(window))) + max(0.0, math.log2(float(alpha)))
    except (TypeError, ValueError, OverflowError):  # the machine checks run this code on intervals and symbols
        return 128
    return 128 + int(extra) + 8


def _certainly_at_most(x: flint.arb, level: flint.arb) -> bool:
    return bool(x <= level)


def margin_for(window, Lrange, tol, *, growth="absolute", score_bound=0.0, offset=1.0, precision=1e-10):
    """Smallest exponent margin keeping distant-mass growth within ``tol`` (Theorem 9).

    Parameters
    ----------
    window : int
        ``W >= 1``, smaller than ``min(Lrange)``.
    Lrange : sequence of two ints
        Increasing lengths ``(L0, L1)``, e.g. training and evaluation length (at most 1e300).
    tol : float
        Allowed growth, in ``(0, 1)``; down to ``1e-300``.
    growth : {"absolute", "relative"}
        Bound ``D_{L1} - D_{L0}`` or ``D_{L1} / D_{L0} - 1``.
    score_bound : float
        ``B`` in ``[0, 350]``: the answer holds for every row whose content scores lie within
        ``B`` of a constant, independently at each length (Theorem 10). The cap is that of
        every band route (:data:`otprior._validation.BAND_SCORE_BOUND`, where e^(2B) stays a
        finite double); the search itself is in ball arithmetic.
    offset : float
        ``o`` in ``[1e-300, 1e300]``, in the bias ``-alpha log(d + o)``.
    precision : float
        Resolution of the search in the exponent: the bracket is at most
        ``precision * max(1, margin)`` wide (or two adjacent doubles).

    Returns
    -------
    MarginResult
        ``float(result)`` is the margin; ``result.bracket`` its proved enclosure.

    Raises
    ------
    NoMarginError
        When no exponent achieves ``tol``: relative growth with ``exp(4 B) - 1 >= tol``
        (the limit as ``alpha -> oo``), or no exponent up to 1e300 that Lemma 9b certifies; the
        message says whether the growth at ``alpha = 1e300`` is proved above ``tol`` (then the
        margin exceeds 1e300 - 1: for ``o >> L1`` it is about ``o log(1/tol) / W``).

    Notes
    -----
    The sums are those of Lemma 9d (``proofs/margin_selection.md``): :math:`\\sum (1 + d/o)^{-\\alpha}`,
    the common factor :math:`o^{-\\alpha}` left out, by direct terms, a tail bound and Euler–Maclaurin;
    so every offset in ``[1e-300, 1e300]`` and every ``tol`` down to 1e-300 costs a few dozen
    balls of ordinary precision (milliseconds). The exponent returned may exceed the log-distance
    encodings' domain ``alpha <= 1e15`` (at large offsets the margin scales like ``o``).

    Examples
    --------
    >>> r = margin_for(64, (512, 8192), 0.05)
    >>> round(r.margin, 4), r.growth <= 0.05
    (0.3628, True)
    >>> lower, upper = r.bracket
    """
    window = check_int(window, "window", minimum=1)
    domain = "a sequence (tuple, list or 1-d array) of two increasing integer lengths (L0, L1), at most 1e300"
    # a sequence of two lengths: a dict, a set or an iterator is refused, not read for its keys
    if isinstance(Lrange, np.ndarray):
        if Lrange.ndim != 1:
            raise DomainError("Lrange", Lrange, domain)
    elif not isinstance(Lrange, collections.abc.Sequence) or isinstance(Lrange, (str, bytes)):
        raise DomainError("Lrange", Lrange, domain)
    try:
        items = list(Lrange)
    except TypeError:
        raise DomainError("Lrange", Lrange, domain) from None
    if len(items) != 2:
        raise DomainError("Lrange", Lrange, domain)
    try:
        L0, L1 = (check_int(x, "Lrange", minimum=1, maximum=int(1e300)) for x in items)
    except DomainError:
        raise DomainError("Lrange", Lrange, domain) from None
    if not L0 < L1:
        raise DomainError("Lrange", Lrange, domain)
    if window >= L0:
        raise DomainError("window", window, f"an integer in [1, min(Lrange) - 1] = [1, {L0 - 1}]")
    tol = TOL.check(tol, "tol")
    if growth not in ("absolute", "relative"):
        raise DomainError("growth", growth, "'absolute' or 'relative'")
    B = BAND_SCORE_BOUND.check(score_bound, "score_bound")  # the band routes' one domain
    offset = OFFSET.check(offset, "offset")
    precision = check_real(precision, "precision", low=1e-14, high=0.1)
    relative = growth == "relative"
    with arb_precision(256):
        level = arb_from_float(tol)  # G <= tol, for Lemma 9b
        log_level = level.log()  # phi = log G <= log tol, for the search
    if relative and 4.0 * B >= math.log1p(tol):
        raise NoMarginError(
            "score_bound",
            B,
            f"score_bound < log(1 + tol) / 4 = {math.log1p(tol) / 4:.6g} for relative growth "
            "(the limit as alpha -> oo is exp(4B) - 1)",
        )
    G = _Growth(window, L0, L1, relative, B, offset)
    # alpha_hi: the decreasing closed-form bound is <= tol beyond it (Lemma 9b)
    # the least k with U(1 + 2^k) <= tol proved, by bisection over k (U decreases; Lemma 9b): a
    # dozen balls instead of up to a thousand doublings
    top = int(math.log2(_MAX_EXPONENT))  # 2^996 < 1e300
    if _certainly_at_most(G.decreasing_upper(1.0 + 2.0**top), level):
        lo_k, hi_k = -1, top  # k = -1: a sentinel, never evaluated
        while hi_k - lo_k > 1:
            mid_k = (lo_k + hi_k) // 2
            if _certainly_at_most(G.decreasing_upper(1.0 + 2.0**mid_k), level):
                hi_k = mid_k
            else:
                lo_k = mid_k
        step = 2.0**hi_k
    else:
        step = 2.0 * _MAX_EXPONENT
    if step > _MAX_EXPONENT and _certainly_at_most(G.beyond_upper(_MAX_EXPONENT), level):
        # Lemma 9b does not reach tol below 1e300, but the monotone factors of Lemma 9a(ii) bound
        # G on all of [1e300, oo) (Lemma 9e): the search covers [1, 1e300]
        step = _MAX_EXPONENT - 1.0
    if step > _MAX_EXPONENT:
        # neither bound reaches tol from 1e300 on: say whether the growth itself is proved
        # above tol at the largest exponent (then the margin exceeds 1e300 - 1)
        above = bool(G.record(_MAX_EXPONENT).phi > log_level)
        why = (
            "the growth at alpha = 1e300 is proved above it, so the margin exceeds 1e300 - 1"
            if above
            else "no exponent up to 1e300 is proved to reach it (Lemma 9b)"
        )
        raise NoMarginError("tol", tol, f"a tolerance reached by some exponent alpha <= 1e300; here {why}")
    hit = _search(G, 1.0, 1.0 + step, log_level, precision)
    if hit is None:
        margin, lower = 0.0, 0.0
    else:
        a, b = hit
        margin = b - 1.0
        lower = _lower_end(G, a, log_level, precision)
    rec = G.record(1.0 + margin)
    with arb_precision(rec.prec):
        growth_enc = enclosure_from_arb(rec.growth)
        masses = (float(rec.d0.mid()), float(rec.d1.mid()))
    with arb_precision(64):
        bracket = enclosure_from_arb(arb_from_float(lower).union(arb_from_float(margin)))
    bracket = Enclosure(lo=lower, hi=margin, mid=bracket.mid, rad=bracket.rad)
    return MarginResult(
        margin=margin,
        exponent=1.0 + margin,
        growth=min(growth_enc.mid, tol),  # the midpoint of a ball whose every point is proved <= tol
        growth_bounds=growth_enc,
        distant_mass=masses,
        bracket=bracket,
        window=window,
        Lrange=(L0, L1),
        tol=tol,
        growth_kind=growth,
        score_bound=B,
        offset=offset,
        evaluations=G.evaluations,
    )


def _lower_end(G, a, level, precision):
    """The bracket's lower end: a margin below which the growth is proved above ``level``.

    Steps down from ``a`` (doubling) until a ball proves ``g > level``, then bisects towards
    ``a``; returns 0.0 when nothing above 1 is proved."""
    lower, step = a, precision * max(1.0, a - 1.0)
    while not bool(G.record(lower).phi > level):
        if lower <= 1.0:
            return 0.0
        lower = max(1.0, a - step)
        step *= 2.0
    top = a
    for _ in range(60):
        if top - lower <= precision * max(1.0, lower - 1.0) / 4:
            break
        mid = 0.5 * (lower + top)
        if mid in (lower, top):
            break
        if bool(G.record(mid).phi > level):
            lower = mid
        else:
            top = mid
    return max(0.0, lower - 1.0)


def _search(G, lo, hi, level, precision):
    """Top-first branch and bound for the highest point where g may exceed ``level`` (Theorem 9).

    Intervals are visited from the highest down. On [a, b] with balls ``ra``, ``rb`` and
    Lipschitz bound ``K``, ``max g <= (g+(a) + g+(b)) / 2 + K (b - a) / 2``; an interval
    whose bound is proved at most ``level`` is dropped. The first interval not proved, of
    width at most ``precision * max(1, a - 1)`` (or between adjacent doubles), is returned,
    with everything above it proved. ``None`` means ``g <= level`` on all of [lo, hi].
    """
    stack = [(lo, hi, G.record(lo), G.record(hi))]
    while stack:
        a, b, ra, rb = stack.pop()
        if _certainly_at_most(G.interval_bound(a, b, ra, rb), level):
            continue
        m = 0.5 * (a + b)
        if b - a <= precision * max(1.0, a - 1.0) or m in (a, b):
            return a, b
        rm = G.record(m)
        stack.append((a, m, ra, rm))  # the lower half is visited later
        stack.append((m, b, rm, rb))  # the upper half first
    return None
