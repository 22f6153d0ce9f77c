"""Margin selection: how far above one must a log-distance exponent stay?

Definition (Theorem 9, ``proofs/margin_selection.md``). For a window ``W``, lengths
``L0 < L1`` and a tolerance ``tol``, the margin is the smallest ``delta >= 0`` such that
every exponent ``alpha >= 1 + delta`` keeps the growth of distant mass

* absolute: :math:`g(\\alpha) = D_{L_1}(W;\\alpha) - D_{L_0}(W;\\alpha) \\le tol`, or
* relative: :math:`D_{L_1}/D_{L_0} - 1 \\le tol`,

where, with a content-score bound ``B`` (Theorem 10), :math:`D_{L_1}` is replaced by its
largest and :math:`D_{L_0}` by its smallest value over content scores within ``B`` of a
constant.

The search does not assume that ``g`` is monotone. Each ``D`` decreases in ``alpha``,
with :math:`|dD/d\\alpha| \\le \\Lambda_L/4` and :math:`|d\\log D/d\\alpha| \\le \\Lambda_L`,
:math:`\\Lambda_L = \\log\\frac{L+o-1}{o}` (Lemma 9a). So ``g`` is Lipschitz, and a
top-down branch and bound over :math:`[1, \\alpha_{hi}]` certifies that ``g <= tol`` on
whole intervals, using the certified bounds of Theorem 8. Beyond :math:`\\alpha_{hi}` a
closed-form decreasing upper bound (Lemma 9b) is at most ``tol``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ._power_sums import power_sum, power_sum_bounds
from ._validation import DomainError, check_int, check_real

__all__ = ["margin_for", "MarginResult", "NoMarginError"]

_EPS = 2.220446049250313e-16


class NoMarginError(DomainError):
    """No exponent keeps the growth within ``tol`` (only possible with a content bound)."""


@dataclass(frozen=True)
class MarginResult:
    """What :func:`margin_for` found, and what certifies it.

    Attributes
    ----------
    margin : float
        ``delta``: every ``alpha >= 1 + margin`` keeps the growth at most ``tol``
        (certified).
    exponent : float
        ``1 + margin``.
    growth : float
        The growth attained at ``exponent`` (at most ``tol``; equal to it up to the
        bracket width when the margin is positive).
    distant_mass : tuple of float
        ``(D_{L0}, D_{L1})`` at ``exponent`` (the extremes over content scores when
        ``score_bound > 0``).
    bracket : tuple of float
        ``(lower, upper)`` with ``upper = margin``, both certified: every exponent
        ``>= 1 + upper`` keeps the growth within ``tol``, and the growth at ``1 + lower``
        exceeds ``tol``, so no margin below ``lower`` works. The width is about
        ``precision`` times the ratio of the Lipschitz bound to the slope of the growth
        at the crossing (measured: 1e-10 to 1e-8).
    window, lengths, tol, growth_kind, score_bound, offset : echo of the inputs
    evaluations : int
        Certified growth evaluations used by the search.
    """

    margin: float
    exponent: float
    growth: float
    distant_mass: tuple
    bracket: tuple
    window: int
    lengths: tuple
    tol: float
    growth_kind: str
    score_bound: float
    offset: float
    evaluations: int = field(default=0, compare=False)

    def __float__(self) -> float:
        return self.margin

    def as_dict(self) -> dict:
        return {
            "margin": self.margin,
            "exponent": self.exponent,
            "growth": self.growth,
            "distant_mass": list(self.distant_mass),
            "bracket": list(self.bracket),
            "window": self.window,
            "lengths": list(self.lengths),
            "tol": self.tol,
            "growth_kind": self.growth_kind,
            "score_bound": self.score_bound,
            "offset": self.offset,
        }


class _Growth:
    """Growth at an exponent: certified bounds, and the point value."""

    def __init__(self, window, L0, L1, growth, B, shift, order=6, head=16):
        self.W, self.L0, self.L1 = window, L0, L1
        self.relative = growth == "relative"
        self.k = math.exp(2.0 * B)  # content scores within B: window weight scaled by e^{-+2B}
        self.shift = shift
        self.order = order
        self.head = head
        self.evaluations = 0
        # ranges of log(k + s) over all keys and over the distant keys of L1 (Lemma 9a)
        self.lam = math.log((L1 + shift) / (1.0 + shift))
        self.lam_tail = math.log((L1 + shift) / (window + 1.0 + shift))

    def _masses(self, h, t0, t1):
        # D_{L0} at its smallest, D_{L1} at its largest over content scores (Theorem 10)
        return t0 / (t0 + h * self.k), t1 / (t1 + h / self.k)

    def bounds(self, alpha, level=None):
        """Certified bounds at ``alpha``: ``(g_lo, g_hi, d0_lo, d0_hi, d1_lo, d1_hi, u_hi)``.

        ``g`` is the growth (absolute) or ``log(1 + growth)`` (relative); ``d0``, ``d1``
        bracket the extreme distant masses; ``u = 1 - T_{L0} / T_{L1}``. Order-2 brackets
        first; order 6 with 16 exact terms when the coarse bracket is within its own width
        of ``level`` (only there does the width matter).
        """
        self.evaluations += 1
        rec = self._bounds(alpha, 2, 8)
        if level is not None and rec[0] - 4 * (rec[1] - rec[0]) <= level <= rec[1] + 4 * (rec[1] - rec[0]):
            rec = self._bounds(alpha, self.order, self.head)
        return rec

    def _bounds(self, alpha, order, head):
        W, s, k = self.W, self.shift, self.k
        h_lo, h_hi = power_sum_bounds(1, W, alpha, s, order=order, head=head)
        t0_lo, t0_hi = power_sum_bounds(W + 1, self.L0, alpha, s, order=order, head=head)
        t1_lo, t1_hi = power_sum_bounds(W + 1, self.L1, alpha, s, order=order, head=head)
        d0_lo, d0_hi = t0_lo / (t0_lo + h_hi * k), t0_hi / (t0_hi + h_lo * k)
        d1_lo, d1_hi = t1_lo / (t1_lo + h_hi / k), t1_hi / (t1_hi + h_lo / k)
        u_hi = 1.0 - t0_lo / t1_hi
        # 8 ulps cover the divisions and the final subtraction or logarithm
        if self.relative:
            g = (math.log(d1_lo / d0_hi) - 8 * _EPS, math.log(d1_hi / d0_lo) + 8 * _EPS)
        else:
            g = (d1_lo - d0_hi - 8 * _EPS, d1_hi - d0_lo + 8 * _EPS)
        return (*g, d0_lo, d0_hi, d1_lo, d1_hi, u_hi)

    def lipschitz(self, ra, rb):
        """Bound on |g'| over [a, b] from certified values at both ends (Lemma 9a).

        Every D decreases in alpha, and so does u, so the maxima over [a, b] sit at ``a``
        and the minima at ``b``. Both bounds are small near the crossing, where ``g`` is
        about ``tol``.
        """
        lam = self.lam
        spread = max(ra[5] - rb[2], ra[3] - rb[4], 0.0)  # |D1 - D0| on [a, b]
        if self.relative:
            return self.lam_tail * ra[6] + lam * (spread + ra[3] * ra[6])

        # g' = -[D1(1-D1) - D0(1-D0)](E_T1 - E_H) - D0(1-D0)(E_T1 - E_T0), and
        # x(1-x) - y(1-y) = (x-y)(1-x-y): |g'| <= lam |D1 - D0| + D0(1-D0) u lam_tail
        d0_lo, d0_hi = rb[2], ra[3]
        if d0_hi <= 0.5:
            peak = d0_hi * (1.0 - d0_hi)
        elif d0_lo >= 0.5:
            peak = d0_lo * (1.0 - d0_lo)
        else:
            peak = 0.25
        return lam * spread + peak * ra[6] * self.lam_tail

    def point(self, alpha):
        W, s = self.W, self.shift
        h = power_sum(1, W, alpha, s)
        t0 = power_sum(W + 1, self.L0, alpha, s)
        t1 = power_sum(W + 1, self.L1, alpha, s)
        d0, d1 = self._masses(h, t0, t1)
        g = d1 / d0 - 1.0 if self.relative else d1 - d0
        return g, (d0, d1)

    def decreasing_upper(self, alpha):
        """A closed-form upper bound on g (or log(1+g)) for alpha > 1, decreasing in alpha (Lemma 9b)."""
        W, s = self.W, self.shift
        # T(W+1..inf) <= int_W^inf (x+s)^-alpha dx and H_W >= (1+s)^-alpha
        tail_over_head = ((1.0 + s) / (W + s)) ** alpha * (W + s) / (alpha - 1.0)
        if not self.relative:
            return self.k * tail_over_head
        growth_t = 1.0 + (self.L1 - self.L0) * ((W + 1.0 + s) / (self.L0 + 1.0 + s)) ** alpha
        return math.log(growth_t * (self.k * tail_over_head + self.k**2))


def margin_for(window, Lrange, tol, *, growth="absolute", score_bound=0.0, offset=1.0, precision=1e-10):
    """Smallest exponent margin keeping distant-mass growth within ``tol`` (Theorem 9).

    Parameters
    ----------
    window : int
        ``W >= 1``, smaller than ``min(Lrange)``.
    Lrange : sequence of two ints
        Increasing lengths ``(L0, L1)``, e.g. training and evaluation length.
    tol : float
        Allowed growth, in (0, 1).
    growth : {"absolute", "relative"}
        Bound ``D_{L1} - D_{L0}`` or ``D_{L1} / D_{L0} - 1``.
    score_bound : float
        ``B >= 0``: the answer holds for every row whose content scores lie within ``B``
        of a constant, independently at each length (Theorem 10).
    offset : float
        ``o > 0`` in the bias ``-alpha log(d + o)``.
    precision : float
        Resolution of the search in the exponent (the bracket is about this wide).

    Returns
    -------
    MarginResult
        ``float(result)`` is the margin.

    Raises
    ------
    NoMarginError
        When no exponent achieves ``tol``: relative growth with
        ``exp(4 B) - 1 >= tol``, since that is the limit as ``alpha -> oo``.

    Examples
    --------
    >>> r = margin_for(64, (512, 8192), 0.05)
    >>> round(r.margin, 4), r.growth <= 0.05
    (0.3628, True)
    """
    window = check_int(window, "window", minimum=1)
    lengths_domain = "two increasing integer lengths (L0, L1)"
    try:
        items = list(Lrange)
    except TypeError:
        raise DomainError("Lrange", Lrange, lengths_domain) from None
    if len(items) != 2:
        raise DomainError("Lrange", Lrange, lengths_domain)
    L0, L1 = (check_int(x, "Lrange", minimum=1) for x in items)
    if not L0 < L1:
        raise DomainError("Lrange", Lrange, lengths_domain)
    if window >= L0:
        raise DomainError("window", window, f"an integer in [1, min(Lrange) - 1] = [1, {L0 - 1}]")
    tol = check_real(tol, "tol", low=0.0, high=1.0, low_open=True, high_open=True)
    if growth not in ("absolute", "relative"):
        raise DomainError("growth", growth, "'absolute' or 'relative'")
    B = check_real(score_bound, "score_bound", low=0.0)
    offset = check_real(offset, "offset", low=0.0, low_open=True)
    precision = check_real(precision, "precision", low=1e-14, high=0.1)
    G = _Growth(window, L0, L1, growth, B, offset - 1.0)
    level = math.log1p(tol) if growth == "relative" else tol
    if growth == "relative" and 4.0 * B >= level:
        raise NoMarginError(
            "score_bound", B, f"score_bound < log(1 + tol) / 4 = {level / 4:.6g} for relative growth (the limit as alpha -> oo is exp(4B) - 1)"
        )
    # alpha_hi: the decreasing closed-form bound is <= tol beyond it (Lemma 9b)
    step = 1.0
    while G.decreasing_upper(1.0 + step) > level:
        step *= 2.0
        if step > 1e6:
            raise NoMarginError("tol", tol, "a tolerance reachable by some exponent below 1e6")
    hit = _search(G, 1.0, 1.0 + step, level, precision)
    if hit is None:
        margin, lower = 0.0, 0.0
    else:
        a, b = hit
        margin = b - 1.0
        # the bracket's lower end: a point where the growth is certified above tol, so no
        # margin below it works; step down from a until the bounds prove it
        lower, step = a, precision
        while not G.bounds(lower, level)[0] > level:
            if lower <= 1.0 or step >= 1.0:
                lower = None  # nothing certified: only delta >= 0 is known
                break
            lower = max(1.0, a - step)
            step *= 2.0
        if lower is None:
            lower = 0.0
        else:
            top = a  # refine: the highest certified exceedance between lower and a
            for _ in range(40):
                if top - lower <= precision / 4:
                    break
                mid = 0.5 * (lower + top)
                if G.bounds(mid, level)[0] > level:
                    lower = mid
                else:
                    top = mid
            lower = max(0.0, lower - 1.0)
    g, masses = G.point(1.0 + margin)
    return MarginResult(
        margin=margin,
        exponent=1.0 + margin,
        growth=g,
        distant_mass=masses,
        bracket=(lower, margin),
        window=window,
        lengths=(L0, L1),
        tol=tol,
        growth_kind=growth,
        score_bound=B,
        offset=offset,
        evaluations=G.evaluations,
    )


def _search(G, lo, hi, level, precision):
    """Top-first branch and bound for the highest point where g may exceed ``level``.

    Intervals are visited from the highest down. On [a, b] with certified upper values
    ``ga``, ``gb`` and Lipschitz bound ``K``, ``g <= (ga + gb) / 2 + K (b - a) / 2``; an
    interval whose bound is at most ``level`` is certified and dropped. The first
    uncertified interval of width at most ``precision`` is returned, with everything above
    it certified. ``None`` means that ``g <= level`` on all of [lo, hi].
    """
    stack = [(lo, hi, G.bounds(lo, level), G.bounds(hi, level))]
    while stack:
        a, b, ra, rb = stack.pop()
        if (ra[1] + rb[1]) / 2.0 + G.lipschitz(ra, rb) * (b - a) / 2.0 <= level:
            continue
        if b - a <= precision:
            return a, b
        m = 0.5 * (a + b)
        rm = G.bounds(m, level)
        stack.append((a, m, ra, rm))  # the lower half is visited later
        stack.append((m, b, rm, rb))  # the upper half first
    return None
