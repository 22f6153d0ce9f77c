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

    def _linear_pieces(self):
        """``[(u0, u1, a, b)]``: ``f(u) = a + b u`` on ``[u0, u1]``, covering [0, 1], or ``None``
        (a general callable). The default ``-8 x`` is one piece; a one-head MLP is linear
        between its ReLU kinks (the active set fixed on each piece)."""
        if self.mlp is None:
            return None if self.f is not None else [(0.0, 1.0, 0.0, -8.0)]
        W1, b1, W2, b2 = self._mlp_arrays()
        if W2.shape[0] != 1:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            kinks = -b1 / W1
        cuts = np.unique(np.concatenate([[0.0, 1.0], kinks[np.isfinite(kinks) & (kinks > 0) & (kinks < 1)]]))
        pieces = []
        for u0, u1 in zip(cuts[:-1], cuts[1:], strict=True):
            mid = 0.5 * (u0 + u1)
            active = (W1 * mid + b1) > 0
            slope = float(np.sum(W2[0] * W1 * active))
            icpt = float(np.sum(W2[0] * b1 * active) + b2[0])
            pieces.append((float(u0), float(u1), icpt, slope))
        return pieces

    def _sum_pieces(self, top, n):
        """``sum_{d=0}^{top} e^{b_n(d)}`` over the linear pieces of ``f`` as a ball (Theorem 14):
        on a piece ``e^{a + b u(d)} = e^a (|c| d + 1)^{b / Lam}``, a Hurwitz-zeta difference in
        ``d + 1/|c|``; ``Lam = log(|c| max(n - 1, |L|) + 1) + eps``."""
        import flint

        c = abs(self.c)
        lam = flint.arb(abs(c * max(n - 1, abs(self.L))) + 1.0).log() + flint.arb(self.eps)
        o = flint.arb(1) / flint.arb(c)
        total = flint.arb(0)
        start = 0
        pieces = self._linear_pieces()
        for k, (_u0, u1, a, b) in enumerate(pieces):
            if start > top:
                break
            if k == len(pieces) - 1:
                end = top
            else:  # the last d with u(d) <= u1: d <= (e^{u1 Lam} - 1)/|c|
                edge = ((flint.arb(u1) * lam).exp() - 1) / flint.arb(c)
                end = min(top, int(math.floor(float(edge.mid()))))
            if end < start:
                continue
            s = flint.arb(b) / lam  # exponent of (|c| d + 1)
            scale = flint.arb(a).exp() * flint.arb(c) ** s
            if end - start < 40:
                part = sum(((flint.arb(d) + o) ** s for d in range(start, end + 1)), flint.arb(0))
            elif s == 0:
                part = flint.arb(end - start + 1)
            else:
                ms = -s
                part = ms.zeta(flint.arb(start) + o) - ms.zeta(flint.arb(end + 1) + o)
            total += scale * part
            start = end + 1
        return total

    def _masses(self, window, n):
        pieces = None if n <= 1 << 16 else self._linear_pieces()
        if pieces is None:  # short rows, or a general callable f (capped at DIRECT_MAX by log_weights)
            return super()._masses(window, n)
        from .._balls import arb_precision

        prec = 128
        while True:
            with arb_precision(prec):
                head = self._sum_pieces(window - 1, n)
                total = self._sum_pieces(n - 1, n)
                tail = total - head
                m, D = head / total, tail / total
                if (m.rad() < 2.0**-55 * m.mid().abs_lower() and D.rad() < 2.0**-55 * D.mid().abs_lower()) or prec >= 2048:
                    return float(m.mid()), float(D.mid())
            prec *= 2

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
