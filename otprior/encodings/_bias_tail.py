"""A user bias at any length: Euler–Maclaurin tails with derivative bounds from the expression.

Theorem 15 (``proofs/closed_form_tails.md``). For :math:`f = e^{b}` smooth on :math:`[a, c]`
(integers :math:`1 \\le a \\le c`) and :math:`p \\ge 1`,

.. math::

    \\sum_{k=a}^{c} f(k) = \\int_a^c f + \\frac{f(a) + f(c)}{2}
      + \\sum_{j=1}^{p} \\frac{B_{2j}}{(2j)!}\\bigl(f^{(2j-1)}(c) - f^{(2j-1)}(a)\\bigr) + R_p,
    \\qquad |R_p| \\le |B_{2p}| \\int_a^c \\Bigl|\\frac{f^{(2p)}(x)}{(2p)!}\\Bigr| dx .

Every piece is an Arb ball computed from the parsed expression:

* the Taylor coefficients :math:`f^{(k)}(x)/k!` at the ends are the coefficients of ``exp(b)``
  evaluated as an Arb power series (``flint.arb_series``) at the point;
* :math:`\\int |f^{(2p)}|/(2p)!` is bounded by :math:`\\sum_i (x_{i+1} - x_i) \\sup_{[x_i, x_{i+1}]}|c_{2p}|`
  over pieces :math:`[x_i, x_{i+1}]` (:math:`x_{i+1} = \\min(c, \\max(2x_i, \\min(x_i^2, 2^{24}x_i)))`), the supremum
  enclosed by the same power series evaluated with the whole piece as its constant term (a
  finite ball also proves ``b`` analytic on the piece);
* :math:`\\int_a^c f = \\int_{\\log a}^{\\log c} e^{b(e^u) + u} du` is Arb's rigorous ``acb.integral``
  in :math:`u = \\log x`, where :math:`\\log(\\alpha + \\gamma d)` and :math:`(\\alpha + \\gamma d)^s` are written
  :math:`\\log\\gamma + u + \\log(1 + (\\alpha/\\gamma)e^{-u})` (analytic in a wide region of the ``u``-plane, so
  a power-law tail to :math:`10^{300}` takes a few hundred evaluations instead of thousands).

The float route (:func:`float_tail_log`) evaluates the same formula with ``p = 2`` in double
precision, the integral by Gauss–Legendre on unit pieces of ``u`` (trailing pieces whose ends are
all below e^-230 of the largest dropped), and checks itself against a second rule (8 and 16 nodes
must agree to ``1e-11``); where the check fails the caller takes the certified route. Not a proof:
its error is measured against the certified route and 30-digit references (at most a few ulps, and
about ``|b| eps`` relative where ``|b|`` is large, the conditioning of ``e^b`` in double precision).
"""

from __future__ import annotations

import math

import flint
import numpy as np

from .._power_sums import _B2J_FRACTIONS
from ..expression import import_sympy

__all__ = ["compile_bias", "em_sum_arb", "direct_sum_arb", "float_tail_log"]

ORDER = 6  # p: Bernoulli terms B_2 .. B_12, remainder through f^(12)
EVAL_LIMIT = 6000  # evaluations of the integrand in one acb.integral (then: not proved)


class Unsupported(Exception):
    """The expression has a node outside the compiled grammar."""


def _linear(A, d):
    """``(alpha, gamma)`` when ``A = alpha + gamma d`` with numbers ``alpha >= 0``, ``gamma > 0``."""
    sp = import_sympy()
    if A == d:
        return sp.Integer(0), sp.Integer(1)
    poly = sp.Poly(A, d) if A.is_polynomial(d) else None
    if poly is None or poly.degree() != 1:
        return None
    gamma, alpha = poly.all_coeffs()
    if not (gamma.is_Number and alpha.is_Number) or not (gamma > 0 and alpha >= 0):
        return None
    return alpha, gamma


def _const(e):
    sp = import_sympy()
    if e is sp.pi:
        return ("pi",)
    if e is sp.E:
        return ("e",)
    if e.is_Number and e.is_real:
        q = sp.Rational(e)  # a Float's exact binary value
        return ("q", int(q.p), int(q.q))
    raise Unsupported(str(e))


def compile_bias(expr, d):
    """The expression tree as nested tuples (the grammar: numbers, ``d``, ``+``, ``*``, powers,
    ``log``, ``exp``, ``sin``, ``cos``); raises :class:`Unsupported` otherwise."""
    sp = import_sympy()

    def node(e):
        if e == d:
            return ("x",)
        if e.is_Number or e is sp.pi or e is sp.E:
            return _const(e)
        if e.is_Add:
            return ("add", tuple(node(a) for a in e.args))
        if e.is_Mul:
            return ("mul", tuple(node(a) for a in e.args))
        if e.is_Pow:
            base, ex = e.args
            if ex.is_Integer:
                return ("powi", node(base), int(ex))
            if ex.is_Number:
                lin = _linear(base, d)
                if lin is not None:
                    return ("powlin", _const(lin[0]), _const(lin[1]), _const(ex))
                return ("powc", node(base), _const(ex))
            return ("pow", node(base), node(ex))
        if e.func is sp.log and len(e.args) == 1:
            lin = _linear(e.args[0], d)
            if lin is not None:
                return ("loglin", _const(lin[0]), _const(lin[1]))
            return ("log", node(e.args[0]))
        if e.func in (sp.exp, sp.sin, sp.cos) and len(e.args) == 1:
            return (e.func.__name__, node(e.args[0]))
        raise Unsupported(type(e).__name__)

    return node(expr)


_CONSTANTS = {}  # (node, kind, precision) -> ball: the integrand is evaluated thousands of times


def _num(c, kind):
    key = (c, kind, flint.ctx.prec)
    out = _CONSTANTS.get(key)
    if out is None:
        if c[0] == "q":
            out = kind(c[1]) / c[2] if c[2] != 1 else kind(c[1])
        elif c[0] == "pi":
            out = kind(flint.arb.pi())
        else:
            out = kind(flint.arb.const_e())
        if len(_CONSTANTS) > 4096:
            _CONSTANTS.clear()
        _CONSTANTS[key] = out
    return out


def _eval(n, x, kind, series=False):
    """The tree at ``x``: an ``arb`` ball (``kind = flint.arb``) or an ``arb_series``."""
    tag = n[0]
    if tag == "x":
        return x
    if tag in ("q", "pi", "e"):
        return _num(n, flint.arb)
    if tag == "add":
        out = _eval(n[1][0], x, kind, series)
        for a in n[1][1:]:
            out = out + _eval(a, x, kind, series)
        return out
    if tag == "mul":
        out = _eval(n[1][0], x, kind, series)
        for a in n[1][1:]:
            out = out * _eval(a, x, kind, series)
        return out
    if tag == "powi":
        return _eval(n[1], x, kind, series) ** n[2]
    if tag in ("powlin", "powc", "pow"):
        if tag == "powlin":
            base, ex = _num(n[1], flint.arb) + _num(n[2], flint.arb) * x, _num(n[3], flint.arb)
        else:
            base = _eval(n[1], x, kind, series)
            ex = _num(n[2], flint.arb) if tag == "powc" else _eval(n[2], x, kind, series)
        if not series:
            return base**ex  # Arb's real power: 0 at a zero base with a positive exponent, nan below 0
        if tag != "pow" and n[-1][0] == "q" and n[-1][2] == 1:
            return base ** n[-1][1]  # an integer exponent: exact series powers (no log-exp on a wide ball)
        return (base.log() * ex).exp()
    if tag == "loglin":
        return (_num(n[1], flint.arb) + _num(n[2], flint.arb) * x).log()
    v = _eval(n[1], x, kind, series)
    return getattr(v, tag)()


def _log1p_an(t, analytic):
    if analytic and not (t.real > -1):  # log(1 + t) is analytic where Re(1 + t) > 0
        return flint.acb("nan")
    return t.log1p()


def _eval_u(n, z, ez, analytic):
    """The tree at ``d = e^z`` (``acb`` ``z``, ``ez = e^z``), analytic in ``z`` or non-finite."""
    tag = n[0]
    acb = flint.acb
    if tag == "x":
        return ez
    if tag in ("q", "pi", "e"):
        return _num(n, acb)
    if tag == "add":
        out = _eval_u(n[1][0], z, ez, analytic)
        for a in n[1][1:]:
            out = out + _eval_u(a, z, ez, analytic)
        return out
    if tag == "mul":
        out = _eval_u(n[1][0], z, ez, analytic)
        for a in n[1][1:]:
            out = out * _eval_u(a, z, ez, analytic)
        return out
    if tag == "powi":
        return _eval_u(n[1], z, ez, analytic) ** n[2]
    if tag in ("loglin", "powlin"):
        alpha, gamma = _num(n[1], acb), _num(n[2], acb)
        # log(alpha + gamma e^z) = log gamma + z + log(1 + (alpha/gamma) e^-z)
        lg = gamma.log() + z + (_log1p_an(alpha / gamma * (-z).exp(), analytic) if n[1] != ("q", 0, 1) else 0)
        return lg if tag == "loglin" else (lg * _num(n[3], acb)).exp()
    if tag == "powc":
        return (_eval_u(n[1], z, ez, analytic).log(analytic=analytic) * _num(n[2], acb)).exp()
    if tag == "pow":
        return (_eval_u(n[1], z, ez, analytic).log(analytic=analytic) * _eval_u(n[2], z, ez, analytic)).exp()
    if tag == "log":
        return _eval_u(n[1], z, ez, analytic).log(analytic=analytic)
    return getattr(_eval_u(n[1], z, ez, analytic), tag)()


def f_ball(tree, k):
    """:math:`e^{b(k)}` as an ``arb`` ball (``k`` an integer or a ball)."""
    return _eval(tree, flint.arb(k), flint.arb).exp()


def direct_sum_arb(tree, lo, hi):
    """:math:`\\sum_{k=lo}^{hi} e^{b(k)}` term by term in Arb (``hi - lo`` small)."""
    total = flint.arb(0)
    for k in range(lo, hi + 1):
        total += f_ball(tree, k)
    return total


def _coeffs(tree, x, length):
    """Taylor coefficients :math:`f^{(k)}(\\xi)/k!`, ``k < length``, enclosed for every ``xi`` in the ball ``x``.

    Call under :func:`otprior._balls.arb_precision` (its lock also guards python-flint's series
    length cap, ``flint.ctx.cap``, raised here for the call: series are truncated to it)."""
    old = flint.ctx.cap
    flint.ctx.cap = max(old, length)
    try:
        ser = flint.arb_series([x, 1], prec=length)
        out = _eval(tree, ser, flint.arb, True).exp().coeffs()
    finally:
        flint.ctx.cap = old
    # with the cap at least ``length``, only coefficients that are exactly zero are left off
    return list(out) + [flint.arb(0)] * (length - len(out))


def _integral_u(tree, a, c, prec, abs_tol=None):
    """:math:`\\int_a^c e^{b(x)} dx` as an ``arb`` ball (``acb.integral`` in ``u = log x``), or ``None``."""

    def g(z, analytic):
        v = _eval_u(tree, z, z.exp(), analytic) + z
        return v.exp()

    lo, hi = flint.arb(a).log(), flint.arb(c).log()
    try:
        # abs_tol: Arb's default (2^-prec) would answer a tiny integral (a tail near 1e300) with a
        # ball around 0; the caller's scale, a lower bound of the sum, is passed instead
        val = flint.acb.integral(
            g, flint.acb(lo), flint.acb(hi), rel_tol=flint.arb(2) ** -(prec - 30), abs_tol=abs_tol, eval_limit=EVAL_LIMIT
        )
    except (ValueError, ZeroDivisionError, ArithmeticError):
        return None
    if not val.real.is_finite() or not val.imag.contains(0):
        return None
    return val.real


def _b_over_fact(j):
    """:math:`B_{2j}/(2j)!` as an exact fraction (python-flint's Bernoulli numbers)."""
    if j <= len(_B2J_FRACTIONS):
        p, q = _B2J_FRACTIONS[j - 1]
        return flint.fmpq(p, q)
    return flint.fmpq.bernoulli(2 * j) / math.factorial(2 * j)


def _negligible_from(tree, a, c, level):
    """``(X, bound)``: the least piece end ``X`` (pieces ``[x, 2^16 x]`` from ``a``) with
    :math:`\\int_X^c f \\le` ``bound`` :math:`\\le` ``level``, the bound a sum of (length x supremum of ``f``)
    over the pieces, each supremum an Arb ball of ``f`` on the whole piece; ``(c, None)`` if none."""
    edges = [a]
    while edges[-1] < c:
        edges.append(min(c, edges[-1] << 16))
    if len(edges) < 3:
        return c, None
    pieces = []
    for x, y in zip(edges[:-1], edges[1:], strict=True):
        try:
            v = _eval(tree, flint.arb(x).union(flint.arb(y)), flint.arb).exp()
        except (ValueError, ZeroDivisionError, ArithmeticError):
            v = flint.arb("nan")
        pieces.append((y - x) * v.upper() if v.is_finite() else None)
    suffix = flint.arb(0)
    best = (c, None)
    for i in range(len(pieces) - 1, 0, -1):  # [edges[i], c]: pieces i .. end
        if pieces[i] is None:
            break
        suffix += pieces[i]
        if not (suffix <= level):
            break
        best = (edges[i], suffix)
    return best


def remainder_bound(tree, a, c, order=ORDER, doubling=False):
    """:math:`|B_{2p}|\\int_a^c |f^{(2p)}|/(2p)!`, bounded piece by piece (Theorem 15), or ``None``."""
    B2p = abs(flint.arb(_b_over_fact(order))) * math.factorial(2 * order)
    total = flint.arb(0)
    x = a
    while x < c:
        # pieces [x, y] with y/x <= 2^24: the ball's radius, rounded up to 30 bits, keeps its
        # lower end above x/2 (a wider piece could reach 0, where log is not finite)
        y = min(c, 2 * x) if doubling else min(c, max(2 * x, min(x * x, x << 24)))
        ball = flint.arb(x).union(flint.arb(y))
        try:
            cc = _coeffs(tree, ball, 2 * order + 1)[2 * order]
        except (ValueError, ZeroDivisionError, ArithmeticError):
            return None
        if not cc.is_finite():
            return None
        total += (y - x) * abs(cc).upper()
        x = y
    return B2p * total


def em_sum_arb(tree, a, c, prec, order=ORDER, integral=None, doubling=False):
    """A ball containing :math:`\\sum_{k=a}^{c} e^{b(k)}` (Theorem 15), ``1 <= a < c``; ``None`` if not proved
    or wider than ``2^-(prec - 36)`` of the sum."""
    R = remainder_bound(tree, a, c, order, doubling)
    if R is None:
        return None
    ca = _coeffs(tree, flint.arb(a), 2 * order)
    cc = _coeffs(tree, flint.arb(c), 2 * order)
    # the sum is at least its larger end term: a remainder above 2^-(prec - 36) of it is too
    # wide to be worth the integral (the caller starts the tail further out)
    floor = ca[0].max(cc[0]) if ca[0].is_finite() and cc[0].is_finite() else ca[0]
    if not (R <= floor * flint.arb(2) ** -(prec - 36)):
        return None
    # the integral: a closed form where the caller has one (KERPLE-power's incomplete gammas), else Arb's,
    # over [a, X] with the rest of it, where negligible, bounded by its pieces' suprema
    if integral is None:
        X, rest = _negligible_from(tree, a, c, floor * flint.arb(2) ** -(prec - 30))
        integral = _integral_u(tree, a, X, prec, abs_tol=(floor * flint.arb(2) ** -(prec - 20)).upper())
        if integral is not None and rest is not None:
            integral = integral + flint.arb(0).union(rest)
    else:
        integral = integral(a, c)
    if integral is None or not integral.is_finite():
        return None
    est = integral + (ca[0] + cc[0]) / 2
    for j in range(1, order + 1):
        m = 2 * j - 1
        # B_2j/(2j)! f^(2j-1) = B_2j/(2j)! (2j-1)! c_(2j-1)
        est += flint.arb(_b_over_fact(j)) * math.factorial(m) * (cc[m] - ca[m])
    return est + flint.arb(0, R.upper()) if R.is_finite() else None


# -- the float route -----------------------------------------------------------------------
_GL16 = np.polynomial.legendre.leggauss(16)
_GL8 = np.polynomial.legendre.leggauss(8)


def _logsumexp(v):
    top = np.max(v)
    if not np.isfinite(top):
        return top
    return float(top + np.log(np.sum(np.exp(v - top))))


def _pieces(bfun, lu0, lu1):
    """Unit pieces of ``u`` in ``[lu0, lu1]``, without the trailing ones whose ends all lie below
    e^-230 of the largest end value (a tail that has died out: a super-exponential decay such as
    ``-0.02 sqrt(d)`` keeps 20 pieces of 690 to 1e300)."""
    pieces = max(1, int(math.ceil(lu1 - lu0)))
    edges = np.linspace(lu0, lu1, pieces + 1)
    with np.errstate(all="ignore"):
        at = np.asarray(bfun(np.exp(edges)), dtype=float) * np.ones_like(edges) + edges
    if np.any(np.isnan(at)) or np.any(at == np.inf):
        return edges
    top = np.max(at)
    alive = np.nonzero(at > top - 230.0)[0] if np.isfinite(top) else np.arange(edges.size)
    last = max(1, int(alive[-1]) + 1) if alive.size else edges.size - 1
    return edges[: min(edges.size, last + 1)]


def _gl_log(bfun, edges, rule):
    """``log int e^{b(e^u) + u} du`` over ``edges`` by Gauss–Legendre on each piece."""
    x, w = rule
    half = 0.5 * np.diff(edges)
    u = (0.5 * (edges[:-1] + edges[1:]))[:, None] + half[:, None] * x[None, :]
    with np.errstate(all="ignore"):
        val = bfun(np.exp(u)) + u + np.log(w)[None, :] + np.log(half)[:, None]
    return _logsumexp(np.asarray(val, dtype=float).ravel())


def float_tail_log(fns, a, c, ref_log=-math.inf):
    """``log sum_{k=a}^{c} e^{b(k)}`` in double precision (Theorem 15 with p = 2), or ``None``
    when the two quadrature rules disagree beyond ``1e-11`` of the larger of the integral and
    ``e^ref_log`` (the rest of the sum it is added to), or a value is not finite.

    ``fns``: the bias and its first three derivatives as numpy functions."""
    b0, b1, b2, b3 = fns
    lu0, lu1 = math.log(a), math.log(c)
    edges = _pieces(b0, lu0, lu1)
    i16 = _gl_log(b0, edges, _GL16)
    i8 = _gl_log(b0, edges, _GL8)
    if math.isnan(i16) or math.isnan(i8) or i16 == math.inf or i8 == math.inf:
        return None
    top = max(i16, i8, ref_log)
    if top == -math.inf or abs(math.exp(i16 - top) - math.exp(i8 - top)) > 1e-11:
        return None
    ends = np.array([float(a), float(c)])
    with np.errstate(all="ignore"):
        lb = np.asarray(b0(ends), dtype=float) * np.ones(2)
        d1 = np.asarray(b1(ends), dtype=float) * np.ones(2)
        d2 = np.asarray(b2(ends), dtype=float) * np.ones(2)
        d3 = np.asarray(b3(ends), dtype=float) * np.ones(2)
    if np.any(np.isnan(lb)) or np.any(lb == np.inf) or not np.all(np.isfinite(d1 + d2 + d3) | (lb == -np.inf)):
        return None
    scale = max(i16, float(np.max(lb)))
    if scale == -math.inf:
        return -math.inf
    fe = np.exp(lb - scale)
    with np.errstate(all="ignore"):  # an end where f underflows contributes 0 to every term
        f1 = np.where(fe > 0, d1 * fe, 0.0)  # f' = b' f
        f3 = np.where(fe > 0, (d3 + 3 * d1 * d2 + d1**3) * fe, 0.0)  # f''' = (b''' + 3 b' b'' + b'^3) f
    total = math.exp(i16 - scale) + 0.5 * (fe[0] + fe[1]) + (f1[1] - f1[0]) / 12 - (f3[1] - f3[0]) / 720
    if not total > 0:
        return None
    return scale + math.log(total)


def range_sum_arb(tree, lo, hi, N, prec):
    """:math:`\\sum_{k=lo}^{hi} e^{b(k)}`: terms below ``N`` one by one, the rest by Theorem 15; ``None`` if not proved."""
    if hi < lo:
        return flint.arb(0)
    total = direct_sum_arb(tree, lo, min(hi, N - 1)) if lo < N else flint.arb(0)
    start = max(lo, N)
    if hi < start:
        return total
    if hi - start < 16:
        return total + direct_sum_arb(tree, start, hi)
    tail = em_sum_arb(tree, start, hi, prec)
    return None if tail is None else total + tail
