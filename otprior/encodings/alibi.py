"""ALiBi: linear biases :math:`b(d) = -m_h d`, with the slopes of the implementations people run.

- ``variant="bloom"`` (BLOOM's ``build_alibi_tensor``, fairseq's ALiBi, KERPLE's ``original``):
  :math:`2^{-8k/H'}`, ``k = 1..H'`` for ``H'`` the power of two at or below ``H``, then the
  odd-indexed slopes of ``2H'``.
- ``variant="mpt"`` (MPT's ``build_mpt_alibi_tensor``): with ``P`` the power of two at or above
  ``H``, :math:`m_k = 2^{-k\\,\\mathrm{alibi\\_bias\\_max}/P}`, ``k = 1..P``; when ``P != H`` the
  even-``k`` slopes come first, then the odd-``k`` ones, cut at ``H``.
- ``variant="falcon"``: BLOOM's slopes; Falcon adds ``slope * position`` to the raw scores
  and multiplies the sum by :math:`1/\\sqrt{\\mathrm{head\\_dim}}`, so the effective slope is
  :math:`m/\\sqrt{\\mathrm{head\\_dim}}`. With ``bf16=True`` the slope and the product
  ``slope * key_position`` are rounded to bfloat16 as Falcon does; the row of a query with
  ``n`` keys is then :math:`\\mathrm{bf16}(\\mathrm{bf16}(m)(n-1-d))/\\sqrt{\\mathrm{head\\_dim}}`
  and its masses are summed directly from it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .._registry import param
from .._validation import DomainError, check_int, check_real
from ..limits import check_allocation, check_count
from ._base import Encoding, Verdict, decisive, direct_masses, nonneg, per_head_values, register

__all__ = ["ALiBi", "alibi_slopes", "bf16_round"]

VARIANTS = ("bloom", "mpt", "falcon")


def bf16_round(x):
    """Round float values to the nearest bfloat16 (ties to even), as ``tensor.bfloat16()`` does."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(float)


def alibi_slopes(num_heads, variant="bloom", alibi_bias_max=8.0):
    """The per-head slopes of ``variant`` (see the module notes), as a float tuple of length ``num_heads``.

    Examples
    --------
    >>> alibi_slopes(4)
    (0.25, 0.0625, 0.015625, 0.00390625)
    """
    H = check_int(num_heads, "num_heads")
    check_count(H, "num_heads", H)
    check_allocation(8 * H, "num_heads", H)
    if variant not in VARIANTS:
        raise DomainError("variant", variant, f"one of {', '.join(VARIANTS)}")
    if variant == "mpt":
        m = check_real(alibi_bias_max, "alibi_bias_max", low=0.0, low_open=True)
        P = 1 << (H - 1).bit_length()
        base = [2.0 ** (-(k * (m / P))) for k in range(1, P + 1)]
        if P != H:
            base = (base[1::2] + base[0::2])[:H]
        return tuple(base)
    low = 1 << (H.bit_length() - 1)

    def power_of_two(p):
        start = 2.0 ** (-(2.0 ** -(math.log2(p) - 3)))
        return [start**k for k in range(1, p + 1)]

    slopes = power_of_two(low)
    if low != H:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * low) - 3)))
        slopes += [extra**k for k in range(1, 1 + 2 * min(low, H - low), 2)]
    return tuple(slopes)


def _slope(v, name):
    return check_real(v, name, low=0.0)


@register
@dataclass(frozen=True, repr=False)
class ALiBi(Encoding):
    """ALiBi: :math:`b(d) = -m\\,d` (bounded for ``m > 0``, :math:`D_\\infty(W) = e^{-mW}`).

    Give ``slope`` (one or one per head), or ``heads=H`` for the slopes of ``variant``.
    """

    name = "alibi"
    _head_fields = ("slope",)

    slope: float | None = param(None, doc="slope m >= 0 (bias -m d); one per head allowed; or give --heads")
    heads: int | None = param(None, doc="number of heads: the implementation's slopes for that count", kw_only=True)
    variant: str = param("bloom", doc="whose slopes and scaling", choices=VARIANTS, kw_only=True)
    alibi_bias_max: float = param(8.0, doc="MPT's alibi_bias_max (> 0)", kw_only=True)
    head_dim: int | None = param(None, doc="head dimension (variant falcon divides the slopes by its square root; others ignore it)", kw_only=True)
    bf16: bool | None = param(None, doc="round slopes and products to bfloat16, as Falcon does (default: only for falcon)", kw_only=True)
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise DomainError("variant", self.variant, f"one of {', '.join(VARIANTS)}")
        if self.bf16 is None:
            object.__setattr__(self, "bf16", self.variant == "falcon")
        if not isinstance(self.bf16, (bool, np.bool_)):
            raise DomainError("bf16", self.bf16, "True or False")
        object.__setattr__(self, "bf16", bool(self.bf16))
        if self.head_dim is not None:
            object.__setattr__(self, "head_dim", check_int(self.head_dim, "head_dim"))
        if self.variant == "falcon" and self.head_dim is None:
            raise DomainError("head_dim", None, "the head dimension (Falcon scales the biased scores by 1/sqrt(head_dim))")
        object.__setattr__(self, "alibi_bias_max", check_real(self.alibi_bias_max, "alibi_bias_max", low=0.0, low_open=True))
        if self.slope is None:
            if self.heads is None:
                raise DomainError("slope", None, "a slope >= 0 (or heads= for the implementation's slopes)")
            H = check_int(self.heads, "heads")
            object.__setattr__(self, "heads", H)
            object.__setattr__(self, "slope", alibi_slopes(H, self.variant, self.alibi_bias_max))
        else:
            object.__setattr__(self, "slope", per_head_values(self.slope, "slope", _slope))
            if self.heads is not None:
                H = check_int(self.heads, "heads")
                if not isinstance(self.slope, tuple) or len(self.slope) != H:
                    raise DomainError("heads", self.heads, "the number of slopes given (or omit the slopes)")
        if isinstance(self.slope, tuple) and len(self.slope) == 1 and self.heads is None:
            object.__setattr__(self, "slope", self.slope[0])
        if isinstance(self.slope, tuple):
            # the head count is the number of slopes: every cap that counts heads sees the real count
            object.__setattr__(self, "heads", len(self.slope))
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    @staticmethod
    def slopes(num_heads, variant="bloom", alibi_bias_max=8.0):
        """The per-head slopes (list): :func:`alibi_slopes`."""
        return list(alibi_slopes(num_heads, variant, alibi_bias_max))

    def per_head(self):
        if not isinstance(self.slope, tuple):
            return None
        return tuple(self._replace(slope=m, heads=None) for m in self.slope)

    @property
    def effective_slope(self):
        """The slope the softmax sees: bf16-rounded if asked, divided by sqrt(head_dim) for Falcon."""
        m = np.asarray(self.slope, dtype=float)
        if self.bf16:
            m = bf16_round(m)
        if self.variant == "falcon":
            m = m / math.sqrt(self.head_dim)
        return tuple(float(v) for v in m) if m.ndim else float(m)

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        if isinstance(self.slope, tuple):
            return np.stack([h.bias(d, n) for h in self.per_head()])
        if self.bf16:
            # Falcon's row: bf16(bf16(m) * key position) / sqrt(head_dim), key position n - 1 - d
            # (the other variants rounded to bfloat16 on request: the same row without the scale)
            top = float(np.max(d)) + 1.0 if n is None else float(n)
            m = float(bf16_round(self.slope))
            # the product is taken in bfloat16: the key position is rounded to bfloat16 first
            row = bf16_round(m * bf16_round(top - 1.0 - d)) - bf16_round(m * bf16_round(top - 1.0))
            return row / math.sqrt(self.head_dim) if self.variant == "falcon" else row
        return -self.effective_slope * d

    def _masses(self, window, n):
        if self.bf16:
            if n <= 4096:
                return direct_masses(self.log_weights(n), window)
            return self._bf16_counted(window, n, certified=False)
        m = self.effective_slope
        if m == 0.0:
            return window / n, (n - window) / n
        # geometric sums: D = (e^{-mW} - e^{-mn}) / (1 - e^{-mn}), m = 1 - D computed without cancellation
        denom = -math.expm1(-m * n)
        D = -math.expm1(-m * (n - window)) * math.exp(-m * window) / denom
        mass = -math.expm1(-m * window) / denom
        return mass, D

    def _slope_ball(self):
        """The effective slope as an Arb ball: the (bfloat16-rounded) slope exactly, divided by
        :math:`\\sqrt{\\mathrm{head\\_dim}}` in Arb for Falcon (not by the double quotient)."""
        import flint

        from .._balls import arb_from_float

        m = float(bf16_round(self.slope)) if self.bf16 else float(self.slope)
        ball = arb_from_float(m)
        return ball / flint.arb(self.head_dim).sqrt() if self.variant == "falcon" else ball

    def _certified(self, window, n):
        """Theorem 16b (``proofs/closed_form_tails.md``): the geometric closed form at any ``n``; a
        zero slope is the uniform prior (Theorem 16a); Falcon's bfloat16 rows are summed term by term
        in Arb up to ``n = 4096``, beyond by runs of equal rounded positions (Theorem 16f, ``n < 2^128``)."""
        from ._certified import DIRECT_ROW, direct_masses_arb, geometric_masses, uniform_masses

        if self.bf16:
            if n <= DIRECT_ROW:
                return direct_masses_arb(lambda: self._bf16_row_balls(n), window, "falcon bfloat16 row")
            return self._bf16_counted(window, n, certified=True)
        if self.effective_slope == 0.0 and float(self.slope) == 0.0:
            return uniform_masses(window, n)
        return geometric_masses(self._slope_ball, window, n, f"ALiBi slope {self.slope!r}")

    def _bf16_row_balls(self, n):
        """The bfloat16 row (distance order) as balls: the rounded logits are exact doubles; only
        Falcon's division by :math:`\\sqrt{\\mathrm{head\\_dim}}` is done in Arb."""
        import flint

        from .._balls import arb_from_float

        top = float(n)
        m = float(bf16_round(self.slope))
        d = np.arange(n, dtype=float)
        row = bf16_round(m * bf16_round(top - 1.0 - d)) - bf16_round(m * bf16_round(top - 1.0))  # exact differences
        scale = flint.arb(self.head_dim).sqrt() if self.variant == "falcon" else flint.arb(1)
        return [arb_from_float(v) / scale for v in row]

    def _bf16_counted(self, window, n, certified):
        """Theorem 16f: a bfloat16 row summed by runs of positions sharing one rounded position (hence one logit).

        Key ``j`` (distance ``n - 1 - j``) has logit :math:`\\mathrm{bf16}(\\mathrm{bf16}(m)\\,p(j))`,
        :math:`p(j) = \\mathrm{bf16}(\\mathrm{float32}(j))` non-decreasing in ``j``; the runs of equal ``p`` come from
        :func:`bf16_position_segments` (exact integers: the positions as integers, not as doubles), so ``H``
        and ``T`` are sums over about 128 runs per octave of ``n``, each an exact count times one weight.
        Returns ``(m, D)`` floats, or a ``MassEnclosures`` when ``certified``.
        """
        import bisect

        import flint

        from ._certified import MassEnclosures, certify, masses_from_sums

        top = n - 1
        if top >= 1 << 128:
            raise DomainError("n", n, "at most 2^128 keys (Falcon's bfloat16 positions overflow beyond float32's range)")
        values, starts, counts, counts_f, values_f = _segment_arrays()
        k = bisect.bisect_right(starts, top)  # runs 0..k-1 reach the row
        logits = bf16_round(float(bf16_round(self.slope)) * values_f[:k])
        if not np.all(np.isfinite(logits)):
            raise DomainError("n", n, "a length whose bfloat16 logits bf16(m) x position stay below float32's largest (3.4e38)")
        cut = n - window  # keys j >= cut are in the window
        i = bisect.bisect_right(starts, cut, 0, k) - 1  # the run holding key j = cut
        last = n - starts[k - 1]  # the last run ends at the query
        # exact counts: distant runs 0..i (run i up to cut), window runs i..k-1 (run i from cut)
        run_i_end = starts[i + 1] if i + 1 < k else n
        cw = {i: run_i_end - cut}
        cd = {i: cut - starts[i]}
        q = logits[-1]  # the query's own logit (the last key)
        scale = math.sqrt(self.head_dim) if self.variant == "falcon" else 1.0
        if not certified:
            c = counts_f[:k].copy()
            c[k - 1] = float(last)
            w = np.exp((logits - q) / scale)  # exponents <= 0: the logits do not decrease with the position
            tw = c[i + 1:k] @ w[i + 1:k] + float(cw[i]) * w[i]
            td = math.fsum((c[:i] * w[:i]).tolist()) + float(cd[i]) * w[i]
            H, T = float(tw), float(td)
            return H / (H + T), T / (H + T)
        hc, dc = {}, {}
        lg_list = logits.tolist()
        for r in range(k):
            cnt = last if r == k - 1 else counts[r]
            h = cw[i] if r == i else (cnt if r > i else 0)
            d = cd[i] if r == i else (cnt if r < i else 0)
            if h:
                hc[lg_list[r]] = hc.get(lg_list[r], 0) + h
            if d:
                dc[lg_list[r]] = dc.get(lg_list[r], 0) + d

        def balls():
            sc = flint.arb(self.head_dim).sqrt() if self.variant == "falcon" else flint.arb(1)
            qq = flint.arb(q)  # doubles convert exactly
            H = sum((flint.arb(c) * ((flint.arb(lg) - qq) / sc).exp() for lg, c in hc.items()), flint.arb(0))
            T = sum((flint.arb(c) * ((flint.arb(lg) - qq) / sc).exp() for lg, c in dc.items()), flint.arb(0))
            return masses_from_sums(H, T)

        m, D = certify(balls, "falcon bfloat16 row")
        return MassEnclosures(m, D, "bfloat16 position runs (Theorem 16f)", True)

    def _uncertified_reason(self):
        return "Falcon's bfloat16 rows oscillate (Theorem 11c): no limit"

    def _limit_certified(self, window):
        """:math:`D_\\infty(W) = e^{-mW}` (Theorem 16g), 1 for a zero slope; none for bfloat16 rows (they oscillate)."""
        if self.bf16:
            return None
        from ._certified import ONE, certify

        if float(self.slope) == 0.0:
            return ONE
        return certify(lambda: ((-self._slope_ball() * window).exp(),) * 2, f"ALiBi limit, slope {self.slope!r}")[0]

    def _verdict(self):
        if self.bf16:
            return self._bf16_verdict()
        m = self.effective_slope
        if m == 0.0:
            return Verdict(self, False, "diluting", "slope m = 0: no bias, uniform prior.", "1 - D_n(W) = W/n")
        scale = f" (slope / sqrt(head_dim = {self.head_dim}))" if self.variant == "falcon" else ""
        return Verdict(
            self,
            True,
            "bounded",
            f"sum_d e^(-m d) = 1/(1 - e^(-m)) < oo for m = {decisive(m, 0.0)} > 0{scale}, so D_n(W) -> e^(-mW) < 1.",
            "D_n(W) = D_oo(W) (1 - e^{-m(n-W)}) / (1 - e^{-mn}): geometric approach",
            limit_fn=lambda W: math.exp(-m * W),
        )

    def _bf16_verdict(self):
        """Theorem 11c (``proofs/classification.md``): rows rounded to bfloat16 tie the nearest keys.

        Key positions ``j`` are rounded to bfloat16 (8 significant bits) before the product, so
        for ``n - 1`` in ``[2^k, 2^(k+1))``, ``k >= 8``, every key in the bfloat16 bin of ``n - 1``
        (width ``2^(k-7)``) ties with the query at the largest logit, and the window keeps at most
        ``W / G_n``, with ``G_n`` the number of tied keys at or before the query. ``G_n`` exceeds
        ``2^(k-8)`` when ``n - 1`` lies in the upper half of its bin and is 1 at the lowest key of a
        product bin (the keys where ``bf16(bf16(m) bf16(j))`` changes value; every position-bin edge
        only for power-of-two slopes), where ``D_n(W) -> 0``; so ``D_n(W)`` oscillates:
        ``limsup D_n(W) = 1`` (not bounded), ``liminf D_n(W) = 0`` (Theorem 11c).
        """
        m = self.effective_slope
        if m == 0.0:
            return Verdict(self, False, "diluting", "slope m = 0: no bias, uniform prior.", "1 - D_n(W) = W/n")

        return Verdict(
            self,
            None,
            "oscillating",
            "Falcon rounds key positions and slope x position to bfloat16: beyond n = 256 the keys in the query's "
            "bfloat16 bin tie at the largest logit, so the window keeps at most W / G_n, and G_n grows like n / 256 "
            "whenever n - 1 lies in the upper half of its bin, while at the lowest key of a product bin the query stands alone and "
            "D_n(W) -> 0 (Theorem 11c): D_n(W) has no limit, liminf 0 and limsup 1; neither bounded nor diluting.",
            "1 - D_n(W) <= W / G_n, G_n >= 2^(k-8) for n - 1 in the upper half of [2^k, 2^(k+1))",
            bounds_fn=lambda W: (0.0, 1.0),
        )

    @staticmethod
    def tied_keys(n, slope):
        """``G_n``: keys at or before the query (``n`` keys) whose bfloat16 logit ties with the query's."""
        n = int(n)
        m = float(bf16_round(slope))
        j = np.arange(n, dtype=float)
        logits = bf16_round(m * bf16_round(j))
        return int(np.sum(logits == logits[-1]))

    def far_profile(self, window):
        if self.bf16:
            return None
        m = self.effective_slope
        return ("minus-infinity",) if m > 0 else ("constant-tail", 0.0, -math.inf, 0.0)


def _round_threshold(v, bits):
    """The least integer ``x >= 0`` with ``RNE_bits(x) >= v``, for ``v`` a positive integer with at most ``bits``
    significant bits (Theorem 16f): ``x > mid`` or ``x = mid`` when the tie goes up (``v``'s significand even),
    ``mid`` the midpoint between ``v`` and its predecessor on the ``bits``-bit grid."""
    from fractions import Fraction

    if v.bit_length() <= bits:
        return v  # every integer below 2^bits is on the grid
    u = 1 << (v.bit_length() - bits)  # the grid spacing at v
    if v & (u - 1):
        raise ValueError("v is not on the grid")
    pred_u = u // 2 if v == 1 << (v.bit_length() - 1) else u  # below a power of two the spacing halves
    mid = Fraction(2 * v - pred_u, 2)
    tie_up = (v // u) % 2 == 0
    if mid.denominator == 1:
        return int(mid) if tie_up else int(mid) + 1
    return int(mid) + 1  # mid = k + 1/2: the least integer above it


def _grid_up(x, bits):
    """The least integer on the ``bits``-bit grid that is ``>= x`` (``x >= 0`` an integer)."""
    if x.bit_length() <= bits:
        return x
    u = 1 << (x.bit_length() - bits)
    return -(-x // u) * u


@functools.lru_cache(maxsize=1)
def _segment_table():
    """Every run of :func:`bf16_position_segments_uncached` up to float32's range, once: ``(values, starts)``."""
    segs = bf16_position_segments_uncached((1 << 128) - 1)
    return tuple(v for v, _ in segs), tuple(t for _, t in segs)


@functools.lru_cache(maxsize=1)
def _segment_arrays():
    """The table as ``(values, starts, counts, counts as doubles, values as doubles)`` (run ``r`` holds positions
    ``starts[r] .. starts[r+1] - 1``; the last count is set per row)."""
    values, starts = _segment_table()
    counts = [b - a for a, b in zip(starts[:-1], starts[1:], strict=True)] + [0]
    return values, starts, counts, np.asarray([float(c) for c in counts]), np.asarray([float(v) for v in values])


def bf16_position_segments(top):
    """:func:`bf16_position_segments_uncached` from a table built once (``top`` below ``2^128``)."""
    import bisect

    top = int(top)
    if top >= 1 << 128:
        raise DomainError("n", top + 1, "at most 2^128 keys (Falcon's bfloat16 positions overflow beyond float32's range)")
    values, starts = _segment_table()
    k = bisect.bisect_right(starts, top)
    return list(zip(values[:k], starts[:k], strict=True))


def bf16_position_segments_uncached(top):
    """``[(v, t_v)]``: the values ``v = bf16(float32(j))`` taken by the integer positions ``0 <= j <= top``, each
    with the least position ``t_v`` that reaches it (Theorem 16f). ``bf16(float32(j))`` is non-decreasing in ``j``,
    so positions ``t_v <= j < t_{v'}`` (``v'`` the next value) all round to ``v``. Exact integer arithmetic: a
    position is rounded to 24 significant bits (float32, ties to even), then to 8 (bfloat16, ties to even).
    """
    values = list(range(min(top, 255) + 1))  # below 2^8 every integer is its own bfloat16
    out = [(v, v) for v in values]
    s = 1
    while True:
        done = False
        for q in range(128, 256):
            v = q << s
            # R8(R24(j)) >= v  <=>  R24(j) >= g (g: the least 24-bit grid point reaching v)  <=>  j >= t
            g = _grid_up(_round_threshold(v, 8), 24)
            t = _round_threshold(g, 24)
            if t > top:
                done = True
                break
            out.append((v, t))
        if done:
            return out
        s += 1


def _bf16_logits(m, values):
    """``bf16(bf16(m) * v)`` for bfloat16 positions ``v`` (the product of two 8-bit significands is exact in a
    double, then rounded once to bfloat16, as the model's bfloat16 multiply); ``inf`` beyond float32's range."""
    with np.errstate(over="ignore"):
        return bf16_round(float(bf16_round(m)) * np.asarray([float(v) for v in values], dtype=float))
