"""FIRE: functional interpolation of relative positions, as its reference code computes it.

For the query at 0-indexed position ``i`` (the last of ``n = i + 1`` keys) and key ``j``
(distance ``d = i - j``), the reference ``FIRE.forward`` evaluates

.. math:: b = f\\Big(\\frac{\\log(|c\\,d| + 1)}{\\log(|c\\,\\max(i, |L|)| + 1) + \\epsilon}\\Big),

with ``f`` a ``Linear(1, w) -> ReLU -> Linear(w, heads)`` MLP, ``c`` (init 0.1), the
threshold :math:`L = |L_{mult}\\,L_{init}|` (init 512) and :math:`\\epsilon = 10^{-6}`. The
normaliser uses the query's 0-indexed position ``i = n - 1``, not the key count ``n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._registry import param
from .._validation import DomainError, check_real
from ._base import Encoding, Verdict, nonneg, register

__all__ = ["FIRE", "fire_input"]


def fire_input(d, n, c=0.1, L=512.0, eps=1e-6):
    """The MLP input of FIRE for distances ``d`` in the row of a query with ``n`` keys (0-indexed ``i = n - 1``)."""
    d = np.asarray(d, dtype=float)
    i = float(n) - 1.0
    return np.log(np.abs(c * d) + 1.0) / (math.log(abs(c * max(i, abs(L))) + 1.0) + eps)


_DIRECT_TERMS = 2048  # piece ranges shorter than this are summed term by term (Theorem 16e)


def _default_f(x):
    return -8.0 * x


def _mlp_range(mlp):
    """Exact min and max over [0, 1] of each head of a one-hidden-layer ReLU MLP (piecewise linear)."""
    W1, b1, W2, b2 = mlp
    with np.errstate(divide="ignore", invalid="ignore"):
        kinks = -b1 / W1
    pts = np.concatenate([[0.0, 1.0], kinks[np.isfinite(kinks) & (kinks > 0) & (kinks < 1)]])
    vals = _mlp_eval(mlp, pts)  # (heads, points)
    return vals.min(axis=-1), vals.max(axis=-1)


def _mlp_eval(mlp, x):
    W1, b1, W2, b2 = mlp
    x = np.asarray(x, dtype=float)
    hidden = np.maximum(x[..., None] * W1 + b1, 0.0)  # (..., width)
    out = hidden @ W2.T + b2  # (..., heads)
    return np.moveaxis(out, -1, 0)


@register
@dataclass(frozen=True, repr=False)
class FIRE(Encoding):
    """FIRE: :math:`b(d) = f(\\psi(d)/(\\psi(\\max(n-1, L)) + \\epsilon))`, :math:`\\psi(x) = \\log(|c|x + 1)`.

    ``f``: a callable on [0, 1] (default ``f(x) = -8 x``), or ``mlp=(W1, b1, W2, b2)`` the
    reference MLP's weights (``W1``: ``(width,)``, ``b1``: ``(width,)``, ``W2``:
    ``(heads, width)``, ``b2``: ``(heads,)``), which answers per head. The input stays in
    [0, 1], so a continuous ``f`` is bounded and the encoding dilutes.
    """

    name = "fire"

    f: object = param(None, doc="the learned function on [0, 1] (a callable; default -8 x)")
    c: float = param(0.1, doc="log-transform parameter c != 0 (used as |c|)", kw_only=True)
    L: float = param(512.0, doc="threshold L = L_multiplier * init_L (used as |L|)", kw_only=True)
    eps: float = param(1e-6, doc="the reference code's eps >= 0 in the normaliser", kw_only=True)
    mlp: tuple | None = param(None, doc="reference MLP weights (W1, b1, W2, b2)", kw_only=True)
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)

    def __post_init__(self):
        c = check_real(self.c, "c")
        if c == 0.0:
            raise DomainError("c", self.c, "a finite real number other than 0")
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "L", check_real(self.L, "L"))
        object.__setattr__(self, "eps", check_real(self.eps, "eps", low=0.0))
        if self.f is not None and not callable(self.f):
            raise DomainError("f", self.f, "a callable on [0, 1]")
        if self.mlp is not None:
            if self.f is not None:
                raise DomainError("mlp", "given with f", "either f or mlp, not both")
            try:
                W1, b1, W2, b2 = (np.asarray(a, dtype=float) for a in self.mlp)
            except (TypeError, ValueError):
                raise DomainError("mlp", "not four arrays", "(W1, b1, W2, b2) as float arrays") from None
            W1, b1 = W1.ravel(), b1.ravel()
            W2 = W2.reshape(-1, W1.size) if W1.size and W2.size % W1.size == 0 else W2
            b2 = b2.ravel()
            ok = W1.size >= 1 and W1.size == b1.size and W2.ndim == 2 and W2.shape[1] == W1.size and b2.size == W2.shape[0]
            if not ok or not all(np.all(np.isfinite(a)) for a in (W1, b1, W2, b2)):
                raise DomainError("mlp", "arrays of mismatched shapes", "W1 (width,), b1 (width,), W2 (heads, width), b2 (heads,), finite")
            # stored in the form the constructor takes (W2 as rows), so that the fields rebuild the encoding
            rows = tuple(tuple(map(float, r)) for r in W2)
            object.__setattr__(self, "mlp", (tuple(map(float, W1)), tuple(map(float, b1)), rows, tuple(map(float, b2))))
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    def _mlp_arrays(self):
        W1, b1, W2, b2 = self.mlp
        return np.asarray(W1), np.asarray(b1), np.asarray(W2).reshape(len(W2), len(W1)), np.asarray(b2)

    @property
    def heads(self):
        if self.mlp is None:
            return None
        return len(self.mlp[2])

    def per_head(self):
        if self.mlp is None:
            return None
        W1, b1, W2, b2 = self._mlp_arrays()
        return tuple(self._replace(mlp=(W1, b1, W2[h : h + 1], b2[h : h + 1])) for h in range(W2.shape[0])) if W2.shape[0] > 1 else None

    def _f(self, x):
        if self.mlp is not None:
            out = _mlp_eval(self._mlp_arrays(), x)
            return out[0] if out.shape[0] == 1 else out
        f = self.f if self.f is not None else _default_f
        return np.asarray(f(x), dtype=float) * np.ones_like(x)

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        n = float(d.max() + 1) if n is None else float(n)
        return self._f(fire_input(d, n, self.c, self.L, self.eps))

    def _exact_pieces(self):
        """``[(u0, u1, a, b)]`` as exact fractions: ``f(u) = a + b u`` on ``[u0, u1]``, covering [0, 1],
        or ``None`` (a general callable, or a multi-head MLP: per head). The kinks :math:`-b_{1,i}/W_{1,i}`,
        the active set at each piece's midpoint and the line's coefficients are exact rationals of the
        stored doubles (Theorem 16e), so no key is put on the wrong line by rounding."""
        from fractions import Fraction

        if self.mlp is None:
            return None if self.f is not None else [(Fraction(0), Fraction(1), Fraction(0), Fraction(-8))]
        W1, b1, W2, b2 = self.mlp
        if len(W2) != 1:
            return None
        w1 = [Fraction(x) for x in W1]
        c1 = [Fraction(x) for x in b1]
        w2 = [Fraction(x) for x in W2[0]]
        at = {}  # kink -> the units whose sign changes there
        for i, (w, b) in enumerate(zip(w1, c1, strict=True)):
            if w != 0 and 0 < -b / w < 1:
                at.setdefault(-b / w, []).append(i)
        cuts = [Fraction(0)] + sorted(at) + [Fraction(1)]
        # the active set at the first piece's midpoint, then toggled at each kink: inside a piece no unit changes
        # sign, so each piece's line is the previous one plus or minus the units crossing its left end (O(width)
        # Fractions per kink instead of per piece x width)
        mid = (cuts[0] + cuts[1]) / 2
        active = [w * mid + b > 0 for w, b in zip(w1, c1, strict=True)]
        slope = sum((v * w for v, w, on in zip(w2, w1, active, strict=True) if on), Fraction(0))
        icpt = sum((v * b for v, b, on in zip(w2, c1, active, strict=True) if on), Fraction(b2[0]))
        pieces = [(cuts[0], cuts[1], icpt, slope)]
        for u0, u1 in zip(cuts[1:-1], cuts[2:], strict=True):
            for i in at[u0]:
                sign = -1 if active[i] else 1
                active[i] = not active[i]
                slope += sign * w2[i] * w1[i]
                icpt += sign * w2[i] * c1[i]
            pieces.append((u0, u1, icpt, slope))
        return pieces

    def _lam_ball(self, n):
        """:math:`\\Lambda_n = \\log(|c|\\max(n-1, |L|) + 1) + \\epsilon` as a ball (``n`` any integer)."""
        import flint

        from .._balls import arb_from_float

        top = max(n - 1, abs(self.L))
        top = flint.arb(top) if isinstance(top, int) else arb_from_float(top)
        return (arb_from_float(abs(self.c)) * top).log1p() + arb_from_float(self.eps)

    def _term_ball(self, d, lam):
        """:math:`e^{b_n(d)}` of one key as a ball, ``f`` evaluated on the ball :math:`u(d)` (ReLU of a ball
        straddling 0 is the hull of 0 and its upper end)."""
        import flint

        from .._balls import arb_from_float

        u = (arb_from_float(abs(self.c)) * d).log1p() / lam
        if self.mlp is None:
            return (-8 * u).exp()
        W1, b1, W2, b2 = self.mlp
        out = arb_from_float(b2[0])
        for w, b, v in zip(W1, b1, W2[0], strict=True):
            x = arb_from_float(w) * u + arb_from_float(b)
            if not (x > 0):
                x = flint.arb(0) if x <= 0 else flint.arb(x.upper() / 2, x.upper() / 2)
            out += arb_from_float(v) * x
        return out.exp()

    def _range_sum(self, d0, d1, n, pieces=None):
        """:math:`\\sum_{d=d_0}^{d_1} e^{b_n(d)}` as a ball (Theorems 14, 16e), or ``None`` where a piece edge
        is not resolved at the current precision. Call inside ``arb_precision``.

        On piece ``k`` the terms are :math:`e^{a_k}|c|^{s_k}(d + 1/|c|)^{s_k}`, :math:`s_k = b_k/\\Lambda_n`: a
        Hurwitz zeta difference. The last distance of pieces up to ``k`` is the floor of
        :math:`E_k = \\operatorname{expm1}(u_{k+1}\\Lambda_n)/|c|`; where the ball of :math:`E_k` holds an integer
        its key (at most 16 such) is summed alone by evaluating ``f`` on the ball of ``u(d)``.
        """
        import flint

        from .._balls import arb_from_float
        from ._certified import hurwitz_sum

        pieces = self._exact_pieces() if pieces is None else pieces
        lam = self._lam_ball(n)
        c = arb_from_float(abs(self.c))
        a = 1 / c
        total = flint.arb(0)
        start = 0
        for k, (_u0, u1, icpt, slope) in enumerate(pieces):
            if start > d1:
                break
            alone = []
            edge = None if k == len(pieces) - 1 else (flint.arb(flint.fmpq(u1.numerator, u1.denominator)) * lam).expm1() / c
            if edge is None or edge > d1:  # every remaining key of the range lies on this piece
                end = d1
            else:
                if not edge.is_finite():
                    return None
                lo, hi = _floor_ends(edge)
                if hi - lo > 16:
                    return None
                end = lo
                alone = list(range(lo + 1, hi + 1))
            a0, a1 = max(start, d0), min(end, d1)
            if a1 >= a0:
                s = flint.arb(flint.fmpq(slope.numerator, slope.denominator)) / lam  # exponent of (|c| d + 1)
                slow = abs(s) * c <= flint.arb(2) ** -12  # slowly varying terms: Euler-Maclaurin's remainder is tiny
                # zeta out of reach (|s| > 2^20) and not slowly varying: every term, up to 2^15 of them
                direct = _DIRECT_TERMS if slow or not (abs(s) > 2**20) else 1 << 15
                if a1 - a0 < direct:  # short: every term e^(a_k) (|c| d + 1)^(s_k) in Arb
                    e = flint.arb(flint.fmpq(icpt.numerator, icpt.denominator)).exp()
                    total += e * sum(((s * (c * d).log1p()).exp() for d in range(a0, a1 + 1)), flint.arb(0))
                else:
                    em = None
                    if slow:  # Euler-Maclaurin of order 4, kept where its remainder is below 2^-60 of the piece
                        em = _em_piece(flint.arb(flint.fmpq(icpt.numerator, icpt.denominator)), s, c, a0, a1)
                        if not (em.rad() <= em.mid().abs_lower() * flint.arb(2) ** -60) and not (abs(s) > 2**20):
                            em = None  # a small |s| over a short range: the Hurwitz difference does better
                    if em is not None:
                        total += em
                    elif abs(s) > 2**20:
                        return None
                    else:
                        scale = flint.arb(flint.fmpq(icpt.numerator, icpt.denominator)).exp() * c**s
                        total += scale * hurwitz_sum(-s, a, a0, a1)
            total += sum((self._term_ball(d, lam) for d in alone if d0 <= d <= d1), flint.arb(0))
            start = max(end, alone[-1] if alone else end) + 1
        return total

    def _sum_pieces(self, top, n):
        """:math:`\\sum_{d=0}^{top} e^{b_n(d)}` as a ball (Theorem 14, :meth:`_range_sum`)."""
        out = self._range_sum(0, top, n)
        return out if out is not None else __import__("flint").arb("nan")

    def _certified(self, window, n):
        """Theorem 16e: the default ``f`` or a one-head MLP by its exact linear pieces at any ``n``; a
        general callable ``f`` has no proved route (its prior is only sampled)."""
        from ._certified import MassEnclosures, certify, masses_from_sums

        pieces = self._exact_pieces()
        if pieces is None:
            return None

        def balls():
            H = self._range_sum(0, window - 1, n, pieces)
            T = self._range_sum(window, n - 1, n, pieces)
            return None if H is None or T is None else masses_from_sums(H, T)

        m, D = certify(balls, "FIRE linear pieces")
        return MassEnclosures(m, D, "linear pieces, Hurwitz zeta (Theorems 14, 16e)", False)

    def _uncertified_reason(self):
        return "a general callable f is only sampled (no closed form); give mlp= or the default f"

    def _limit_certified(self, window):
        from ._certified import ONE

        # diluting: f continuous on [0, 1] (default or MLP) is bounded, m_n(W) <= W e^(osc f) / n -> 0
        return ONE if self._exact_pieces() is not None else None

    def _masses(self, window, n):
        pieces = None if n <= 1 << 16 else self._exact_pieces()
        if pieces is None:  # short rows, or a general callable f (capped at DIRECT_MAX by log_weights)
            return super()._masses(window, n)
        out = self._certified(window, n)  # Theorem 16e: the enclosure's midpoints
        return out.window_mass.mid, out.distant_mass.mid

    def _verdict(self):
        if self.mlp is not None:
            lo, hi = _mlp_range(self._mlp_arrays())
            spread = float(np.max(hi - lo))
            how = "exactly (piecewise linear)"
        else:
            grid = np.linspace(0.0, 1.0, 1001)
            values = self._f(grid)
            spread = float(values.max() - values.min())
            how = "sampled at 1001 points"
        return Verdict(
            self,
            False,
            "diluting",
            f"the input psi(d)/(psi(max(n-1, L)) + eps) lies in [0, 1], where f spans {spread:.4g} ({how}): "
            "e^b(d) >= e^(min f) > 0 at every d, not summable.",
            f"1 - D_n(W) <= W e^(osc f) / n (osc f = {spread:.4g})",
        )


def _floor_ends(x):
    """``(floor(lower), floor(upper))`` of a finite ball, exactly (Python integers, any magnitude)."""
    from fractions import Fraction

    man, exp = x.mid().man_exp()
    rman, rexp = x.rad().man_exp()
    mid = Fraction(int(man)) * Fraction(2) ** int(exp)
    rad = Fraction(int(rman)) * Fraction(2) ** int(rexp)
    return math.floor(mid - rad), math.floor(mid + rad)


def _em_piece(A, s, c, d0, d1):
    """Theorem 16e(ii): :math:`\\sum_{d=d_0}^{d_1} g(d)`, :math:`g(x) = e^A(1 + cx)^s`, by Euler-Maclaurin of order 4.

    .. math:: \\sum g = \\int_{d_0}^{d_1} g + \\frac{g(d_0) + g(d_1)}2 + \\frac{\\Delta g'}{12}
              - \\frac{\\Delta g^{(3)}}{720} + R,
              \\qquad |R| \\le \\frac{2\\zeta(4)}{(2\\pi)^4}\\int|g^{(4)}| = \\frac{|\\Delta g^{(3)}|}{720},

    :math:`\\Delta h = h(d_1) - h(d_0)`; :math:`g^{(k)}(x) = e^A s(s-1)\\cdots(s-k+1)c^k(1+cx)^{s-k}` has one
    sign on :math:`x \\ge 0`, so :math:`\\int|g^{(4)}| = |\\Delta g^{(3)}|`. The integral in closed form without
    cancellation: :math:`e^A(1+cd_0)^{s+1}\\operatorname{expm1}((s+1)\\log(1 + c(d_1-d_0)/(1+cd_0)))/(c(s+1))`
    (:math:`e^A\\log(\\cdot)/c` at ``s = -1``). Used where :math:`|s|c \\le 2^{-12}` (the Hurwitz difference
    would cancel there; the remainder is then about :math:`(|s|c)^4/720` of the sum).
    """
    import flint

    one = flint.arb(1)
    x0, x1 = one + c * d0, one + c * d1
    ratio = (c * (d1 - d0) / x0).log1p()
    if s == -1:
        integral = ratio / c
    else:
        integral = x0 ** (s + 1) * ((s + 1) * ratio).expm1() / (c * (s + 1))

    def deriv(k, x):
        coef = one
        for j in range(k):
            coef *= s - j
        return coef * c**k * x ** (s - k)

    g0, g1 = x0**s, x1**s
    d1g = deriv(1, x1) - deriv(1, x0)
    d3g = deriv(3, x1) - deriv(3, x0)
    rem = abs(d3g).upper() / 720
    return A.exp() * (integral + (g0 + g1) / 2 + d1g / 12 - d3g / 720 + flint.arb(0, rem))
