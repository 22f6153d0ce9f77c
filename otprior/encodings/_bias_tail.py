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
all below e^-230 of the largest left to a bound of Theorem 15d), and answers only where Theorem 15i proves the
rule's error, the remainder and that bound below ``2^-40`` of the sum (one Arb bound of ``b(e^z)`` on a complex
box per group of pieces: a narrow feature makes it large); else the caller takes the certified route. Its rounding
is an estimate, measured against the certified route and 30-digit references (at most a few ulps, and
about ``|b| eps`` relative where ``|b|`` is large, the conditioning of ``e^b`` in double precision).

Beyond Theorem 15 (same file of proofs): interval bounds of ``b`` on a piece, with monotone functions
evaluated at the ends of their argument (:func:`_interval`), give the cut's suprema, the dominance bounds
of a growing bias in the log domain (:func:`log_sum_bounds`) and the reverse cut of a sum whose weight is
at its far end (Theorem 15d); ``beta sin(omega d + phi)`` is summed by the Jacobi–Anger expansion with
geometric sums of cosines (:func:`periodic_sum_arb`, Theorem 15e) and ``h + beta sin(omega d + phi)`` by
the same expansion with twisted Euler–Maclaurin sums of ``e^h`` (:func:`mixed_sum_arb`, Theorem 15f).
"""

from __future__ import annotations

import bisect
import math

import flint
import numpy as np

from .._power_sums import _B2J_FRACTIONS
from ..expression import import_sympy

__all__ = [
    "compile_bias", "em_sum_arb", "direct_sum_arb", "float_tail_log", "infinite_sum_arb", "log_sum_bounds",
    "mixed_sum_arb", "periodic_form", "periodic_split", "periodic_sum_arb", "point_interval", "tail_envelope",
]

ORDER = 6  # p: Bernoulli terms B_2 .. B_12, remainder through f^(12)
EVAL_LIMIT = 6000  # evaluations of the integrand in one acb.integral (then: not proved)
_DOUBLING_END = 1 << 20  # remainder pieces [x, 2x] below it, [x, min(x^2, 2^24 x)] beyond
_CUT_DOUBLINGS = 48  # pieces of the negligible cut: 48 doublings from the start, then ratios up to 2^24


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
        # a decimal constant as the user wrote it (the parser stores a number as the shortest decimal of its
        # double, ``repr``, or, for a literal with more digits than that, a Float holding every digit, which sympy
        # prints back digit for digit): near a resonance (sin(6.28318530717959 d) at n = 1e15) the double's binary
        # value moves the mass by 4%; the float routes evaluate the double (except their exact phase reductions)
        q = sp.Rational(str(e)) if e.is_Float else sp.Rational(e)
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
            lin = _linear(base, d) if ex.is_Number else None
            if ex.is_Integer and lin is not None and ex < 0 and base != d:
                # 1/(1 + d): in u = log x as exp(-(log g + u + log1p((a/g) e^-u))), analytic in a wide region (as a
                # power of 1 + e^u its pole at u = i pi made Arb's integral take 3700 evaluations to 1e300)
                return ("powlin", _const(lin[0]), _const(lin[1]), _const(ex))
            if ex.is_Integer:
                return ("powi", node(base), int(ex))
            if ex.is_Number:
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
        if tag != "powlin":
            logp = _log_poly(n[1], x, series)
            if logp is not None:  # a polynomial base of degree >= 2 at positive x: its logarithm term by term
                return (logp * ex).exp()
        if not series:
            return base**ex  # Arb's real power: 0 at a zero base with a positive exponent, nan below 0
        if tag != "pow" and n[-1][0] == "q" and n[-1][2] == 1:
            return base ** n[-1][1]  # an integer exponent: exact series powers (no log-exp on a wide ball)
        return (base.log() * ex).exp()
    if tag == "loglin":
        return (_num(n[1], flint.arb) + _num(n[2], flint.arb) * x).log()
    if tag == "log":
        logp = _log_poly(n[1], x, series)
        if logp is not None:
            return logp
    v = _eval(n[1], x, kind, series)
    return getattr(v, tag)()


def _log_poly(n, x, series):
    """``log P(x)`` for a polynomial node ``P = c_k d^k + ... + c_0`` of degree ``k >= 2`` with rational coefficients and
    ``c_k > 0``, at a ball (or series) ``x`` whose lower end is positive, as
    ``log c_k + k log x + log1p(sum_{j<k} (c_j/c_k) x^(j-k))`` (the same function for ``x > 0``); ``None`` for any other
    node or ``x``, or where that form is not finite. Midpoint-radius arithmetic bounds ``x^k`` on a wide ball with a
    negative lower end (``d**2`` on the ball of ``[2^20, 1e9]``, ``d**4`` already on ``[x, 1.5x]``), so ``log P`` of the
    ball was not finite and a wide piece of Theorem 15's remainder refused; ``x^(j-k)`` and ``log x`` are tight there."""
    far = _far_poly(n)
    if far is None:
        return None
    x0 = x.coeffs()[0] if series else x
    # only beyond the threshold X (|t| <= 1/2): below it k log x and log1p(c_0/(c_k x^k)) cancel, which balls do not
    # see (log(d**2 + 1e4) on [64, 99] was refused)
    if not (x0 > 0) or not (x0.lower() >= flint.arb(far[1]).exp().upper()):
        return None
    poly = far[0]
    k = len(poly) - 1
    lead = flint.arb(poly[-1].p) / poly[-1].q
    inv = 1 / x
    t, power = None, inv
    for j in range(k - 1, -1, -1):  # x^(j - k) = (1/x)^(k - j)
        c = poly[j]
        if c != 0:
            term = (flint.arb(c.p) / c.q / lead) * power
            t = term if t is None else t + term
        power = power * inv
    rest = 0 if t is None else ((1 + t).log() if series else t.log1p())  # arb_series has no log1p
    out = lead.log() + k * x.log() + rest
    finite = all(c.is_finite() for c in out.coeffs()) if series else out.is_finite()
    return out if finite else None


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
        if n[2] < 0 and _far_poly(n[1]) is not None:
            # 1/P(e^z)^m as e^(-m log P): log1p of e^-z terms is analytic in a wide strip, where P(e^z)'s ball wraps
            # round 0 on a tall ellipse (-1e-3/(d**2 + 1) ran out of evaluations to 1e100); not finite where the log1p
            # argument leaves Re > -1 (P < 0 on the range: 1/(2*d**2 - 9) is real there), then as written
            out = (_log_u(n[1], z, ez, analytic) * n[2]).exp()
            if out.is_finite():
                return out
        return _eval_u(n[1], z, ez, analytic) ** n[2]
    if tag in ("loglin", "powlin"):
        alpha, gamma = _num(n[1], acb), _num(n[2], acb)
        # log(alpha + gamma e^z) = log gamma + z + log(1 + (alpha/gamma) e^-z)
        lg = gamma.log() + z + (_log1p_an(alpha / gamma * (-z).exp(), analytic) if n[1] != ("q", 0, 1) else 0)
        return lg if tag == "loglin" else (lg * _num(n[3], acb)).exp()
    if tag == "powc":
        return (_log_u(n[1], z, ez, analytic) * _num(n[2], acb)).exp()
    if tag == "pow":
        return (_log_u(n[1], z, ez, analytic) * _eval_u(n[2], z, ez, analytic)).exp()
    if tag == "log":
        return _log_u(n[1], z, ez, analytic)
    return getattr(_eval_u(n[1], z, ez, analytic), tag)()


_POLYS = {}  # node -> _far_poly's answer: read once per node, the integrand is evaluated thousands of times


def _far_poly(n):
    """``(coeffs, log X)`` for a node that is a sum of monomials as written (``d**2 + 1``, not ``(d - 1e8)**2 + 1``: expanded,
    that cancels near its root) with rational coefficients ``coeffs = (c_0, ..., c_k)`` (exact ``fmpq``), of degree
    ``k >= 2`` with ``c_k > 0``, where ``X`` is the far form's threshold
    (:func:`otprior.encodings._bias_float.far_threshold`: ``|sum_{j<k} (c_j/c_k) x^(j-k)| <= 1/2`` for ``x >= X``); else
    ``None``."""
    if n in _POLYS:
        return _POLYS[n]

    def monomial(t):  # (j, c) for c d^j (d, d**j with 0 <= j <= 64, a number, or a number times one of them), else None
        if t[0] == "q":
            return 0, flint.fmpq(t[1], t[2])
        if t == ("x",):
            return 1, flint.fmpq(1)
        if t[0] == "powi" and t[1] == ("x",) and 0 <= t[2] <= 64:
            return t[2], flint.fmpq(1)
        if t[0] == "mul" and len(t[1]) == 2 and t[1][0][0] == "q" and t[1][1][0] != "q":
            inner = monomial(t[1][1])
            return None if inner is None else (inner[0], inner[1] * flint.fmpq(t[1][0][1], t[1][0][2]))
        return None

    out = None
    terms = [monomial(t) for t in n[1]] if n[0] == "add" else [None]
    if all(m is not None for m in terms):
        poly = [flint.fmpq(0)] * (max(j for j, _ in terms) + 1)
        for j, c in terms:
            poly[j] += c
        while len(poly) > 1 and poly[-1] == 0:
            poly.pop()
        cs = list(reversed(poly))  # highest first
        if len(poly) > 2 and poly[-1] > 0 and all(c == 0 or 1e-300 <= abs(float(c / cs[0])) <= 1e300 for c in cs[1:]):
            from ._bias_float import far_threshold

            out = (tuple(poly), math.log(far_threshold(cs)))
    if len(_POLYS) > 4096:
        _POLYS.clear()
    _POLYS[n] = out
    return out


def _log_u(n, z, ez, analytic):
    """``log`` of the node at ``d = e^z``. A polynomial of :func:`_far_poly`, ``P(d) = c_k d^k + ... + c_0``, is, where
    ``Re z >= log X``, ``log c_k + k z + log1p(sum_{j<k} (c_j/c_k) e^{-(k-j) z})``: far out its logarithm is then formed without
    ``e^{kz}``, whose ball over a wide piece in ``z`` bounds the argument of ``log`` by its modulus only (Arb's integral of
    ``(d**2 + 1)^(-1/2)`` to ``1e30`` ran out of evaluations, the identity is exact)."""
    far = _far_poly(n)
    if far is None or not (z.real.lower() >= far[1]):  # written form below the threshold (|t| <= 1/2 beyond it)
        return _eval_u(n, z, ez, analytic).log(analytic=analytic)
    poly = far[0]
    k, acb = len(poly) - 1, flint.acb
    lead = acb(flint.arb(poly[-1].p) / poly[-1].q)
    t = acb(0)
    for j, c in enumerate(poly[:-1]):
        if c != 0:
            t += acb(flint.arb(c.p) / c.q) / lead * (-(k - j) * z).exp()
    return lead.log() + k * z + (_log1p_an(t, analytic) if poly[:-1] != (0,) * k else 0)


def _linear_part(n):
    """``kappa`` (an exact ``fmpq``) with ``b(e^z) = kappa z + rest(z)`` read off the tree: ``log(alpha + gamma d)`` is
    ``z + log gamma + log1p((alpha/gamma) e^-z)``, sums add, a product by an exact rational scales; every other node has
    ``kappa = 0`` (Theorem 15i(iv))."""
    tag = n[0]
    if tag == "loglin":
        return flint.fmpq(1)
    if tag == "add":
        return sum((_linear_part(a) for a in n[1]), flint.fmpq(0))
    if tag == "mul":
        consts = [a for a in n[1] if a[0] == "q"]
        others = [a for a in n[1] if a[0] != "q"]
        if len(others) == 1:
            k = _linear_part(others[0])
            for c in consts:
                k *= flint.fmpq(c[1], c[2])
            return k
    return flint.fmpq(0)


def _eval_u_rest(n, z, ez, analytic):
    """``rest(z) = b(e^z) - kappa z`` (:func:`_linear_part`) evaluated in Arb without forming ``kappa z``: the linear parts
    of the logarithms are left out where they stand, so that ``Re(b(e^z) + z) <= max((kappa + 1) Re z) + sup Re rest`` holds
    with no cancellation between copies of ``z`` (Theorem 15i(iv))."""
    tag = n[0]
    if tag == "loglin":
        alpha, gamma = _num(n[1], flint.acb), _num(n[2], flint.acb)
        out = gamma.log()
        return out + _log1p_an(alpha / gamma * (-z).exp(), analytic) if n[1] != ("q", 0, 1) else out
    if tag == "add":
        out = flint.acb(0)
        for a in n[1]:
            out = out + _eval_u_rest(a, z, ez, analytic)
        return out
    if tag == "mul":
        consts = [a for a in n[1] if a[0] == "q"]
        others = [a for a in n[1] if a[0] != "q"]
        if len(others) == 1:
            out = _eval_u_rest(others[0], z, ez, analytic)
            for c in consts:
                out = out * _num(c, flint.acb)
            return out
    return _eval_u(n, z, ez, analytic)


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
        cs = _eval(tree, ser, flint.arb, True).coeffs()
        b0 = cs[0] if cs else flint.arb(0)
        # e^{b(xi + t)} = e^{b(xi)} e^{b(xi + t) - b(xi)}: the second factor's series from the coefficients of
        # order >= 1 (moderate numbers), the first from b's ends as exact points, so that a wide ball far out
        # (b ~ -3e149) keeps its exponent to full precision (Arb's exp of a wide ball bounds it with a 30-bit
        # magnitude: a factor e^(1e-9 |b|) lost)
        rel = flint.arb_series([0] + list(cs[1:]), prec=length).exp().coeffs()
        if b0.rad() == 0 or not b0.is_finite():
            scale = b0.exp()
        else:
            scale = flint.arb(b0.lower()).exp().union(flint.arb(b0.upper()).exp())
        out = [scale * c for c in rel]
    finally:
        flint.ctx.cap = old
    # with the cap at least ``length``, only coefficients that are exactly zero are left off
    return list(out) + [flint.arb(0)] * (length - len(out))


def _integral_u(tree, a, c, prec, abs_tol=None):
    """:math:`\\int_a^c e^{b(x)} dx` as an ``arb`` ball (``acb.integral`` in ``u = log x``), or ``None``."""

    # far out (|b| beyond 600) the integrand is e^{b - s} with s = max(b(a), b(c)) as an exact number and the
    # result is multiplied by e^s: Arb bounds e^(a wide ball) with a 30-bit magnitude, which at b ~ -3e149
    # loses a factor e^(3e140) and the integral never converges
    ends = [_eval(tree, flint.arb(k), flint.arb) for k in (a, c)]
    top = ends[0].mid() if not (ends[1].mid() > ends[0].mid()) else ends[1].mid()
    shift = flint.arb(top) if ends[0].is_finite() and ends[1].is_finite() and abs(top) > 600 else flint.arb(0)
    shift_c = flint.acb(shift)

    def g(z, analytic):
        v = _eval_u(tree, z, z.exp(), analytic) + z - shift_c
        return v.exp()

    if abs_tol is not None and shift != 0:
        abs_tol = (flint.arb(abs_tol) * (-shift).exp()).upper()
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
    return val.real if shift == 0 else val.real * shift.exp()


def _b_over_fact(j):
    """:math:`B_{2j}/(2j)!` as an exact fraction (python-flint's Bernoulli numbers)."""
    if j <= len(_B2J_FRACTIONS):
        p, q = _B2J_FRACTIONS[j - 1]
        return flint.fmpq(p, q)
    return flint.fmpq.bernoulli(2 * j) / math.factorial(2 * j)


def remainder_bound(tree, a, c, order=ORDER, doubling=False):
    """:math:`|B_{2p}|\\int_a^c |f^{(2p)}|/(2p)!`, bounded piece by piece (Theorem 15), or ``None``."""
    B2p = abs(flint.arb(_b_over_fact(order))) * math.factorial(2 * order)
    total = sup_coeff_sum(tree, a, c, 2 * order, doubling)
    return None if total is None else B2p * total


def sup_coeff_sum(tree, a, c, k, doubling=False):
    """:math:`\\sum_i (x_{i+1} - x_i)\\sup_{[x_i, x_{i+1}]}|c_k|` over pieces of ``[a, c]`` (``c_k = f^{(k)}/k!``), an upper
    bound of :math:`\\int_a^c |f^{(k)}|/k!` and of :math:`\\sum_{j=a}^{c-1}\\sup_{[j, j+1]}|f^{(k)}|/k!`; ``None`` if not finite."""
    total = flint.arb(0)
    x = a
    while x < c:
        # pieces [x, y] with y/x <= 2^24: the ball's radius, rounded up to 30 bits, keeps its
        # lower end above x/2 (a wider piece could reach 0, where log is not finite)
        # below 2^20 the pieces double (a stretched exponential's derivatives fall by orders of
        # magnitude within [x, x^2]: a wide piece would bound them by its largest)
        y = min(c, 2 * x) if doubling or x < _DOUBLING_END else min(c, max(2 * x, min(x * x, x << 24)))
        part = _piece_coeff_bound(tree, x, y, k, [_SPLIT_BUDGET])
        if part is None:
            return None
        total += part
        x = y
    return total


_SPLIT_BUDGET = 64  # pieces a wide piece may be split into by :func:`_piece_coeff_bound`


def _piece_coeff_bound(tree, x, y, k, budget):
    """``(y - x) sup |c_k|`` over ``[x, y]`` as an upper bound, or ``None``. A wide piece whose ball is not finite
    (midpoint-radius arithmetic: ``d**2`` on the ball of ``[2^20, 1e9]`` reaches below 0, and ``log(d**2 + 1)`` is not
    finite) is split at its geometric mean: ``sup`` over a union is the largest of the parts' (Theorem 15)."""
    try:
        cc = _coeffs(tree, flint.arb(x).union(flint.arb(y)), k + 1)[k]
    except (ValueError, ZeroDivisionError, ArithmeticError):
        cc = flint.arb("nan")
    if cc.is_finite():
        return (y - x) * abs(cc).upper()
    if y - x < 2 or budget[0] <= 0:
        return None
    budget[0] -= 2
    m = math.isqrt(x * y)
    m = m if x < m < y else (x + y) // 2
    left = _piece_coeff_bound(tree, x, m, k, budget)
    right = None if left is None else _piece_coeff_bound(tree, m, y, k, budget)
    return None if right is None else left + right


def _cut(tree, a, c, level):
    """``(X, rest)``: the least piece end ``X - 1 >= a`` with :math:`\\sum_{k=X}^{c} f(k) \\le` ``rest`` :math:`\\le` ``level``,
    or ``(c + 1, None)`` (Theorem 15(iv), ``proofs/closed_form_tails.md``).

    Pieces ``[x, y]`` from ``a``: the offset ``x - a`` doubles 48 times, then grows by up to ``2^24`` up to ``a``,
    then 48 doublings of ``x``, then ``y = min(x^2, 2^24 x)`` (about 90 pieces from ``a = 1e299``, where doubling
    offsets took 1000); each contributes
    (integers in it) x (supremum of ``f`` on the piece as one Arb ball), an upper bound of its terms
    whatever the shape of ``f``. ``level`` is a ball; the bound is proved ``<= level``."""
    edges = [a]
    doublings = offset_steps = 0
    while edges[-1] < c:
        x = edges[-1]
        if x - a < a:  # offsets from a grow first: a tail that dies within a << a terms of a far start
            o = x - a
            y = a + (2 * o + 1 if offset_steps < _CUT_DOUBLINGS else max(2 * o, min(o * o, o << 24)))
            offset_steps += 1
        elif doublings < _CUT_DOUBLINGS:
            y, doublings = 2 * x, doublings + 1
        else:
            y = max(2 * x, min(x * x, x << 24))
        edges.append(min(c, y))
    if len(edges) < 3:
        return c + 1, None
    log_level = level.log() if level > 0 else flint.arb("nan")
    splits = [128]

    def bound(x, y, depth):
        """(integers in [x, y]) x sup f on [x, y]; a wide piece whose ball is too loose (midpoint-radius
        arithmetic: -d^2 on [x, 2^24 x] has a positive upper end) is split at its geometric mean, 5 times at most."""
        try:
            # sup f = e^{sup b}, from the exact upper end (not Arb's 30-bit bound of e^ball); far below the
            # level, e^cap with cap = log(level) - 64 - log(count) >= sup b serves (e increasing), and Arb
            # never meets exp(-e^(1e18)); the interval bound of Theorem 15d (monotone functions at the ends of
            # their argument) keeps -e^d's pieces negative, the ball of the whole piece serves where it has none
            U = _interval(tree, x, y)[1]
            bb = flint.arb(U) if U is not None else _eval(tree, flint.arb(x).union(flint.arb(y)), flint.arb)
            top = bb.upper() if bb.is_finite() else None
            if top is not None and log_level.is_finite():
                cap = (log_level - 64 - flint.arb(y - x + 1).log()).lower()
                top = top if top > cap else cap
            v = flint.arb(top).exp() if bb.is_finite() else flint.arb("nan")
        except (ValueError, ZeroDivisionError, ArithmeticError):
            v = flint.arb("nan")
        out = (y - x + 1) * v.upper() if v.is_finite() else None
        if depth < 5 and y - x > 1 and splits[0] > 0 and (out is None or not (out <= level * flint.arb(2) ** -12)):
            splits[0] -= 1  # at most 128 splits per cut: an oscillating 1e300 sin(d) split every piece 63 ways (seconds)
            try:  # no split where f at the left end already says the piece is not negligible (a power law)
                bx = _eval(tree, flint.arb(x), flint.arb)
                if bx.is_finite() and not ((y - x + 1) * flint.arb(bx.upper()).exp() <= level * flint.arb(2) ** -12):
                    return out
            except (ValueError, ZeroDivisionError, ArithmeticError):
                return out
            m = math.isqrt(x * y)
            left, right = bound(x, m, depth + 1), bound(m, y, depth + 1)
            if left is not None and right is not None and (out is None or left + right < out):
                return left + right
        return out

    suffix = flint.arb(0)
    best = (c + 1, None)
    for i in range(len(edges) - 2, 0, -1):  # the terms k >= edges[i]: pieces i .. end, bounded from the end on
        piece = bound(edges[i], edges[i + 1], 0)  # (lazily: a power law stops at its last piece)
        if piece is None:
            break
        suffix += piece
        if not (suffix <= level):
            break
        best = (edges[i], suffix)
    return best


def _fmt(k):
    """An integer for a message: exact below 1e18, else as a double."""
    return str(k) if k < 10**18 else f"{float(k):.6g}"


_END_DIRECT = 1024  # a growing sum's last terms summed one by one when its reverse cut leaves at most this many


def _reverse_cut(tree, a, c, level):
    """``(Y, rest)``: the largest piece end ``Y > a`` with :math:`\\sum_{k=a}^{Y-1} f(k) \\le` ``rest`` :math:`\\le` ``level``,
    or ``(a, None)`` (Theorem 15d(iii): the mirror of the cut, for a sum whose weight is at its far end).

    Pieces below ``c``: offsets ``c + 1 - Y`` of ``2^j - 1`` for 48 doublings, then growing by up to ``2^24``; each
    contributes (integers in it) x ``e^{sup b}`` (:func:`_interval`), an upper bound of its terms."""
    ends = [c + 1]
    o, steps = 1, 0
    while c + 1 - o > a:
        ends.append(c + 1 - o)
        o = 2 * o + 1 if steps < _CUT_DOUBLINGS else max(2 * o, min(o * o, o << 24))
        steps += 1
    ends.append(a)  # pieces [ends[j+1], ends[j] - 1], from the top down
    bounds = []
    for hi, lo in zip(ends[:-1], ends[1:], strict=True):
        U = _interval(tree, lo, hi - 1)[1]
        bounds.append(None if U is None else (hi - lo) * flint.arb(U).exp())
    best = (a, None)
    suffix = flint.arb(0)
    for j in range(len(bounds) - 1, 0, -1):  # the terms below ends[j]: pieces j .. end
        if bounds[j] is None or not bounds[j].is_finite():
            break
        suffix += bounds[j]
        if not (suffix <= level):
            break
        best = (ends[j], suffix)
    return best


def em_sum_arb(tree, a, c, prec, order=ORDER, integral=None, doubling=False, scale=None, bits=None, why=None):
    """A ball containing :math:`\\sum_{k=a}^{c} e^{b(k)}` (Theorem 15), ``1 <= a < c``; ``None`` if not proved
    to ``2^-bits`` (default ``2^-(prec - 36)``) of ``max(f(a), scale)``.

    ``scale``: a ball, a lower bound of the total this sum is added to (the caller's direct terms),
    so that a tail far below its head is not asked to be accurate relative to itself. Without a
    closed-form ``integral``, the terms from the least ``X`` with a negligible rest (Theorem 15(iv)) are
    bounded by :func:`_cut` and Euler–Maclaurin runs on ``[a, X - 1]`` only. ``why``: a list that receives the
    reason of a ``None``."""
    why = [] if why is None else why
    bits = prec - 36 if bits is None else bits
    try:  # Theorem 15d(iv): b flat on [a, c] (exp(-exp(d)) beyond 1024, 1e-300 log(1 + d)): every term in [e^L, e^U]
        L, U = _interval(tree, a, c)
    except (ValueError, ZeroDivisionError, ArithmeticError):
        L = U = None
    if L is not None and U is not None and U - L <= flint.arb(2) ** -(bits + 2):
        return (c - a + 1) * flint.arb(L).exp().union(flint.arb(U).exp())
    ca = _coeffs(tree, flint.arb(a), 2 * order)
    if not ca[0].is_finite():
        why.append(f"e^b({_fmt(a)}) is not a finite ball")
        return None
    floor = ca[0] if scale is None or not scale.is_finite() else ca[0].max(scale)
    rest = None
    if integral is None:
        fc = f_ball(tree, c)
        if fc.is_finite() and fc > ca[0] * 2**16:  # the weight sits at the far end (a growing bias): Theorem 15d(iii)
            Y, low = _reverse_cut(tree, a, c, floor.max(fc) * flint.arb(2) ** -(bits + 6))
            if low is not None and c - Y < _END_DIRECT:
                return direct_sum_arb(tree, Y, c) + flint.arb(0).union(low)
            if low is not None:
                inner = em_sum_arb(tree, Y, c, prec, order, None, doubling, floor.max(fc), bits, why)
                return None if inner is None else inner + flint.arb(0).union(low)
        X, rest = _cut(tree, a, c, floor * flint.arb(2) ** -(bits + 6))
        c = X - 1
        if c - a < 16:
            out = direct_sum_arb(tree, a, c)
            return out if rest is None else out + flint.arb(0).union(rest)
    R = remainder_bound(tree, a, c, order, doubling)
    if R is None:
        why.append(f"the Taylor coefficient of order {2 * order} of e^b is not finite on a piece of [{_fmt(a)}, {_fmt(c)}] "
                   "(b not proved analytic there)")
        return None
    cc = _coeffs(tree, flint.arb(c), 2 * order)
    if cc[0].is_finite():
        floor = floor.max(cc[0])
    # a remainder above 2^-bits of the sum's lower bound is too wide to be worth the
    # integral (the caller starts the tail further out); first, once, on pieces [x, 2x] throughout: on a wide piece
    # midpoint-radius arithmetic loses the cancellation in d**2/(d**2 + 1) (at most log2(c/a) <= 1000 pieces)
    if not (R <= floor * flint.arb(2) ** -bits) and not doubling:
        R2 = remainder_bound(tree, a, c, order, True)
        R = R if R2 is None else R2
    if not (R <= floor * flint.arb(2) ** -bits):
        why.append(f"the Euler-Maclaurin remainder on [{_fmt(a)}, {_fmt(c)}] stays above 2^-{bits} of the sum (derivatives of "
                   "e^b that do not shrink, e.g. an undamped oscillation; or, for a growing bias, bounds of them "
                   "on pieces too wide to be tight)")
        return None
    # the integral: a closed form where the caller has one (KERPLE-power's incomplete gammas), else Arb's
    if integral is None:
        integral = _integral_u(tree, a, c, prec, abs_tol=(floor * flint.arb(2) ** -(bits + 16)).upper())
    else:
        integral = integral(a, c)
    if integral is None or not integral.is_finite():
        why.append(f"Arb's integral of e^b over [{_fmt(a)}, {_fmt(c)}] was not enclosed within {EVAL_LIMIT} evaluations (in u = log d "
                   "the integrand is double-exponential: a far window of a stretched or growing bias)")
        return None
    est = integral + (ca[0] + cc[0]) / 2
    for j in range(1, order + 1):
        m = 2 * j - 1
        # B_2j/(2j)! f^(2j-1) = B_2j/(2j)! (2j-1)! c_(2j-1)
        est += flint.arb(_b_over_fact(j)) * math.factorial(m) * (cc[m] - ca[m])
    if not R.is_finite():
        return None
    est = est + flint.arb(0, R.upper())
    return est if rest is None else est + flint.arb(0).union(rest)


# -- tight interval bounds of b on a piece (Theorem 15d) --------------------------------------
_SATURATE = flint.arb(2) ** 1100  # exp's argument is clipped here for lower bounds (e^(2^1100) dwarfs every mass)


def _lo(v):
    return v.lower() if v is not None and v.is_finite() else None  # an exact arb (copying it again changes nothing)


def _hi(v):
    return v.upper() if v is not None and v.is_finite() else None


def _interval(n, x0, x1):
    """``(L, U)``: exact ``arb`` points with ``L <= b(x) <= U`` for every real ``x`` in ``[x0, x1]``, ``None`` for an
    end that is not bounded (Theorem 15d, ``proofs/closed_form_tails.md``).

    Monotone functions (``exp``, ``log``, powers of a positive base) are evaluated at the ends of their argument's
    interval, so a piece ``[x, 2^24 x]`` keeps the exact range (Arb's ``exp`` of a wide ball is
    ``e^m (1 +- expm1(r))``, whose lower end is negative once ``r > log 2``); ``exp`` of an argument above
    ``2^1100`` has the lower bound ``e^(2^1100)`` (``exp`` increasing) and no upper one, so ``exp(exp(d))`` at
    ``d = 1e300`` still has a lower bound.

    The tree is compiled once into nested closures (:func:`_interval_program`: no dispatch on tags, ``d``'s ends
    converted to Arb once, the constants' ends formed once per precision), which perform the same Arb operations in
    the same order as the node-by-node recursion they replace, so the bounds are the same bits (a test compares them
    with that recursion as it was)."""
    prog = _PROGRAMS.get(n)
    if prog is None:
        if len(_PROGRAMS) > 1024:
            _PROGRAMS.clear()
        prog = _PROGRAMS[n] = _interval_program(n)
    fn, nodes, by_prec = prog
    prec = flint.ctx.prec
    K = by_prec.get(prec)
    if K is None:
        if len(by_prec) > 64:
            by_prec.clear()
        K = by_prec[prec] = tuple((_lo(v), _hi(v)) for v in (_num(c, flint.arb) for c in nodes))
    return fn(flint.arb(x0), flint.arb(x1), K)


_PROGRAMS = {}  # tree -> (closure, constant nodes, {precision: their (lo, hi)}): _interval's compiled form
_ZERO, _ONE, _MINUS_ONE = flint.arb(0), flint.arb(1), flint.arb(-1)  # exact, immutable


def _interval_program(tree):
    """``(f, nodes, {})``: ``f(X0, X1, K)`` evaluates :func:`_interval`'s rules on ``tree`` with ``X0``, ``X1`` the ends
    of ``d`` as ``arb`` points and ``K[i]`` the ``(lo, hi)`` of the constant ``nodes[i]`` at the current precision."""
    nodes = []

    def const(c):
        i = len(nodes)
        nodes.append(c)
        return lambda X0, X1, K: K[i]

    def linear(n):  # alpha + gamma d, as the tree ("add", (alpha, ("mul", (gamma, ("x",))))) would be evaluated
        return build(("add", (n[1], ("mul", (n[2], ("x",))))))

    def build(n):
        tag = n[0]
        if tag == "x":
            return lambda X0, X1, K: (X0, X1)
        if tag in ("q", "pi", "e"):
            return const(n)
        if tag == "add":
            parts = tuple(build(a) for a in n[1])

            def add(X0, X1, K):
                L = U = _ZERO
                for g in parts:
                    la, ua = g(X0, X1, K)
                    L = None if L is None or la is None else _lo(L + la)
                    U = None if U is None or ua is None else _hi(U + ua)
                return L, U
            return add
        if tag == "mul":
            first, rest = build(n[1][0]), tuple(build(a) for a in n[1][1:])

            def mul(X0, X1, K):
                out = first(X0, X1, K)
                for g in rest:
                    out = _imul(out, g(X0, X1, K))
                return out
            return mul
        if tag == "powi":
            g, k = build(n[1]), n[2]
            return lambda X0, X1, K: _ipow_int(g(X0, X1, K), k)
        if tag in ("powlin", "powc", "pow"):
            base = linear(n) if tag == "powlin" else build(n[1])
            if tag != "pow" and n[-1][0] == "q" and n[-1][2] == 1:
                k = n[-1][1]
                return lambda X0, X1, K: _ipow_int(base(X0, X1, K), k)
            ex = build(n[3] if tag == "powlin" else n[2])
            plain = tag != "pow"

            def power(X0, X1, K):
                b = base(X0, X1, K)
                e = ex(X0, X1, K)
                if plain and b[0] is not None and b[0] >= 0 and e[0] is not None and e[0] == e[1]:
                    p = e[0]
                    if b[0] == 0 and not (p > 0):
                        return None, None
                    if p > 0:
                        return _lo(b[0] ** p), (None if b[1] is None else _hi(b[1] ** p))
                    return (_ZERO if b[1] is None else _lo(b[1] ** p)), _hi(b[0] ** p)
                return _iexp(_imul(e, _ilog(b)))  # base^ex = e^(ex log base) for a positive base
            return power
        if tag == "loglin":
            g = linear(n)
            return lambda X0, X1, K: _ilog(g(X0, X1, K))
        if tag == "log":
            g = build(n[1])
            return lambda X0, X1, K: _ilog(g(X0, X1, K))
        if tag == "exp":
            g = build(n[1])
            return lambda X0, X1, K: _iexp(g(X0, X1, K))
        if tag not in ("sin", "cos"):
            raise Unsupported(str(tag))
        g, name = build(n[1]), tag

        def trig(X0, X1, K):  # sin, cos: Arb on the argument's ball, within [-1, 1]
            L, U = g(X0, X1, K)
            if L is None or U is None:
                return _MINUS_ONE, _ONE
            v = getattr(L.union(U), name)()
            lo, hi = _lo(v), _hi(v)
            return (_MINUS_ONE if lo is None or lo < -1 else lo), (_ONE if hi is None or hi > 1 else hi)
        return trig

    return build(tree), nodes, {}


def _imul(a, b):
    (la, ua), (lb, ub) = a, b
    # an exact zero factor: 0 at every point where the other is a real number (0^0 = 1 in d^d)
    if (la is not None and ua is not None and la == 0 and ua == 0) or (
            lb is not None and ub is not None and lb == 0 and ub == 0):
        return _ZERO, _ZERO
    if la is not None and ua is not None and lb is not None and ub is not None:
        # a point factor (a constant, or d at one integer) makes two of the four products the same bits: formed once
        if la == ua:
            p1, p2 = la * lb, la * ub
            p3, p4 = p1, p2
        elif lb == ub:
            p1, p3 = la * lb, ua * lb
            p2, p4 = p1, p3
        else:
            p1, p2, p3, p4 = la * lb, la * ub, ua * lb, ua * ub
        if not (p1.is_finite() and p2.is_finite() and p3.is_finite() and p4.is_finite()):
            return None, None
        return min(p1.lower(), p2.lower(), p3.lower(), p4.lower()), max(p1.upper(), p2.upper(), p3.upper(), p4.upper())
    for (lc, uc), (lo, hi) in ((a, b), (b, a)):  # a constant (or positive interval) times an unbounded one
        if lc is not None and uc is not None and lc >= 0:
            L = None if lo is None else (_lo(lo * (uc if lo < 0 else lc)))
            U = None if hi is None else (_hi(hi * (uc if hi > 0 else lc)))
            return L, U
        if lc is not None and uc is not None and uc <= 0:
            L = None if hi is None else _lo(hi * (lc if hi > 0 else uc))
            U = None if lo is None else _hi(lo * (lc if lo < 0 else uc))
            return L, U
    return None, None


def _ipow_int(a, k):
    L, U = a
    if k == 0:
        return flint.arb(1), flint.arb(1)
    if k > 0 and k % 2 == 1:
        return (None if L is None else _lo(L**k)), (None if U is None else _hi(U**k))
    if k > 0:
        if L is not None and L >= 0:
            return _lo(L**k), (None if U is None else _hi(U**k))
        if U is not None and U <= 0:
            return _lo(U**k), (None if L is None else _hi(L**k))
        top = None if L is None or U is None else _hi(max(abs(L), abs(U)) ** k)
        return flint.arb(0), top
    if L is not None and L > 0:  # k < 0 on a positive interval: decreasing
        return (flint.arb(0) if U is None else _lo(U**k)), _hi(L**k)
    if U is not None and U < 0 and L is not None:
        return _interval_recip_neg(a, k)
    return None, None


def _interval_recip_neg(a, k):
    """``x^k`` (``k < 0``) on a negative interval ``[L, U]``: ``(-1)^k |x|^k`` with ``|x|`` in ``[-U, -L]``."""
    L, U = a
    mag = (_lo((-L) ** k), _hi((-U) ** k))  # |x|^k decreasing in |x|
    return mag if k % 2 == 0 else (_lo(-mag[1]), _hi(-mag[0]))


def _ilog(a):
    L, U = a
    if L is None or not (L > 0):
        return None, (None if U is None or not (U > 0) else _hi(U.log()))
    return _lo(L.log()), (None if U is None else _hi(U.log()))


_SATURATED = {}  # e^(+-2^1100) per precision: _iexp's clipped ends (1100-bit exponentials, formed once)


def _exp_point(v):
    """``e^v`` for an exact point ``v`` with ``|v| <= 2^1100``, at ``log2|v|`` more bits (Arb answers ``[+/- inf]``
    for ``e^(1e297)`` at 96 bits; with 1100 bits it is a number, ``e^(d/1000)`` at ``d = 1e300``). ``e^(+-2^1100)``,
    the clipped ends of :func:`_iexp`, are kept per precision (the same balls)."""
    man, exp = v.mid().man_exp()
    man, exp = int(man), int(exp)
    bits = man.bit_length() + exp  # about log2 |v|: the bits of e^v's exponent
    key = None
    if exp == 1100 and abs(man) == 1 and v.rad() == 0:  # v = +-2^1100 exactly
        key = (man, flint.ctx.prec)
        got = _SATURATED.get(key)
        if got is not None:
            return got
    if bits > 1200:  # the callers clip |v| at 2^1100; never a precision that grows with v
        raise ArithmeticError("exp argument beyond 2^1200")
    with _more_bits(bits + 8 if bits > 6 else 0):
        out = v.exp()
    if key is not None:
        if len(_SATURATED) > 64:
            _SATURATED.clear()
        _SATURATED[key] = out
    return out


def _iexp(a):
    """``exp`` on ``[L, U]``: arguments beyond ``+-2^1100`` are clipped (``e`` increasing: ``e^L >= 0`` and
    ``e^U <= e^(-2^1100)`` below, ``e^L >= e^(2^1100)`` above), so no precision grows with ``log2|L|`` past 1100 bits
    (``exp(-exp(d))`` at ``d = 2^53`` asked for 1e15 bits)."""
    L, U = a
    if L is None or L < -_SATURATE:
        lo = flint.arb(0)
    else:
        lo = _lo(_exp_point(L if L < _SATURATE else _SATURATE))
    if U is None or U > _SATURATE:
        hi = None
    else:
        hi = _hi(_exp_point(U if U > -_SATURATE else -_SATURATE))
    return (flint.arb(0) if lo is None else lo), hi


def _sides(a, c):
    """Piece ends ``a = e_0 < ... < e_r = c + 1`` whose pieces ``[e_j, e_{j+1} - 1]`` are fine near both ends:
    offsets ``2^j - 1`` from ``a`` and from ``c`` for 12 doublings, then ratios up to ``2^64`` (about 60 pieces to
    ``1e300``; a wider piece costs at most its log-length in the bound)."""
    def offsets(span):
        out, o, steps = [0], 1, 0
        while o < span:
            out.append(o)
            o = 2 * o + 1 if steps < 12 else max(2 * o, min(o * o, o << 64))
            steps += 1
        return out

    half = (c - a) // 2
    left = [a + o for o in offsets(half + 1)]
    right = [c + 1 - o for o in offsets(c + 1 - (a + half + 1))][::-1]
    edges = sorted(set(left + [a + half + 1] + right + [c + 1]))
    return edges


def analytic_on(n, x0, x1):
    """Whether every node of the tree is analytic at every real ``x`` in ``[x0, x1]`` (Theorem 15h's premise): the
    argument of each ``log`` has a positive lower bound, the base of each power with a non-integer exponent too, and
    the base of each negative integer power excludes 0 (:func:`_interval`'s bounds, outward rounded); ``exp``, ``sin``,
    ``cos``, sums and products of analytic nodes are analytic. ``False`` where a bound is not finite."""
    tag = n[0]
    if tag in ("x", "q", "pi", "e"):
        return True
    if tag in ("add", "mul"):
        return all(analytic_on(a, x0, x1) for a in n[1])
    if tag in ("exp", "sin", "cos"):
        return analytic_on(n[1], x0, x1)

    def positive(arg):
        L = _interval(arg, x0, x1)[0]
        return L is not None and L > 0

    def nonzero(arg):
        L, U = _interval(arg, x0, x1)
        return (L is not None and L > 0) or (U is not None and U < 0)

    if tag == "loglin":
        return positive(("add", (n[1], ("mul", (n[2], ("x",))))))
    if tag == "log":
        return analytic_on(n[1], x0, x1) and positive(n[1])
    if tag == "powi":
        return analytic_on(n[1], x0, x1) and (n[2] >= 0 or nonzero(n[1]))
    if tag in ("powlin", "powc"):
        base = ("add", (n[1], ("mul", (n[2], ("x",))))) if tag == "powlin" else n[1]
        ex = n[-1]
        if tag == "powc" and not analytic_on(base, x0, x1):
            return False
        if ex[0] == "q" and ex[2] == 1:  # an integer exponent
            return ex[1] >= 0 or nonzero(base)
        return positive(base)
    if tag == "pow":
        return analytic_on(n[1], x0, x1) and analytic_on(n[2], x0, x1) and positive(n[1])
    return False


def monotone_on(trees, k0, k1, sign):
    """Whether ``b(k)`` is proved monotone over the integers ``k0 <= k <= k1``: non-increasing (``sign = -1``) or
    non-decreasing (``sign = +1``). ``trees``: the compiled trees of ``b`` and of ``b'`` (sympy's derivative). Proof
    (Theorem 15d(v), ``proofs/closed_form_tails.md``): ``b`` analytic on the real interval ``[k0, k1]``
    (:func:`analytic_on`) with the outward-rounded interval bound of ``b'`` (:func:`_interval`) of that sign there; or,
    where ``b`` is not analytic at ``k0`` (``sqrt(d)`` at 0), the same on ``[k0 + 1, k1]`` and the first step
    ``b(k0) -> b(k0 + 1)`` of that sign by point bounds (at 80 bits: a step of 1e-152 beside ``|b| = 3e147`` was not
    resolved and sent ``-0.01 sqrt(d)`` at 1e299 to the Arb route, 3 ms). One interval
    evaluation (about 0.1 ms): a narrow bump anywhere in the range makes ``b'`` take both signs and the answer ``False``,
    where reading ``b'`` at sample points missed it (``-0.05 sqrt(d) + 2000 e^{-((d - 999950000)/10)^2}`` gave
    ``D = 0`` for 1)."""
    from .._balls import arb_precision

    if trees is None:
        return False
    if k1 <= k0:
        return True
    try:
        with arb_precision(80):
            start = k0
            if not analytic_on(trees[0], k0, k1):  # e.g. sqrt(d) at 0: the first step by point bounds, then from k0 + 1
                (l0, u0), (l1, u1) = _interval(trees[0], k0, k0), _interval(trees[0], k0 + 1, k0 + 1)
                if sign < 0:
                    step = u1 is not None and l0 is not None and u1 <= l0
                else:
                    step = u0 is not None and l1 is not None and u0 <= l1
                if not step:
                    return False
                if k1 == k0 + 1:
                    return True
                if not analytic_on(trees[0], k0 + 1, k1):
                    return False
                start = k0 + 1
            L, U = _interval(trees[1], start, k1)
    except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
        return False
    if sign < 0:
        return U is not None and U <= 0
    return L is not None and L >= 0


def point_interval(tree, k):
    """``(L, U)`` of :func:`_interval` at the integer ``k`` (``None`` for an end that is not bounded)."""
    try:
        return _interval(tree, k, k)
    except (ValueError, ZeroDivisionError, ArithmeticError):
        return None, None


def log_sum_bounds(tree, a, c, lower=True, upper=True):
    """``(L, U)``: exact ``arb`` points with ``L <= log sum_{k=a}^{c} e^{b(k)} <= U`` (``None`` where not bounded, or
    not asked for), by Theorem 15d: ``L`` the largest of ``b(a)``, ``b(c)`` (one term), ``U`` the log of the pieces'
    bounds (integers in a piece) x ``e^{sup b}`` from :func:`_interval`, summed in the log domain."""
    L = None
    if lower:
        lows = [point_interval(tree, k)[0] for k in {a, c}]
        lows = [v for v in lows if v is not None]
        L = max(lows, key=lambda v: v.lower()) if lows else None
    if not upper:
        return L, None
    ups = []
    edges = _sides(a, c)
    for x, y in zip(edges[:-1], edges[1:], strict=True):
        try:
            u = _interval(tree, x, y - 1)[1]
        except (ValueError, ZeroDivisionError, ArithmeticError):
            u = None
        if u is None:
            return L, None
        ups.append(_hi(flint.arb(y - x).log() + u))  # exact points: u - top below is then formed without their radii
    if any(u is None for u in ups):
        return L, None
    top = max(ups)
    acc = flint.arb(0)
    for u in ups:
        acc += (u - top).exp()
    return L, _hi(top + acc.log())


# -- the float route -----------------------------------------------------------------------
_GL16 = np.polynomial.legendre.leggauss(16)
_GL8 = np.polynomial.legendre.leggauss(8)
_LOG_WEIGHTS = {id(_GL16): np.log(_GL16[1]), id(_GL8): np.log(_GL8[1])}  # the rules' log weights, formed once


def _logsumexp(v):
    """``log sum e^v`` of a float array (its largest element if that is not finite); ndarray methods and ``math`` on
    the scalars, the same operations as ``np.max``, ``np.sum`` (pairwise) and ``np.log`` without their dispatch."""
    v = v if isinstance(v, np.ndarray) else np.asarray(v, dtype=float)
    top = v.max()
    if not math.isfinite(top):
        return top
    return float(top + np.log(np.exp(v - top).sum()))


def _linspace(start, stop, num):
    """``np.linspace(start, stop, num)`` for doubles ``start < stop`` and ``num >= 2``, bit for bit (``k (stop - start)/(num
    - 1) + start``, the last point ``stop``) without its dispatch (a tenth of its cost on a few points)."""
    step = (stop - start) / (num - 1)
    if step == 0:  # subnormal steps: numpy's own special case
        return np.linspace(start, stop, num)
    y = np.arange(num, dtype=float) * step + start
    y[-1] = stop
    return y


def _parts_few(at):
    """:func:`_pieces`' tests on a few end values ``at`` (a list of floats): ``None`` where an end is NaN or ``+inf``
    (the ends are kept as they are), else ``(last, parts)``: the index of the last end kept and each kept piece's part
    count ``min(128, ceil(|at_{i+1} - at_i|/3))`` (128 for an infinite step), as numpy forms them, or ``parts = None``
    where one is NaN (the kept ends are returned uncut)."""
    if not all(v < math.inf for v in at):
        return None
    top = max(at)
    if math.isfinite(top):
        alive = [i for i, v in enumerate(at) if v > top - 230.0]
    else:
        alive = list(range(len(at)))
    last = max(1, alive[-1] + 1) if alive else len(at) - 1
    at = at[: last + 1]
    parts = []
    for x, y in zip(at[:-1], at[1:], strict=True):
        step = abs(y - x) / 3.0
        if step != step:
            return last, None
        parts.append(128.0 if step == math.inf else min(128.0, float(math.ceil(step))))
    return last, parts


def _pieces(bfun, lu0, lu1):
    """Unit pieces of ``u`` in ``[lu0, lu1]``, without the trailing ones whose ends all lie below
    e^-230 of the largest end value (a tail that has died out: a super-exponential decay such as
    ``-0.02 sqrt(d)`` keeps 20 pieces of 690 to 1e300)."""
    with np.errstate(all="ignore"):
        return _pieces_quiet(bfun, lu0, lu1)


def _pieces_quiet(bfun, lu0, lu1):
    """:func:`_pieces` for a caller that holds ``np.errstate(all="ignore")`` already."""
    pieces = max(1, int(math.ceil(lu1 - lu0)))
    edges = _linspace(lu0, lu1, pieces + 1)
    at = _as_shape(bfun(np.exp(edges)), edges) + edges
    if edges.size <= 32:  # a few ends: the tests below on Python floats (the same doubles and results as numpy's)
        parts = _parts_few(at.tolist())
        if parts is None:
            return edges
        last, parts = parts
        if last + 1 < edges.size:
            edges = edges[: last + 1]
        if parts is None or all(p <= 1 for p in parts):
            return edges
        if sum(parts) > 1024:
            return None
        parts = np.array(parts)
    else:
        if not (at < math.inf).all():  # a NaN or +inf end
            return edges
        top = at.max()
        alive = np.nonzero(at > top - 230.0)[0] if math.isfinite(top) else np.arange(edges.size)
        last = max(1, int(alive[-1]) + 1) if alive.size else edges.size - 1
        if last + 1 < edges.size:
            edges, at = edges[: last + 1], at[: last + 1]
        # a piece across which the exponent moves by more than 3 is cut into equal parts that move by about 3 (at most
        # 128: -0.01 sqrt(d) falls by 100 per unit of u near d = 1e8, where 8 and 16 nodes disagreed and the Arb
        # midpoint answered)
        parts = np.minimum(128, np.ceil(np.abs(at[1:] - at[:-1]) / 3.0))
        if not (parts <= 1).all():
            if not np.isfinite(parts).all():
                return edges
            if parts.sum() > 1024:  # a growing exponent (sqrt(d) to 1e18 moves by 1e9): no affordable cut resolves it
                return None
        else:
            return edges
    # each piece i as np.linspace(e_i, e_{i+1}, k_i + 1)[1:] (k_i = max(1, parts_i)), all at once and bit for bit:
    # j (e_{i+1} - e_i)/k_i + e_i for j = 1..k_i, the last point e_{i+1} itself
    k = np.maximum(parts, 1.0)
    step = (edges[1:] - edges[:-1]) / k
    if not (step != 0).all():  # subnormal steps: numpy's own special case, piece by piece
        out = [edges[:1]] + [np.linspace(edges[i], edges[i + 1], int(ki) + 1)[1:] for i, ki in enumerate(k)]
        return np.concatenate(out)
    ki = k.astype(np.intp)
    ends = np.cumsum(ki)  # one past each piece's last point, counted from 1
    j = np.arange(1, int(ends[-1]) + 1, dtype=float) - np.repeat((ends - ki).astype(float), ki)
    out = np.empty(int(ends[-1]) + 1)
    out[0] = edges[0]
    out[1:] = j * np.repeat(step, ki) + np.repeat(edges[:-1], ki)
    out[ends] = edges[1:]
    return out


def _gl_geometry(edges):
    """The pieces' midpoints, half-lengths and the logs of these (shared by the rules of :func:`_gl_log`)."""
    half = 0.5 * (edges[1:] - edges[:-1])
    with np.errstate(all="ignore"):
        return (0.5 * (edges[:-1] + edges[1:]))[:, None], half[:, None], np.log(half)[:, None]


def _as_shape(v, like):
    """``v`` (a lambdified function's value) as a float array shaped like ``like``: ``np.asarray(v, float) * ones``
    (exact: a product by 1), skipped where ``v`` is already such an array."""
    if isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == like.shape:
        return v
    return np.asarray(v, dtype=float) * np.ones_like(like, dtype=float)


def _gl_log(bfun, edges, rule, geometry=None):
    """``log int e^{b(e^u) + u} du`` over ``edges`` by Gauss–Legendre on each piece (``geometry``: :func:`_gl_geometry`
    of ``edges`` if formed already)."""
    x, w = rule
    logw = _LOG_WEIGHTS.get(id(rule))
    logw = np.log(w) if logw is None else logw
    mid, half, loghalf = _gl_geometry(edges) if geometry is None else geometry
    u = mid + half * x[None, :]
    with np.errstate(all="ignore"):
        val = bfun(np.exp(u)) + u + logw[None, :] + loghalf
    return _logsumexp(np.asarray(val, dtype=float).ravel())


# the 16- and 8-point rules' nodes and log weights (each rule's block laid out piece by piece, the 8-point block after
# the 16-point one): one evaluation of b for both
_GL_PAIR = ((_GL16[0][None, :], _GL8[0][None, :]), (np.log(_GL16[1])[None, :], np.log(_GL8[1])[None, :]))


def _gl_log_pair(bfun, edges):
    """``(_gl_log(bfun, edges, _GL16), _gl_log(bfun, edges, _GL8))`` with one evaluation of ``b`` on the 24 nodes of each
    piece: every element is formed by the same elementwise operations as there (``mid + half x``, ``e^u``, ``b``,
    ``+ u + log w + log half``), and each rule's values are summed as the same contiguous array in the same order (the
    16-point block, then the 8-point one, each row-major over pieces and nodes)."""
    with np.errstate(all="ignore"):
        return _gl_log_pair_quiet(bfun, edges)


def _gl_log_pair_quiet(bfun, edges):
    """:func:`_gl_log_pair` for a caller that holds ``np.errstate(all="ignore")`` already."""
    (x16, x8), (lw16, lw8) = _GL_PAIR
    half = 0.5 * (edges[1:] - edges[:-1])
    mid = (0.5 * (edges[:-1] + edges[1:]))[:, None]
    hcol = half[:, None]
    loghalf = np.log(half)[:, None]
    n16 = 16 * half.size
    u = np.empty(24 * half.size)
    u16, u8 = u[:n16].reshape(-1, 16), u[n16:].reshape(-1, 8)
    np.add(mid, hcol * x16, out=u16)
    np.add(mid, hcol * x8, out=u8)
    val = np.asarray(bfun(np.exp(u)) + u, dtype=float)
    if val.shape != u.shape:  # a constant b (no node of x): the shapes of _gl_log's own sums
        val = val * np.ones_like(u)
    v16, v8 = val[:n16].reshape(-1, 16), val[n16:].reshape(-1, 8)
    v16 += lw16
    v16 += loghalf
    v8 += lw8
    v8 += loghalf
    return _logsumexp(val[:n16]), _logsumexp(val[n16:])


_TAYLOR_PIECES = 4096  # Theorem 15h: at most this many pieces (else the route declines)
TAYLOR_ACCEPT = 2.0**-38  # Theorem 15h: proved truncation + rounding estimate (relative) at most this
_EPS = 2.0**-53


def _iroot(Y, k):
    """``floor(Y^(1/k))`` for an integer ``Y >= 0``: FLINT's exact integer root (``fmpz.root``, 4 us on the 3000-bit
    integers of a third derivative at 1e300, where Newton's iteration in Python integers from ``2^ceil(bits/k)`` took
    60-100 us), checked by ``r^k <= Y < (r + 1)^k``; that iteration where the check fails."""
    if Y < 2:
        return Y
    r = int(flint.fmpz(Y).root(k))
    if r**k <= Y < (r + 1) ** k:
        return r
    x = 1 << -(-Y.bit_length() // k)
    while True:
        y = ((k - 1) * x + Y // x ** (k - 1)) // k
        if y >= x:
            return x
        x = y


def _largest_h(X, e, k):
    """The largest integer ``h >= 0`` with ``X h^k <= 2^e`` for an exact ``arb`` point ``X >= 0`` (``None``: ``X = 0``, no
    limit), in exact integers (``X = 7e-601`` underflows a double)."""
    if X == 0:
        return None
    man, ex = X.man_exp()
    man, ex = int(man), int(ex)
    E = e - ex  # X h^k <= 2^e  <=>  h^k <= 2^E / man
    if E - man.bit_length() >= 1000 * k:
        # 2^E / man >= 2^(1000 k): every h <= 2^1000 (beyond any range, n <= 1e300 < 2^997) qualifies; the exact root
        # of a 2^(9e6)-bit integer (X = 2^-9e6, a third derivative far from a narrow bump) took minutes in CPython
        return 1 << 1000
    return 0 if E < 0 else _iroot((1 << E) // man, k)


def _tilted_q(beta, w, t0):
    """``E[t^2] / w^2`` for ``t`` in ``{t0, ..., t0 + w - 1}`` with weights ``e^{beta t}`` (arrays; Theorem 15h).

    With ``x = beta w``: ``Var = 1/(4 sinh^2(beta/2)) - w^2/(4 sinh^2(x/2))`` and ``E[t - t0] = w/(1 - e^{-x}) - 1/(1 - e^{-beta})``
    (the first two derivatives of the log of the geometric sum); for ``|x| <= 0.1`` their Laurent series
    ``1/(4 sinh^2(y/2)) = 1/y^2 - 1/12 + y^2/240 - y^4/6048 + ...`` and ``1/(1 - e^{-y}) = 1/y + 1/2 + y/12 - y^3/720 + ...``
    (alternating, terms falling by ``(y/2 pi)^2``) give ``Var/w^2 = (1 - u^2)/12 - x^2 (1 - u^4)/240 + x^4 (1 - u^6)/6048``
    and ``E[t]/w = (t0 + (w - 1)/2)/w + x (1 - u^2)/12 - x^3 (1 - u^4)/720`` (``u = 1/w``) within ``2^-30`` relative."""
    x = beta * w
    u = 1.0 / w
    small = np.abs(x) <= 0.1
    # each element takes the series or the closed form by its own |x|; a branch that no element takes is not formed
    every, some = bool(small.all()), bool(small.any())
    with np.errstate(all="ignore"):
        if some:
            x2 = x * x
            var = (1 - u * u) / 12 - x2 * (1 - u**4) / 240 + x2 * x2 * (1 - u**6) / 6048
            mean = (t0 + 0.5 * (w - 1)) * u + x * (1 - u * u) / 12 - x * x2 * (1 - u**4) / 720
        if not every:
            var_c = (0.5 / (w * np.sinh(0.5 * beta))) ** 2 - (0.5 / np.sinh(0.5 * x)) ** 2
            mean_c = t0 * u + 1.0 / (-np.expm1(-x)) - u / (-np.expm1(-beta))
            var, mean = (np.where(small, var, var_c), np.where(small, mean, mean_c)) if some else (var_c, mean_c)
    return np.maximum(var, 0.0) + mean * mean


def _pieces_at(a, N, w):
    """The pieces of ``[a, a + N - 1]``: ``P - 1`` of ``w`` integers and a last one of ``1..w``, as arrays ``(fm, delta, t0,
    cnt)`` (``fm = float(m)``, ``delta = m - fm`` for the middle integer ``m``; ``t0 = a_i - m``; ``cnt`` integers), and ``Hp``,
    the largest ``|t|``."""
    P = -(-N // w)
    last = N - (P - 1) * w
    hw, hl = (w - 1) // 2, (last - 1) // 2
    if N < 1 << 53:  # offsets exact in double; the rounding of float(a) + offset recovered by TwoSum
        a_hi = float(a)
        a_lo = float(a - int(a_hi))
        offs = np.arange(P, dtype=float) * float(w) + float(hw)
        offs[-1] = float((P - 1) * w + hl)
        fm = a_hi + offs
        bb = fm - a_hi
        delta = a_lo + ((a_hi - (fm - bb)) + (offs - bb))
    else:
        mids = [a + hw + i * w for i in range(P - 1)] + [a + (P - 1) * w + hl]
        fm = np.array([float(m) for m in mids])
        delta = np.array([float(m - int(f)) for m, f in zip(mids, fm.tolist(), strict=True)])
    t0 = np.full(P, -float(hw))
    cnt = np.full(P, float(w))
    t0[-1], cnt[-1] = -float(hl), float(last)
    return fm, delta, t0, cnt, max(hw, w - 1 - hw, hl, last - 1 - hl)


def taylor_pieces_log(fns, trees, a, c):
    """``(log S, rel)`` for ``S = sum_{k=a}^{c} e^{b(k)}`` by Theorem 15h (``proofs/closed_form_tails.md``), or ``None``.

    ``trees``: the compiled trees of ``b`` and of its third derivative ``b3 = b'''`` (sympy's); ``b`` must be
    analytic on ``[a, c]`` (:func:`analytic_on`). One interval bound ``|b3| <= M3`` on the whole
    real range ``[a, c]`` (:func:`_interval`, Arb with outward rounding: a feature of ``b`` anywhere in the range,
    however narrow, makes it large) gives the largest half-width ``H`` with ``M3 H^3/6 <= 2^-41``; the range is cut
    into pieces of ``2H + 1`` integers (at most 4096, else ``None``). On a piece with middle integer ``m``,
    ``b(m + t) = b(m) + beta t + gamma t^2 + sigma_t`` with ``gamma = b''(m)/2`` and ``|sigma_t| <= M3 |t|^3/6`` (Taylor),
    so its sum is ``e^{b(m)} G(beta) E[e^{gamma t^2 + sigma}]`` with the geometric sum
    ``G = e^{max(beta t0, beta t1)} expm1(-|beta| w)/expm1(-|beta|)`` and, under the weights ``e^{beta t}/G``,
    ``E[e^{gamma t^2}]`` in ``[1 + gamma q, 1 + gamma q + (gamma H^2)^2 e^{|gamma| H^2}/2]`` (``q = E[t^2]`` in closed form,
    :func:`_tilted_q`) and ``e^sigma`` within ``e^{+-M3 H^3/6}``: ``1 + gamma q`` is used. ``gamma`` is the difference
    quotient of ``b'`` over ``[m - H/16, m + H/16]`` (half the mean of ``b''`` there: within ``M3 (H/16 + ...)/2`` of it,
    and formed as ``gamma H^2``, which does not underflow where ``b''`` does), and ``|gamma| H^2 <= 2^-20`` is asked
    (else the pieces are narrowed once): a proved relative error of about ``2^-40`` at most. ``rel`` adds an estimate of
    the rounding (``b``, ``b'`` read in double at ``float(m)``, the offset ``m - float(m)`` applied through ``b'``), and
    the route answers only when the total is at most ``2^-38``."""
    from .._balls import arb_precision

    if trees is None or c < a:
        return None
    N = c - a + 1
    try:
        with arb_precision(80):
            if not analytic_on(trees[0], a, c):
                return None
            L3, U3 = _interval(trees[1], a, c)
            if L3 is None or U3 is None:
                return None
            M3 = flint.arb(abs(L3).upper()).max(flint.arb(abs(U3).upper()))
            H = _largest_h(flint.arb((M3 / 6).upper()), -41, 3)
            M3u = flint.arb(M3.upper())
    except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
        return None
    return _taylor_sum_log(fns[0], fns[1], a, N, H, M3u)


def _on_pieces(v, P):
    """``v`` as a float array of ``P`` values (a constant function returns a scalar; multiplying an array of ``P`` by
    ones, the old form, changes no value, so it is skipped)."""
    v = np.asarray(v, dtype=float)
    return v if v.shape == (P,) else v * np.ones(P)


def _tilted_q_one(beta, w, t0):
    """:func:`_tilted_q` for one piece, on Python floats: the same operations in the same order (the arithmetic is
    IEEE's either way; ``sinh``, ``expm1`` and the powers by numpy's own functions on the scalars), so the same double."""
    x = beta * w
    u = 1.0 / w
    if abs(x) <= 0.1:
        x2 = x * x
        u4 = float(np.power(u, 4))
        var = (1 - u * u) / 12 - x2 * (1 - u4) / 240 + x2 * x2 * (1 - float(np.power(u, 6))) / 6048
        mean = (t0 + 0.5 * (w - 1)) * u + x * (1 - u * u) / 12 - x * x2 * (1 - u4) / 720
    else:
        with np.errstate(all="ignore"):
            va = 0.5 / (w * float(np.sinh(0.5 * beta)))
            vb = 0.5 / float(np.sinh(0.5 * x))
            var = va * va - vb * vb
            mean = t0 * u + 1.0 / -float(np.expm1(-x)) - u / -float(np.expm1(-beta))
    return float(np.maximum(var, 0.0)) + mean * mean


def _one_piece(bf, beta, gH, fm, delta, t0, cnt, xp, xm, dx, Hp, Hf):
    """:func:`_taylor_sum_log`'s sum of a single piece on Python floats (a range whose bound of the third derivative
    allows one piece: ``n - 1e5`` at ``n >= 1e9``, where the arrays' dispatch cost 0.1 ms):
    ``(top, total, dmax, reach, bmax, rmax, quot)`` as the array form gives them, bit for bit (the same IEEE operations
    in the same order; ``expm1``, ``log``, ``log1p``, ``exp`` and the powers by numpy's functions on the scalars), or
    ``None`` where that form declines."""
    bf, beta, gH, fm, delta, t0, cnt, xp, xm, dx = (float(v[0]) for v in (bf, beta, gH, fm, delta, t0, cnt, xp, xm, dx))
    bm = bf + beta * delta
    t1 = t0 + cnt - 1
    r = abs(beta)
    rc = r * cnt
    tiny = rc < 2.0**-60
    if tiny:
        ratio = cnt
    else:
        with np.errstate(all="ignore"):
            ratio = float(np.expm1(-rc)) / float(np.expm1(-r))
    if not (tiny or r > 2.0**-1000) or not (math.isfinite(ratio) and ratio > 0):
        return None
    if Hp:
        s = cnt / Hf
        gq = gH * _tilted_q_one(beta, cnt, t0) * (s * s)
        if not math.isfinite(gq):
            return None
        with np.errstate(all="ignore"):
            corr = float(np.log1p(gq))
    else:
        corr = 0.0
    with np.errstate(all="ignore"):
        top = bm + max(beta * t0, beta * t1) + float(np.log(ratio)) + corr
    if not math.isfinite(top):
        return None
    total = float(np.exp(top - top))
    dmax = abs(delta)
    reach = max(xp - fm, fm - xm) * (1 + 2.0**-50) + dmax
    quot = Hf * (Hf / dx) if Hp else 0.0
    return top, total, dmax, reach, abs(bm), r, quot


def _taylor_sum_log(b0, b1, a, N, H, M3u, g_max=2.0**-20):
    """Theorem 15h's ``(log S, rel)`` for ``S = sum_{a <= k < a + N} e^{b(k)}`` once ``|b'''| <= M3u`` is proved on the
    real range (``H``: the largest half-width with ``M3u H^3/6 <= 2^-41``, ``None`` where ``M3u = 0``), or ``None``;
    ``b0``, ``b1``: ``b`` and ``b'`` as numpy functions; ``g_max``: the largest ``|gamma| H^2`` admitted (``2^-20``;
    Theorem 15j asks ``2^-24`` first, whose second-order term ``g^2/2`` is below ``2^-49``). Shared by :func:`taylor_pieces_log`
    and :func:`anchored_log_sum` (Theorem 15j)."""
    from .._balls import arb_precision

    w = N if H is None else min(N, 2 * H + 1)  # b''' = 0 on the range: one piece (b is a quadratic there)
    for attempt in range(2):
        if -(-N // w) > _TAYLOR_PIECES:
            return None
        fm, delta, t0, cnt, Hp = _pieces_at(a, N, w)
        Hf = float(Hp)
        # s = Hp/16, at least 64 ulps of the middles (fm +- Hp/16 rounds to fm itself at 1e18: the quotient was 0/0)
        sf = max(Hf / 16, 64 * math.ulp(float(np.abs(fm).max())))
        with np.errstate(all="ignore"):
            bf = _on_pieces(b0(fm), fm.size)
            beta = _on_pieces(b1(fm), fm.size)
            # gamma = b''(m)/2 as the difference quotient of b' over [x-, x+] (x+- = fl(fm +- s)): half the mean of b''
            # there, within M3 reach/2 of b''(m)/2, reach = max |x+- - m| (b'' in double underflows far out: 0.6/d^2 at
            # 1e300), kept as gH = gamma Hp^2 = (b'(x+) - b'(x-)) Hp^2 / (2 (x+ - x-)) (gamma itself, 6e-601 there, underflows)
            xp, xm = fm + sf, fm - sf
            dx = xp - xm  # exact (Sterbenz)
            gH = (np.asarray(b1(xp), dtype=float) - np.asarray(b1(xm), dtype=float)) * (0.5 * Hf * (Hf / dx)) if Hp else 0.0 * fm
            gH = _on_pieces(gH, fm.size)
        if not (np.isfinite(bf).all() and np.isfinite(beta).all() and np.isfinite(gH).all() and (dx > 0).all()):
            return None
        gHmax = float(np.abs(gH).max())
        if gHmax <= g_max:
            break
        if attempt:
            return None
        w = min(w, 2 * int(Hf * math.sqrt(0.5 * g_max / gHmax)) + 1)  # |gamma| H^2 <= g_max/2 (g_max asked at the new middles)
    P = fm.size
    got = _one_piece(bf, beta, gH, fm, delta, t0, cnt, xp, xm, dx, Hp, Hf) if P == 1 else None
    if P == 1:
        if got is None:
            return None
        top, total, dmax, reach, bmax, rmax, quot = got
    else:
        bm = bf + beta * delta  # b(m) = b(fm) + b'(fm) delta + b''(xi) delta^2/2 (the last in the estimate)
        t1 = t0 + cnt - 1
        r = np.abs(beta)
        with np.errstate(all="ignore"):
            rc = r * cnt
            tiny = rc < 2.0**-60  # the ratio is cnt within a relative 2^-60
            ratio = np.where(tiny, cnt, np.expm1(-rc) / np.expm1(-r))
        if not (tiny | (r > 2.0**-1000)).all() or not (np.isfinite(ratio) & (ratio > 0)).all():
            return None
        if Hp:
            with np.errstate(all="ignore"):
                gq = gH * _tilted_q(beta, cnt, t0) * (cnt / Hf) ** 2  # gamma q_i (|.| <= |gamma| Hp^2 <= 2^-20)
            if not np.isfinite(gq).all():
                return None
            corr = np.log1p(gq)
        else:
            corr = np.zeros(P)
        logs = bm + np.maximum(beta * t0, beta * t1) + np.log(ratio) + corr
        top = float(logs.max())
        if not math.isfinite(top):
            return None
        total = float(np.sum(np.exp(logs - top)))
        dmax = float(np.abs(delta).max())
        reach = max(float((xp - fm).max()), float((fm - xm).max())) * (1 + 2.0**-50) + dmax
        bmax, rmax = float(np.abs(bm).max()), float(r.max())
        quot = Hf * (Hf / float(dx.min())) if Hp else 0.0
    # proved: e^{M3 Hp^3/6} - 1 (<= 2^-41 (1 + 2^-40)), the second order (gamma Hp^2)^2 e^{|gamma| Hp^2}/2, q's series
    # or formula (2^-30 of gamma q), gamma's difference quotient (M3 reach/2 times q <= Hp^2)
    with arb_precision(80):
        S3 = float((M3u * Hp * Hp * Hp / 6).upper())
        Sq = float((M3u * flint.arb(reach) * Hp * Hp / 2).upper()) if Hp else 0.0
    G2 = (gHmax + Sq) * (1 + 2.0**-50)
    # declined before the exponentials can overflow: expm1(x) >= x and G2 2^-30 > 2^-38 for G2 > 2^-8, so past these the
    # truncation alone exceeds TAYLOR_ACCEPT (1e-20 sin(d) at 1e300: M3 reach Hp^2/2 ~ 1e266, an unnamed OverflowError)
    if not (S3 + Sq <= TAYLOR_ACCEPT and G2 <= 2.0**-8):
        return None
    trunc = (math.expm1(S3 + Sq) + 0.5 * G2 * G2 * math.exp(G2) + G2 * 2.0**-30) * (1 + 2.0**-18)
    # rounding (an estimate): b(fm) in double (4 (|b| + 1) eps, as for the head), the offset through b'
    # (M2 delta^2/2 with M2 <= 2 |gamma| + M3 Hp), beta and the counts in double (9 |beta| eps over |t| <= Hp), gamma's
    # quotient from b' in double (8 |beta'| eps + 2^-1073 over x+ - x-, times Hp^2/2), the ratio, the log and the
    # correction (16 eps), the sum of P terms (log2 P eps)
    M3f = float(M3u)
    est = ((4 * (bmax + 1) + 9 * rmax * max(Hf, 1) + 4 * G2 + 16 + math.log2(P)) * _EPS
           + (8 * (rmax + M3f * reach * reach) * _EPS + 2.0**-1073) * quot
           + (gHmax / max(Hf, 1) / max(Hf, 1) + M3f * Hf) * dmax * dmax)
    out = top + math.log(total)
    # the sum is returned as its logarithm: rounding that double (and top + log) moves S by 2 (|log S| + 1) eps
    # (1e9 terms of -1.1 log(1 + d) + 0.001 log(1 + d)^3 at 1e15: |b| = 3 but log S = 24, 2 ulps of it over 4 |b| eps)
    rel = trunc + est + 2 * (abs(out) + 1) * _EPS
    if not rel <= TAYLOR_ACCEPT:
        return None
    return out, rel


_ANCHOR_DEGREE = 19  # Theorem 15j: the Taylor polynomial about the range's top has degree at most this
_ANCHOR_MARGIN = 32.0  # Theorem 15j: the kept range reaches where b has fallen by log(c - a + 1) + 32 below b(c)
ANCHOR_ERR = 2.0**-44  # Theorem 15j: the polynomial's proved distance from b(c - t) - b(c) on the kept range
_ANCHOR_ERR_HALF = 2.0**-45  # Theorem 15j: of which Lagrange's remainder (Cauchy's estimate on a complex box)
ANCHOR_HEAD = 2.0**-42  # Theorem 15j: the dropped head's proved bound, relative to the kept sum


def _b_series(tree, x, length):
    """The Taylor coefficients ``b^(j)(xi)/j!``, ``j < length``, of the bias itself (not of ``e^b``), enclosed for every
    ``xi`` in the ball ``x`` (Arb power series; call under :func:`otprior._balls.arb_precision`)."""
    old = flint.ctx.cap
    flint.ctx.cap = max(old, length)
    try:
        cs = _eval(tree, flint.arb_series([x, 1], prec=length), flint.arb, True).coeffs()
    finally:
        flint.ctx.cap = old
    return list(cs) + [flint.arb(0)] * (length - len(cs))


def _cauchy_box_bound(tree, K, c, r, bc):
    """An upper bound (``arb``) of ``|b(z) - b(c)|`` on the box ``[K - r, c + r] x i[-r, r]`` (one complex Arb evaluation
    with analytic branches, :func:`_eval_u`: not finite where ``b`` is not analytic there), or ``None``."""
    box = flint.acb(flint.arb(K - r).union(flint.arb(c + r)), flint.arb(-r).union(flint.arb(r)))
    v = _eval_u(tree, box.log(analytic=True), box, True)
    if not v.is_finite():
        return None
    out = abs(v - bc)
    return flint.arb(out.upper()) if out.is_finite() else None


def anchor_polynomial(tree, c, keep, bits):
    """``(q, eps_P)``: the doubles ``q[1..J]`` of ``P(t) = sum_j q[j] t^j`` with ``|b(c - t) - b(c) - P(t)| <= eps_P`` for
    every integer ``0 <= t < keep`` (Theorem 15j (i), ``proofs/closed_form_tails.md``: Lagrange's remainder by Cauchy's
    estimate on the box ``[K - r, c + r] x i[-r, r]``, plus the coefficients' rounding), or ``None`` where no degree
    ``J <= 19`` brings ``eps_P`` below ``2^-44``. ``q[0] = 0``. Call under :func:`otprior._balls.arb_precision` (``bits``)."""
    K, T1 = c - keep + 1, keep - 1
    t1 = flint.arb(T1)
    bc = _eval(tree, flint.arb(c), flint.arb)
    if not bc.is_finite():
        return None
    radii = sorted({r for r in ((9 * K) // 10, 64 * T1, 8 * T1) if r > 2 * T1}, reverse=True)
    J = remainder = None
    for r in radii:
        M = _cauchy_box_bound(tree, K, c, r, bc)  # |b^(j)(xi)/j!| <= M/r^j for xi in [K, c], j >= 1 (Cauchy)
        if M is None:
            continue
        ratio = t1 / r
        for j in range(1, _ANCHOR_DEGREE + 1):
            bound = M * ratio ** (j + 1)  # Lagrange's remainder of the degree-j polynomial, at t = T1
            if bound.upper() <= _ANCHOR_ERR_HALF:
                J, remainder = j, bound
                break
        if J is not None:
            break
    if J is None:
        return None
    with _less_bits(bits - 96):  # the coefficients need only their doubles
        at_c = _b_series(tree, flint.arb(c), J + 1)
    if not all(v.is_finite() for v in at_c):
        return None
    q = [0.0] + [float(v.mid()) * (-1) ** j for j, v in enumerate(at_c) if j >= 1]
    err = remainder
    for j in range(1, J + 1):  # the coefficients' rounding: |(-1)^j c_j - q_j| t^j, largest at t = T1
        err += abs(at_c[j] - flint.arb(q[j]) * (-1) ** j) * t1**j
    err = float(err.upper())
    return (q, err) if err <= ANCHOR_ERR else None


def _polynomial_kept_log(tree, c, keep, bits):
    """``(phi, rel)`` for ``log sum_{t=0}^{keep-1} e^{b(c - t) - b(c)}`` from :func:`anchor_polynomial` and Theorem 15h
    on the polynomial (Theorem 15j (ii)), or ``None``. Call under :func:`otprior._balls.arb_precision` (``bits``)."""
    got = anchor_polynomial(tree, c, keep, bits)
    if got is None:
        return None
    q, err = got
    t1 = flint.arb(keep - 1)
    J = max([j for j, v in enumerate(q) if v != 0.0] + [1])
    qa = [flint.arb(v) for v in q[: J + 1]]  # exact doubles: |P'''| on [0, T1] from them, exactly
    M3 = sum((abs(qa[j]) * (j * (j - 1) * (j - 2)) * t1 ** (j - 3) for j in range(3, J + 1)), flint.arb(0))
    M3u = flint.arb(M3.upper())
    H = _largest_h(flint.arb((M3u / 6).upper()), -41, 3)
    # |gamma| H^2 <= 2^-24 where at most 4096 pieces allow it (the second-order term g^2/2 below 2^-49), else Theorem
    # 15h's own 2^-20: |P''/2| <= G2 on [0, T1] from the coefficients, so the pieces need not be narrowed again
    G2 = sum((abs(qa[j]) * (j * (j - 1) // 2) * t1 ** (j - 2) for j in range(2, J + 1)), flint.arb(0))
    for g_exp in (-24, -20):
        Hg = _largest_h(flint.arb(G2.upper()), g_exp, 2)
        Hj = H if Hg is None else (Hg if H is None else min(H, Hg))
        if Hj is None or -(-keep // (2 * Hj + 1)) <= _TAYLOR_PIECES:
            break
    horner = float(sum((abs(v) * t1**j for j, v in enumerate(qa)), flint.arb(0)).upper()) * 2 * J * _EPS
    coef = np.array(q[: J + 1])
    dcoef = coef[1:] * np.arange(1, J + 1)

    def P(t):
        return np.polynomial.polynomial.polyval(t, coef)

    def dP(t):
        return np.polynomial.polynomial.polyval(t, dcoef)

    kept = _taylor_sum_log(P, dP, 0, keep, Hj, M3u)
    if kept is None:
        return None
    return kept[0], kept[1] + math.expm1(err) * (1 + 2.0**-40) + horner


_ANCHOR_LINEAR = 2.0**-62  # Theorem 15j(v): the certified form needs |b(c - t) - b(c) + b'(c) t| below this on the kept range


def anchored_sum_arb(tree, a, c, bits):
    """An Arb ball containing ``sum_{k=a}^{c} e^{b(k) - b(c)}`` by Theorem 15j(v) (``proofs/closed_form_tails.md``), or
    ``None``: where ``b`` is linear to within ``2^-62`` over the kept range (Cauchy's estimate
    ``|b''(xi)|/2 <= M/r^2`` on the box of :func:`_cauchy_box_bound`, so ``|b(c - t) - b(c) + b'(c) t| <= M (t/r)^2``),
    the kept sum lies in ``e^{[-eps, eps]}`` times the geometric sum ``expm1(-beta (T1 + 1))/expm1(-beta)`` with the ball
    ``beta = b'(c)`` from Arb's series at the exact integer ``c``, and the dropped head adds ``[0, (K - a) e^{sup b - b(c)}]``
    (Theorem 15d). Made for ``n = 1e300`` next to ``n`` (``sqrt(d)``: Theorem 15's Euler-Maclaurin took 20 ms there).
    Call under :func:`otprior._balls.arb_precision` (``bits``)."""
    if c < a:
        return None
    if c == a:
        return flint.arb(1)
    N = c - a + 1
    beta = _b_series(tree, flint.arb(c), 2)[1]
    if not beta.is_finite() or not beta > 0:
        return None
    keep = min(N, int((math.log(N) + 48.0) / float(beta.mid())) + 1)
    K, T1 = c - keep + 1, keep - 1
    bc = _eval(tree, flint.arb(c), flint.arb)
    if not bc.is_finite() or T1 == 0:
        return None
    r = (9 * K) // 10
    if not r > 2 * T1:
        return None
    M = _cauchy_box_bound(tree, K, c, r, bc)
    if M is None:
        return None
    eps = M * (flint.arb(T1) / r) ** 2
    if not eps.upper() <= _ANCHOR_LINEAR:
        return None
    eps = flint.arb(eps.upper())
    kept = (-beta * (T1 + 1)).expm1() / (-beta).expm1() * (-eps).exp().union(eps.exp())
    if K <= a:
        return kept if kept.is_finite() else None
    U = _interval(tree, a, K - 1)[1]
    Lc = point_interval(tree, c)[0]
    if U is None or Lc is None:
        return None
    head = (flint.arb(K - a).log() + U - Lc).exp()
    out = kept + flint.arb(0).union(flint.arb(head.upper()))
    return out if out.is_finite() else None


_DIRECT_ALWAYS = 1 << 12  # Theorem 15j(vi): a kept range of at most this many integers is summed term by term
_DIRECT_KEEP = 1 << 17  # Theorem 15j(vi): at most this many where Theorem 15h's pieces would be narrow
_DIRECT_WIDTH = 64  # Theorem 15j(vi): narrow: fewer integers than this per piece (a piece costs about 60 terms)
_DIRECT_B = 2048.0  # Theorem 15j(vi): |b| at most this at the kept range's ends (4 |b| eps within 2^-40)


def _direct_first(fns, K, c):
    """Whether the kept range ``[K, c]`` (``c < 2^53``) is summed term by term (Theorem 15j(vi)) before the polynomial
    and Theorem 15h are tried: ``|b|`` at most ``2^11`` at both ends (so that ``b`` read in double stays within ``2^-40``),
    and at most ``2^12`` integers, or at most ``2^17`` where Theorem 15h's pieces would hold fewer than 64 integers, their
    half-width ``H`` read from ``|b'''|`` at the two ends in double (``M3 H^3/6 = 2^-41``). A cheap test of cost, no
    proof: each route proves or estimates its own error, and the others follow where this one declines. ``sqrt(d)`` on
    ``[72480, 99999]``: Theorem 15h's pieces of 5 integers (5504, above its 4096: the side was halved four times) against
    27520 terms at about 4 ns each."""
    keep = c - K + 1
    if keep > _DIRECT_KEEP or len(fns) < 4:
        return False
    ends = np.array([float(K), float(c)])
    with np.errstate(all="ignore"):
        try:
            b_ends = np.abs(np.asarray(fns[0](ends), dtype=float))
            m3 = np.abs(np.asarray(fns[3](ends), dtype=float)) if keep > _DIRECT_ALWAYS else None
        except (ValueError, TypeError, OverflowError, ZeroDivisionError):
            return False
    if not float(np.max(b_ends)) <= _DIRECT_B:
        return False
    if m3 is None:
        return True
    m3 = float(np.max(m3))
    return math.isfinite(m3) and m3 > 0 and 2 * (6 * 2.0**-41 / m3) ** (1 / 3) + 1 < _DIRECT_WIDTH


def _kept_log(tree, c, keep, bits, fns, third, b_err):
    """Theorem 15j's kept sum ``(phi, rel)``, ``phi = log sum_{t=0}^{keep-1} e^{b(c - t) - b(c)}``, or ``None``: term by
    term first where :func:`_direct_first` says it is the cheaper (Theorem 15j(vi)), then the polynomial about ``c`` with
    Theorem 15h on it (:func:`_polynomial_kept_log`, (ii)), then, for ``c < 2^53``, Theorem 15h on ``b`` itself less
    ``b(c)`` in double. Where ``b`` is read in double, Theorem 15g(vii)'s running error of ``b`` on the kept range
    (``b_err``, which sees a cancellation inside ``b``: ``5*exp(-((d - 999995)/5)**2)`` is evaluated as ``d/5 - 199999``,
    1e-10 where ``|b| eps`` is 1e-15) counts twice, for ``b(k)`` and ``b(c)``; it is formed only once a sum is at hand.
    Without ``fns`` and ``b_err`` only the polynomial answers."""
    from .._balls import arb_precision

    K = c - keep + 1
    doubles = fns is not None and b_err is not None and c < 1 << 53
    heavy = []  # around the heaviest terms, where the term-by-term pass ran: b's running error is read there by both routes
    if doubles and _direct_first(fns, K, c):
        got = _direct_kept_log(fns[0], K, c, _b_top(fns[0], c), heavy)
        if got is not None and got[1] <= TAYLOR_ACCEPT:
            err_b = b_err(K, c, heavy)  # at the heaviest terms too (Theorem 15j(vi): a narrow bump between the samples)
            if math.isfinite(err_b) and got[1] + 2 * err_b <= TAYLOR_ACCEPT:
                return got[0], got[1] + 2 * err_b
    with arb_precision(bits):
        kept = _polynomial_kept_log(tree, c, keep, bits)
    if kept is not None or not doubles or third is None:
        return kept
    got = taylor_pieces_log(fns, third, K, c)
    if got is None:
        return None
    with np.errstate(all="ignore"):
        bc = float(np.asarray(fns[0](np.array([float(c)])), dtype=float).ravel()[0])
    err_b = b_err(K, c, heavy)
    if not (math.isfinite(bc) and math.isfinite(err_b)):
        return None
    return got[0] - bc, got[1] + (abs(got[0]) + abs(bc) + 1) * 2 * _EPS + 2 * err_b


# Theorem 15j(vi): offsets from each pass's heaviest term at which b's running error is read as well (a bump of any
# width w has one within [w/2, w] of its peak on each side, where its rounding inside b is largest)
_HEAVY_OFFSETS = (0,) + tuple(s * (1 << k) for k in range(13) for s in (-1, 1))
_HEAVY_OFFSETS_ARRAY = np.array(_HEAVY_OFFSETS, dtype=np.int64)
_HEAVY_OFFSETS_ARRAY.flags.writeable = False
_DIRECT_CHUNK = 1 << 13  # Theorem 15j(vi): terms per numpy pass (64 kB arrays: a range of 1e5 at once paid page faults)
_CHUNK_OFFSETS = np.arange(float(_DIRECT_CHUNK))
_CHUNK_OFFSETS.flags.writeable = False


def _b_top(b0, c):
    """``b(c)`` as a double-double ``(hi, lo)`` from the same numpy function evaluated in long double (the constants
    stay the doubles the float routes read: an Arb value of the decimals as written differs from them, ``0.5 d^0.6`` by
    ``6e-13`` at ``c = 1e6``), or ``None`` (then the double reading is used). Where long double is double, ``lo = 0``."""
    with np.errstate(all="ignore"):
        try:
            v = np.asarray(b0(np.array([c], dtype=np.longdouble))).ravel()
        except (ValueError, TypeError, OverflowError, ZeroDivisionError):
            return None
    if v.size != 1 or v.dtype != np.longdouble or not np.isfinite(v[0]):
        return None
    hi = float(v[0])
    return hi, float(v[0] - np.longdouble(hi))


def _direct_kept_log(b0, K, c, bc=None, heavy=None):
    """``(phi, rel)`` with ``phi = log sum_{k=K}^{c} e^{b(k) - b(c)}`` term by term in double (Theorem 15j(vi),
    ``proofs/closed_form_tails.md``; ``c < 2^53``, so every ``k`` is exact), or ``None`` where a value is not finite.

    Passes of ``2^13`` terms from the top down (a log-sum-exp carried from pass to pass, rescaled where a pass holds a
    larger term). ``bc``: ``b(c)`` as a double-double ``(hi, lo)`` (:func:`_b_top`: then the rounding of ``b(c)``,
    common to every term, leaves the sum; ``sqrt(c)`` at ``c = 1e6`` moved it by ``4e-14``), else the last term's
    reading in the first pass. ``rel`` estimates the arithmetic's rounding
    (the differences ``b(k) - b(c)`` and their shift by the largest, ``4 (max|b| + 1) u``; ``exp``, ``2u``; numpy's
    pairwise sum within a pass, ``(log2 2^13 + 24) u``, and the passes' running sum and rescalings, ``4u`` per pass;
    the log and the final sum, ``2 (|phi| + 1) u``); the caller adds twice the running error of ``b`` (Theorem
    15g(vii)), for ``b(k)`` and ``b(c)``. ``heavy``: a list that receives the integers (as doubles) of each pass's
    heaviest term and of its neighbours at distances 1, 2, 4, ..., 4096, where the caller reads that running error as
    well (a bump's terms hold the sum, and its cancellation inside ``b`` between the running error's 33 sample points
    was missed; one neighbour lies within [w/2, w] of the peak of a bump of width w, where that rounding is largest)."""
    N = c - K + 1
    top, total, vmax, passes = -math.inf, 0.0, 0.0, 0
    peaks = []  # each pass's (first integer, length, index of its heaviest term): heavy's entries formed once at the end
    try:
        with np.errstate(all="ignore"):
            hi_end = c + 1
            while hi_end > K:
                lo_end = max(K, hi_end - _DIRECT_CHUNK)
                ks = _CHUNK_OFFSETS[: hi_end - lo_end] + float(lo_end)  # exact: integers below 2^53
                v = np.asarray(b0(ks), dtype=float)
                if v.shape != ks.shape:
                    v = v * np.ones(ks.size)
                if bc is None:
                    bc = (float(v[-1]), 0.0)
                x = np.subtract(v, bc[0], out=ks)
                if bc[1]:
                    x -= bc[1]
                # the largest as the element argmax points at (the same double as x.max(); a nan is both), the smallest:
                # not finite where any b(k) is not
                i = int(x.argmax())
                lo, m = float(x.min()), float(x[i])
                if not (math.isfinite(lo) and math.isfinite(m)):
                    return None
                peaks.append((lo_end, x.size, i))
                vmax = max(vmax, abs(lo) + abs(bc[0]) + 1, abs(m) + abs(bc[0]) + 1)  # at least max |b(k)| of the pass
                if m > top:
                    total *= math.exp(top - m)
                    top = m
                if top != 0.0:  # x - 0 is x itself (a growing bias: the top term, b(c) - b(c), is the largest)
                    np.subtract(x, top, out=x)
                total += float(np.exp(x, out=x).sum())
                passes += 1
                hi_end = lo_end
    finally:
        if heavy is not None and peaks:  # each pass's heaviest term and its neighbours at 1, 2, 4, ... on both sides
            p = np.array(peaks, dtype=np.int64)
            js = p[:, 2:3] + _HEAVY_OFFSETS_ARRAY[None, :]
            inside = (js >= 0) & (js < p[:, 1:2])
            heavy.extend((js + p[:, 0:1])[inside].astype(float).tolist())  # pass by pass, in _HEAVY_OFFSETS' order
    out = top + math.log(total)
    if not math.isfinite(out):
        return None
    return out, (4 * vmax + 2 + math.log2(min(N, _DIRECT_CHUNK)) + 24 + 4 * passes + 2 * (abs(out) + 1)) * _EPS


def anchored_log_sum(tree, a, c, bits, fns=None, third=None, b_err=None):
    """``(phi, rel)`` with ``phi = log sum_{k=a}^{c} e^{b(k) - b(c)}`` (the sum relative to its last term) in double
    precision by Theorem 15j (``proofs/closed_form_tails.md``), or ``None``.

    No large value of ``b`` is read in double: ``b(c - t) - b(c)`` is the Taylor polynomial ``P(t)`` of ``b`` about
    ``c`` (Arb coefficients at the exact integer ``c``, rounded to doubles), whose distance from it on the kept range
    ``0 <= t <= T1`` is proved below ``2^-44`` by the Lagrange remainder ``sup|b^(J+1)/(J+1)!| T1^(J+1)`` (one Arb power
    series of ``b`` with the whole real range as its constant term: a feature anywhere in it makes the bound large)
    plus the coefficients' rounding; ``b`` must be analytic on the kept range (:func:`analytic_on`). Theorem 15h sums
    ``e^P`` over the kept range from the exact bounds of ``|P''|`` and ``|P'''|`` (``|gamma| H^2 <= 2^-24`` where 4096
    pieces allow it, else ``2^-20``). Where no polynomial of
    degree below 20 is close enough and ``c < 2^53``, Theorem 15h on ``b`` itself (``fns``, ``third``: numpy functions and
    the trees of ``b``, ``b'''``) less ``b(c)`` in double answers instead, its reading of ``b`` counted by
    ``b_err(K, c)`` (the largest running error of ``b``, Theorem 15g(vii), at points of the kept range; without
    ``b_err`` that route declines). Before both, where ``c < 2^53``, ``|b| <= 2^11`` and the kept range is short or
    Theorem 15h's pieces would be narrow (:func:`_direct_first`), the kept range is summed term by term (Theorem 15j(vi),
    :func:`_direct_kept_log`, with the same ``b_err``; the route :func:`_kept_log`). The kept range reaches where ``b'(c) t`` is
    ``log(c - a + 1) + 32`` (four times that once, for a bias whose slope grows towards ``c``); the terms before it
    (the head ``[a, K - 1]``) are bounded by ``(K - a) e^{sup b - b(c)}`` (Theorem 15d's interval bound at ``bits``
    bits) and must be below ``2^-42`` of the kept sum. ``rel`` is the proved part (the polynomial's distance, the head,
    Theorem 15h's truncation) plus the estimate of the rounding (Theorem 15h's, and Horner's ``2J eps sum |q_j| T1^j``);
    ``None`` where it exceeds ``2^-38``. Made for a growing bias next to ``n`` (``sqrt(d)`` at ``n = 1e300``: ``b = 1e150``
    in double is ``1e134`` off, while ``b(c - t) - b(c)`` is what the masses depend on)."""
    from .._balls import arb_precision

    if c < a:
        return None
    if c == a:
        return 0.0, 0.0
    N = c - a + 1
    try:
        with arb_precision(96):
            slope = _b_series(tree, flint.arb(c), 2)[1]
            beta = float(slope.mid()) if slope.is_finite() else math.nan
        if not math.isfinite(beta):
            return None
        # the kept range t = 0 .. keep - 1 (k = K .. c): all of [a, c] unless b has fallen by log N + 32 before, four
        # times that once if the head is not negligible. Where the kept sum is long (phi_1 = -log(1 - e^-beta) >= 1/2,
        # the kept sum's logarithm were b linear over it), a shorter range first: where b has fallen by
        # log N + 32 - phi_1 (the head is asked below 2^-42 of e^phi, not of the last term e^0; were b linear, the terms
        # left out would be e^(phi_1 - 32)/N of the sum: 3e-17 on sqrt(d)'s distant side at n = 1e6), tried only where
        # the head's bound, with min(phi_1, log keep) for phi, is already below 2^-42 e^-1 (sqrt(d) at W = 1e5,
        # n = 1e6: 99,700 terms for 118,900)
        keeps = [N] if beta <= 0 else [min(N, int(r * (math.log(N) + _ANCHOR_MARGIN) / beta) + 1) for r in (1.0, 4.0)]
        phi_1 = -math.log(-math.expm1(-beta)) if beta > 0 else 0.0
        heads = {}  # K -> the head's bound log((K - a) e^{U - L_c}) (or None), formed once per K

        def head_of(K):
            if K not in heads:
                with arb_precision(bits):
                    U = _interval(tree, a, K - 1)[1]
                    Lc = point_interval(tree, c)[0]
                    heads[K] = None if U is None or Lc is None else float((flint.arb(K - a).log() + U - Lc).upper())
            return heads[K]

        shorter = None
        if phi_1 >= 0.5:
            keep = min(N, max(1, int((math.log(N) + _ANCHOR_MARGIN - phi_1) / beta) + 1))
            if keep < keeps[0] and c - keep + 1 > a:
                head = head_of(c - keep + 1)
                if head is not None and head - min(phi_1, math.log(keep)) <= math.log(ANCHOR_HEAD) - 1.0:
                    shorter = keep
        for keep in keeps if shorter is None else [shorter] + keeps:
            K = c - keep + 1
            kept = _kept_log(tree, c, keep, bits, fns, third, b_err)
            if kept is None:
                if keep == shorter:
                    continue  # the shorter kept range declined (its own sample points): the longer ones as before
                return None
            phi, rel = kept
            if K <= a:
                return (phi, rel) if rel <= TAYLOR_ACCEPT else None
            head = head_of(K)
            if head is None:
                return None
            # sum_{k<K} e^{b(k) - b(c)} <= e^head; the kept sum is at least e^phi (1 - rel) >= e^(phi - 2^-37)
            frac = math.exp(head - phi + 2.0**-37) if head - phi < 0 else math.inf
            if frac <= ANCHOR_HEAD:
                rel += frac
                return (phi, rel) if rel <= TAYLOR_ACCEPT else None
    except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
        return None
    return None


def short_range(a, c):
    """Whether ``[a, c]`` is short against its start: ``c - a < (|log c| + 2) c 2^-10``, where nodes placed in
    ``u = log x`` carry a relative error above ``2^-42`` of the range's width."""
    return (c - a) < (abs(math.log(c)) + 2.0) * c * 2.0**-10


_RHOS = (8.0, 3.0)  # Theorem 15i: the Bernstein ellipses' parameters (16 nodes: 8^-30 = 2^-90); 3 for a single piece that fails
_ETA_MAX = 1.4  # Theorem 15i: the boxes' imaginary half-width at most this (Re e^z > 0 on them)
_GROUP_U = 32.0  # Theorem 15i: a first box covers at most this much of u (bisected where its bound is too wide)
_PROOF_EVALS = 512  # Theorem 15i: at most this many box evaluations per range (else the route declines)
PROVED_ACCEPT = 2.0**-40  # Theorem 15i: the proved quadrature + Euler-Maclaurin + dropped-tail error, relative


def _dead_tail_log(tree, k0, c, limit, b0=None):
    """An upper bound (a double, rounded up) of ``log sum_{k=k0}^{c} e^{b(k)}`` by Theorem 15d's interval bounds on
    the whole range, then (where that exceeds ``limit``) on pieces of doubling length in ``u = log x`` (after the first, the
    rest of the range as one piece is tried once), or ``None``. ``b0`` (``b`` as a numpy function, optional): where
    ``log(c - k0 + 1) + b(k0)`` in double already exceeds ``limit + 1`` (the whole range's bound is at least that, ``b(k0)``
    being one of its values), the pieces are bounded first and the whole range only where they do not meet the limit:
    the same answer either way, one interval bound fewer where the pieces succeed."""
    if k0 > c:
        return -math.inf

    def piece(x0, x1):
        U = _interval(tree, x0, x1)[1]
        if U is None or not U.is_finite():
            return None
        return float((flint.arb(x1 - x0 + 1).log() + U).upper())

    later = False
    if b0 is not None:  # a cheap guess (no proof); where it is wrong the whole range is bounded below all the same
        with np.errstate(all="ignore"):
            try:
                guess = math.log(c - k0 + 1) + float(np.asarray(b0(np.array([float(k0)])), dtype=float).ravel()[0])
            except (ValueError, TypeError, OverflowError):
                guess = math.nan
        later = guess > limit + 1.0
    whole = None
    if not later:
        whole = piece(k0, c)
        if whole is None:
            return None
        if whole <= limit:
            return whole
    split = _dead_tail_pieces(piece, k0, c, limit)
    if later and (split is None or split > limit):  # the whole range's bound after all
        whole = piece(k0, c)
        if whole is None:
            return None
        if whole <= limit:
            return whole
    if split is None:
        return whole
    return split if whole is None else min(whole, split)


def _dead_tail_pieces(piece, k0, c, limit):
    """:func:`_dead_tail_log`'s bound on pieces of doubling length from ``k0`` (after the first, the rest ``[x1 + 1, c]``
    as one piece once, kept where the two meet ``limit``), rounded up, or ``None`` where a piece is not bounded or more
    than 24 would be needed."""
    logs, x0, L = [], k0, 8.0
    while x0 <= c:
        if len(logs) >= 24:
            return None
        x1 = c if math.log(c) - math.log(x0) <= L else min(c, max(x0, int(x0 * math.exp(L))))
        v = piece(x0, x1)
        if v is None:
            return None
        logs.append(v)
        x0, L = x1 + 1, 2 * L
        if len(logs) == 1 and x0 <= c:
            # once, after the first piece: the rest [x1 + 1, c] as one piece (a tail that has died out, e.g. -0.01 sqrt(d)
            # beyond d = 2e12, is bounded by one interval where seven pieces of doubling length were taken); where the two
            # bounds together exceed the limit the doubling pieces go on from x1 + 1 as before
            rest = piece(x0, c)
            if rest is not None:
                both = float(_logsumexp(np.array([v, rest])))
                if both + 1e-12 * (1 + abs(both)) <= limit:
                    return both + 1e-12 * (1 + abs(both))
    split = logs[0] if len(logs) == 1 else float(_logsumexp(np.array(logs)))
    return split + 1e-12 * (1 + abs(split))


def _exp_box(lo, hi, eta, cs=None):
    """A rectangle containing ``e^z`` for every ``z`` with ``lo <= Re z <= hi``, ``|Im z| <= eta`` (``arb`` ends,
    ``0 < eta <= pi/2``): ``Re e^z`` in ``[e^lo cos eta, e^hi]``, ``Im e^z`` in ``[-e^hi sin eta, e^hi sin eta]`` (Arb's
    ``exp`` of the box as a ball lets the real part reach below 0 once the box is wider than ``log 2``, where
    ``exp(-d/1000)`` is then unbounded). ``cs``: ``(cos, sin)`` of ``eta.upper()`` if known."""
    e_lo, e_hi = flint.arb(lo.lower()).exp(), flint.arb(hi.upper()).exp()
    c, si = cs if cs is not None else (flint.arb(eta.upper()).cos(), flint.arb(eta.upper()).sin())
    re_lo = (e_lo * c).lower()
    im_hi = (e_hi * si).upper()
    return flint.acb(flint.arb(re_lo).union(flint.arb(e_hi.upper())), flint.arb(-im_hi).union(flint.arb(im_hi)))


_KAPPA = {}  # proved_error_log's Theorem 15i(iv) slope kappa of each tree (a function of the expression alone)
_SHAPES = {}  # proved_error_log's box shapes: Arb constants of (longest piece, rho cap, precision) alone


def proved_error_log(tree, edges, log_budget):
    """An upper bound (a double, rounded up) of the log of the absolute error of the composite 16-point
    Gauss-Legendre rule on the pieces ``edges`` of ``u = log x`` for ``int e^{b(e^u) + u} du`` plus the
    Euler-Maclaurin remainder of order ``p = 2`` over ``[e^{u_0}, e^{u_P}]`` (Theorem 15i, ``proofs/closed_form_tails.md``),
    or ``None`` where a group's bound exceeds its share of ``log_budget`` even alone, a box is not proved analytic or
    the work cap is reached.

    Consecutive pieces are grouped; one complex box (an ``acb``: real ``[u_i - e, u_j + e]``, imaginary
    ``[-eta, eta]``, ``e = l (A - 1)/2``, ``eta = l B/2`` with ``A = (rho + 1/rho)/2``, ``B = (rho - 1/rho)/2`` and ``l``
    the group's longest piece) contains every piece's Bernstein ellipse ``E_rho``. One evaluation of ``b(e^z)`` on the
    box in Arb with analytic branches (:func:`_eval_u`, non-finite where not analytic) bounds ``Re b <= R`` there, and
    gives both bounds: Gauss-Legendre ``sum_i (l_i/2) (64/15) rho^-30/(rho^2 - 1) e^{R + u_j + e}`` and, by Cauchy's
    estimate on discs of radius ``s x`` (``s = min(1 - e^-e, sin min(eta, pi/2))``, whose logarithms lie in the box),
    ``(1/720) int |f^(4)| <= e^R/(90 s^4 x_i^3)``. A group whose bound exceeds its share of the budget (its length
    over the total) is bisected; a narrow feature of ``b`` anywhere makes ``R`` large in every box around it and the
    route declines."""
    P = edges.size - 1
    total = float(edges[-1] - edges[0])
    if P < 1 or not total > 0:
        return None
    el = edges.tolist()  # the pieces' ends and lengths as Python floats (the same doubles; no numpy call per group)
    lens = (edges[1:] - edges[:-1]).tolist()
    shapes = _SHAPES  # (longest piece, rho cap, precision) -> the box's shape: most groups share one (unit pieces)
    if len(shapes) > 4096:
        shapes.clear()

    def shape(lmax_f, r):
        key = (lmax_f, r, flint.ctx.prec)
        if key not in shapes:
            # rho at most r, and small enough that eta = l (rho - 1/rho)/4 <= 1.4 < pi/2: Re e^z > 0 on the box, where
            # exp(-d/1000) stays bounded (with eta = 1.97 it grew like e^(d/1000) and every group failed)
            t = 4 * _ETA_MAX / lmax_f
            rho = flint.arb(min(r, 0.5 * (t + math.sqrt(t * t + 4)) * (1 - 2.0**-40)))
            A, B = (rho + 1 / rho) / 2, (rho - 1 / rho) / 2
            lmax = flint.arb(lmax_f)
            ext, eta = lmax * (A - 1) / 2, lmax * B / 2
            if not float(eta.upper()) < 1.5:  # eta below pi/2 (cos eta > 0 in _exp_box)
                shapes[key] = None
            else:
                gl_const = (flint.arb(64) / 15 / (rho * rho - 1)).log() - 30 * rho.log()  # log((64/15) rho^-30/(rho^2 - 1))
                s = (1 - (-ext).exp()).min(eta.min(flint.arb.pi() / 2).sin())
                em_const = -flint.arb(90).log() - 4 * s.log() + flint.arb(2).log()
                cs = (flint.arb(eta.upper()).cos(), flint.arb(eta.upper()).sin())
                im = flint.arb(0).union(eta).union(-eta)  # the box's imaginary side, the same for every group
                shapes[key] = (ext, eta, gl_const + flint.arb(2).log(), em_const, cs, im)
        return shapes[key]

    def group_bound(i, j, r):  # (i) + (ii) for pieces i..j-1 as a rounded-up double, or None
        got = shape(max(lens[i:j]), r)
        if got is None:
            return None
        ext, eta, gl_const, em_const, cs, im = got
        u0, u1 = flint.arb(el[i]), flint.arb(el[j])
        lo, hi = u0 - ext, u1 + ext
        z = flint.acb(((lo + hi) / 2).union(lo).union(hi), im)
        try:
            ez = _exp_box(lo, hi, eta, cs)  # e^z on the box, shared by b(e^z) and its rest below
        except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
            return None
        R = Rf = None
        if kappa != 0:
            # Theorem 15i(iv): b(e^z) + z = (kappa + 1) z + rest(z), so Re(b(e^z) + z) <= max((kappa + 1) Re z) + sup Re rest
            # (-1.1 log(1 + e^z) + z: e^{-0.1 u_i} where the two copies of z in ball arithmetic gave e^{-1.1 u_i + u_j}),
            # and likewise Re b(e^z) <= max(kappa Re z) + sup Re rest for (ii): b itself is not evaluated (a finite rest
            # is analytic on the box, and so is b = kappa z + rest)
            try:
                rest = _eval_u_rest(tree, z, ez, True)
            except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
                rest = None
            if rest is not None and rest.is_finite():
                top_rest = flint.arb(rest.real.upper())
                R = flint.arb(((kap * lo).max(kap * hi) + top_rest).upper())
                Rf = flint.arb((k1 * lo).max(k1 * hi).upper()) + top_rest
        if R is None:
            try:
                v = _eval_u(tree, z, ez, True)
            except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
                return None
            if not v.is_finite():
                return None
            R = flint.arb(v.real.upper())
            Rf = R + hi  # Re(b(e^z) + z) <= R + hi on the box
        # log(e^gl + e^em) <= max + log 2 (the log 2 inside both constants)
        gl = ((u1 - u0) / 2).log() + gl_const + Rf
        em = R + em_const - 3 * u0
        both = gl.max(em)
        return float(both.upper()) if both.is_finite() else None

    kappa = _KAPPA.get(tree)
    if kappa is None:
        if len(_KAPPA) > 256:
            _KAPPA.clear()
        kappa = _KAPPA[tree] = _linear_part(tree)
    kap, k1 = flint.arb(kappa), flint.arb(kappa + 1)
    if kappa != 0 and P > 1 and total > _GROUP_U:  # (within _GROUP_U the first group below is the whole range already)
        # one box for the whole range first (Theorem 15i(iv) keeps its bound tight for a power-law decay); where that
        # fails, the groups below as before
        whole = group_bound(0, P, _RHOS[0])
        if whole is not None and whole <= log_budget:
            return whole + 1e-12 * (1 + abs(whole))
    stack, i = [], 0
    while i < P:  # first groups: at most _GROUP_U of u each
        j = bisect.bisect_right(el, el[i] + _GROUP_U) - 1
        j = min(P, max(j, i + 1))
        stack.append((i, j))
        i = j
    stack.reverse()
    acc, evals = [], 0
    while stack:
        i, j = stack.pop()
        evals += 1
        if evals > _PROOF_EVALS:
            return None
        share = math.log(max(el[j] - el[i], 1e-300) / total) + log_budget
        err = group_bound(i, j, _RHOS[0])
        if j - i < 2 and not (err is not None and err <= share):  # a single piece: a smaller ellipse, once
            evals += 1
            err = group_bound(i, j, _RHOS[1])
        if err is not None and err <= share:
            acc.append(err)
            continue
        if j - i < 2:
            return None
        k = min(j - 1, max(i + 1, bisect.bisect_left(el, 0.5 * (el[i] + el[j]), i, j)))
        stack.extend([(k, j), (i, k)])
    out = acc[0] if len(acc) == 1 else float(_logsumexp(np.array(acc)))  # one group: top + log(e^0) = top exactly
    return out + 1e-12 * (1 + abs(out))  # the double log-sum-exp of rounded-up logs, rounded up


def float_tail_log(fns, a, c, ref_log=-math.inf, third=None, tree=None, taylor=True):
    """``log sum_{k=a}^{c} e^{b(k)}`` in double precision (Theorem 15 with p = 2, Theorem 15i's proved error), or
    ``None`` where Theorem 15i's bound of the quadrature, the Euler-Maclaurin remainder and a dropped tail exceeds
    ``2^-40`` of the larger of the sum and ``e^ref_log`` (the rest of the sum it is added to), or a value is not finite.

    ``fns``: the bias and its first three derivatives as numpy functions; ``third``: the compiled trees of ``b`` and
    ``b'''`` (for Theorem 15h on a range short against its start), or ``None``; ``tree``: the compiled tree of ``b``
    (Theorem 15i's proof; by default ``third[0]``; without a tree a long range is declined); ``taylor``: whether to try
    Theorem 15h on a short range (``False`` where the caller has just seen it decline).

    A short range too long to sum term by term is taken by Theorem 15i like a long one, before Theorem 15h, where the
    rounding of its ends in ``u`` allows it: ``(|log c| + 2) (c/(c - a)) 2 eps <= 2^-41`` (``[n/2, n)`` at ``n = 1e300``,
    where Theorem 15h needs more than 4096 pieces); the rounding estimate then carries that term."""
    b0, b1, b2, b3 = fns
    tree = tree if tree is not None else (third[0] if third is not None else None)
    # the quadrature runs in u = log k, whose nodes carry an absolute error of about (|u| + 1) eps k: a relative
    # error (|u| + 1) eps c / (c - a) of a short range's width (62 % at a = 1e15 - 5, c = 1e15 - 1). Where that
    # exceeds 2^-42 the range is taken by Theorem 15h (second-order Taylor pieces with a proved bound of b''', geometric sums),
    # else summed term by term if its integers are doubles (c < 2^53, at most 2^16 terms), else declined (the certified
    # route answers)
    if short_range(a, c):
        many = c - a >= 1 << 16 or c >= 1 << 53  # too many terms, or integers beyond doubles, to sum term by term
        # Theorem 15i first where the ends' rounding in u stays below 2^-41 of the sum's scale (W = n/2 at n = 1e300:
        # 692 * 2 * 2 eps = 3e-13): Theorem 15h needs more than 4096 pieces at W = n/2 (and declined; the certified
        # midpoint answered in 6-25 ms) and took 5.6 ms at W = n/1.9 against 0.3 ms here
        if many and (abs(math.log(c)) + 2.0) * (c / (c - a)) * 2 * _EPS <= 2.0**-41:
            out = _long_range_log(fns, a, c, ref_log, tree)
            if out is not None:
                return out
        if taylor and third is not None and (c - a >= 1024 or c >= 1 << 53):  # term by term below (cheaper, exact positions)
            out = taylor_pieces_log(fns, third, a, c)
            if out is not None:
                return out[0]
        if many:
            return None
        with np.errstate(all="ignore"):
            v = np.asarray(b0(np.arange(a, c + 1, dtype=float)), dtype=float) * np.ones(c - a + 1)
        if np.any(np.isnan(v)) or np.any(v == np.inf):
            return None
        top = float(np.max(v))
        return top if top == -math.inf else top + math.log(float(np.sum(np.exp(v - top))))
    return _long_range_log(fns, a, c, ref_log, tree)


def _long_range_log(fns, a, c, ref_log, tree):
    """:func:`float_tail_log` on a range taken in ``u = log x`` (Theorem 15 with ``p = 2``, Theorem 15i's proof, whose
    verdict is memoised per expression and exact arguments: ``_PROOFS``). The answer itself is memoised likewise, in
    the same dictionary under its own tag (a pure function of the functions, the tree and the exact arguments; cleared
    with the proofs): ``distant_mass`` after ``window_mass`` at the same ``W`` and ``n`` reads both sides' sums."""
    if tree is None:  # Theorem 15i needs the tree: no proved bound, no answer
        return None
    key = ("float", tree, a, c, ref_log)
    fns = tuple(fns)  # (a slice of a longer tuple from the twisted route: its functions compared one by one below)
    got = _PROOFS.get(key)
    if got is not None and len(got[0]) == len(fns) and all(f is g for f, g in zip(got[0], fns, strict=True)):
        return got[1]
    with np.errstate(all="ignore"):  # once for the whole float (its helpers' quiet forms below)
        out = _long_range_log_uncached(fns, a, c, ref_log, tree)
    if len(_PROOFS) >= _PROOFS_MAX:
        _PROOFS.clear()
    _PROOFS[key] = (fns, out)  # the functions kept alive with their answer: their identities are part of the key
    return out


def _long_range_log_uncached(fns, a, c, ref_log, tree):
    b0, b1, b2, b3 = fns
    lu0, lu1 = math.log(a), math.log(c)
    edges = _pieces_quiet(b0, lu0, lu1)  # (np.errstate held by _long_range_log)
    if edges is None:
        return None
    # a dropped tail (:func:`_pieces`): the sum is split at the integer K = floor(e^{u_end}); Euler-Maclaurin runs on
    # [a, K] and the terms beyond K are bounded by Theorem 15d (Theorem 15i(iii)): a feature there makes the bound large
    K = c
    if edges[-1] < lu1:
        K = max(a + 1, min(c, int(math.exp(float(edges[-1])))))
        edges = edges.copy()
        edges[-1] = math.log(K)
        if not edges[-1] > edges[-2]:
            edges = np.delete(edges, -2)
    # the 16-point rule, and the 8-point one as a cheap filter only (a growing bias declines here at once); Theorem 15i
    # proves
    i16, i8 = _gl_log_pair_quiet(b0, edges)
    if math.isnan(i16) or math.isnan(i8) or i16 == math.inf or i8 == math.inf:
        return None
    top = max(i16, i8, ref_log)
    if top == -math.inf or abs(math.exp(i16 - top) - math.exp(i8 - top)) > 1e-11:
        return None
    ends = np.array([float(a), float(K)])
    ones = np.ones(2)
    lb, d1, d2, d3 = (_as_shape(f(ends), ones) for f in (b0, b1, b2, b3))
    # the checks on the two ends as Python floats (the values below stay numpy's, bit for bit)
    lb_l, d1_l = lb.tolist(), d1.tolist()
    for v, s1, s2, s3 in zip(lb_l, d1_l, d2.tolist(), d3.tolist(), strict=True):
        if v != v or v == math.inf or not (math.isfinite(s1 + s2 + s3) or v == -math.inf):
            return None
    finite_lb = [abs(v) for v in lb_l if math.isfinite(v)]
    top_b = max(finite_lb) if finite_lb else 0.0  # max |b| at the ends (0: none finite)
    scale = max(i16, max(lb_l))
    if scale == -math.inf:
        return None
    fe = np.exp(lb - scale)
    # an end where f underflows contributes 0 to every term (np.errstate held by _long_range_log)
    f3 = (d3 + 3 * d1 * d2 + d1**3) * fe  # f''' = (b''' + 3 b' b'' + b'^3) f
    fe0, fe1 = fe.tolist()
    f30, f31 = (v if w > 0 else 0.0 for v, w in zip(f3.tolist(), (fe0, fe1), strict=True))
    f10, f11 = (s1 * w if w > 0 else 0.0 for s1, w in zip(d1_l, (fe0, fe1), strict=True))  # f' = b' f
    total = math.exp(i16 - scale) + 0.5 * (fe0 + fe1) + (f11 - f10) / 12 - (f31 - f30) / 720
    if not total > 0:
        return None
    out = scale + math.log(total)
    # the rounding (an estimate, Theorem 15g(v)): b in double and the nodes' (|u| + 1) eps through x b'(x), read at the
    # ends, and the ends log a, log K themselves ((|u| + 1) 2 eps each, moving the integral by x f(x) times that). By
    # parts, |a f(a) - K f(K)| <= int (1 + |x b'|) f, so a f(a) + K f(K) <= (1 + slope) int f + 2 min(a f(a), K f(K)):
    # the first part is the nodes' term again (the factor 2 below), the second is new where the range is short against
    # its start (min = 2.9 int f for -log(1+d) on [n/2, n)); a range where it exceeds 2^-39 is declined (the proved part
    # below takes 2^-40)
    xs = (float(a), float(K))
    slopes = [abs(x * s1) for x, s1 in zip(xs, d1_l, strict=True) if math.isfinite(s1)]
    slope = max(slopes) if slopes else 0.0
    ends_rel = (abs(lu1) + 1) * 4 * _EPS * min(xs[0] * fe0, xs[1] * fe1) / total
    if not (top_b + slope * (abs(float(edges[-1])) + 1) + 64) * 2 * _EPS + ends_rel <= 2.0**-39:
        return None
    # Theorem 15i: the proved error (quadrature, remainder, dropped tail) at most 2^-40 of max(sum, e^ref_log), the sum
    # taken 2^-30 low (its rounding is far below that)
    budget = max(out, ref_log) - 2.0**-30 + math.log(PROVED_ACCEPT)
    prec = 80 + int(math.log2(2.0 + top_b + abs(lu1)))
    key = (tree, K, c, edges.tobytes(), budget, prec)
    proved = _PROOFS.get(key)
    if proved is None:
        proved = _proved(tree, edges, K, c, budget, prec, b0)
        if len(_PROOFS) >= _PROOFS_MAX:
            _PROOFS.clear()
        _PROOFS[key] = proved
    return out if proved else None


# Theorem 15i's verdict on a range, memoised: a pure function of the compiled tree (the expression), the pieces (their
# doubles), the integers K, c, the budget (a double) and the precision, so that a repeated call (window_mass, then
# distant_mass, at the same W and n) does not prove the same bound again; bounded (cleared when full)
_PROOFS = {}  # also _long_range_log's answers, under keys ("float", tree, a, c, ref_log), with the functions used
_PROOFS_MAX = 256  # keys hold the pieces (at most ~9 kB each): a few MB at most


def _proved(tree, edges, K, c, budget, prec, b0=None):
    """Whether Theorem 15i's proved error (the dropped tail beyond ``K``, Theorem 15d; the quadrature and the
    Euler-Maclaurin remainder on ``edges``) stays within ``e^(budget - 1)`` (``budget`` already holds ``2^-40``).
    ``b0``: ``b`` as a numpy function, for the tail bound's cheap guess (:func:`_dead_tail_log`)."""
    from .._balls import arb_precision

    try:
        with arb_precision(prec):
            tail = _dead_tail_log(tree, K + 1, c, budget - 1.0, b0) if K < c else -math.inf
            if tail is None or tail > budget - 1.0:
                return False
            quad = proved_error_log(tree, edges, budget - 1.0)
    except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
        return False
    return quad is not None


def range_sum_arb(tree, lo, hi, N, prec, why=None):
    """:math:`\\sum_{k=lo}^{hi} e^{b(k)}`: terms below ``N`` one by one, the rest by Theorem 15; ``None`` if not proved."""
    if hi < lo:
        return flint.arb(0)
    total = direct_sum_arb(tree, lo, min(hi, N - 1)) if lo < N else flint.arb(0)
    start = max(lo, N)
    if hi < start:
        return total
    if hi - start < 16:
        return total + direct_sum_arb(tree, start, hi)
    tail = em_sum_arb(tree, start, hi, prec, scale=total if lo < N else None, bits=min(prec - 36, 64), why=why)
    return None if tail is None else total + tail


# -- the sum to infinity (Theorem 15c) -------------------------------------------------------
def _frac(c):
    """A constant node as an exact fraction, or ``None`` (pi, e)."""
    return flint.fmpq(c[1], c[2]) if c[0] == "q" else None


def _terms(tree):
    """The bias's additive terms as ``(coefficient, node)`` with an exact coefficient."""
    out = []
    for t in tree[1] if tree[0] == "add" else (tree,):
        if t[0] == "q":
            out.append((_frac(t), ("one",)))
        elif t[0] == "mul" and len(t[1]) == 2 and t[1][0][0] == "q":
            out.append((_frac(t[1][0]), t[1][1]))
        else:
            out.append((flint.fmpq(1), t))
    return out


def _lin_node(node):
    """``(alpha, gamma)`` when the node is ``alpha + gamma d`` with numbers ``alpha >= 0``, ``gamma > 0``, else ``None``."""
    def slope(t):
        if t == ("x",):
            return flint.fmpq(1)
        if t[0] == "mul" and len(t[1]) == 2 and t[1][0][0] == "q" and t[1][1] == ("x",):
            return _frac(t[1][0])
        return None

    if slope(node) is not None:
        al, ga = flint.fmpq(0), slope(node)
    elif node[0] == "add" and len(node[1]) == 2 and node[1][0][0] == "q" and slope(node[1][1]) is not None:
        al, ga = _frac(node[1][0]), slope(node[1][1])
    else:
        return None
    return (al, ga) if ga > 0 and al >= 0 else None


def tail_envelope(tree, names=None):
    """``bound(X)``: a ball :math:`\\ge \\sum_{k\\ge X} e^{b(k)}` for integers ``X >= 2`` (``None`` where the
    envelope does not hold at that ``X``), or a string saying why no envelope applies (Theorem 15c,
    ``proofs/closed_form_tails.md``).

    ``b`` must be a sum of a constant and terms ``c h(d)`` with ``h`` one of ``d``, ``log(alpha + gamma d)``,
    ``(alpha + gamma d)^p`` (``p != 0``), ``log(alpha + gamma d)^p`` (``p >= 1``, ``c < 0``), and Theorem 15c''s
    ``sin``, ``cos``, ``e^(alpha + gamma d)`` and ``log P(d)`` (a polynomial of degree ``k >= 2`` with rational
    coefficients, ``c_k > 0``)."""
    logs, lin, stretched, drops, polys = [], flint.fmpq(0), [], [], []
    bounded, expos = flint.fmpq(0), []  # Theorem 15c': sum of |c| over sin/cos terms; (c, alpha, gamma) of c e^(alpha + gamma d)
    for i, (c, node) in enumerate(_terms(tree)):
        tag = node[0]
        term = names[i] if names is not None and i < len(names) else None
        if tag == "one" or c == 0:
            continue
        if tag in ("sin", "cos") and c is not None:
            bounded += abs(c)  # |h| <= 1: an increment of at most 2|c|
            continue
        if tag == "exp" and c is not None:
            lin_arg = _affine_parts(node[1])
            if lin_arg is not None and lin_arg[0][1] == 0 and lin_arg[1][1] == 0 and lin_arg[0][0] != 0:
                gamma, alpha = lin_arg[0][0], lin_arg[1][0]
                if gamma < 0 or c < 0:
                    expos.append((c, alpha, gamma))
                    continue
                return f"the term {term or 'c e^(g d)'} grows without bound (Theorem 15c bounds no increment of it)"
        if tag == "x":
            lin += c
        elif tag == "loglin":
            logs.append((c, _frac(node[1]), _frac(node[2]), 1))
        elif tag in ("powlin", "powi") and (tag == "powlin" or _lin_node(node[1]) is not None):
            al, ga, p = (_frac(node[1]), _frac(node[2]), _frac(node[3])) if tag == "powlin" else (*_lin_node(node[1]), flint.fmpq(node[2]))
            if None in (al, ga, p):
                return "a power with a constant other than a number"
            if p > 0 and c < 0:
                stretched.append((c, al, ga, p))  # non-increasing: dropped, or the decay itself
            elif p < 0 and c > 0:
                pass  # c (alpha + gamma d)^p decreases: its increment is <= 0
            elif p < 0:
                drops.append((c, al, ga, p))  # increases to 0: at most |c| (alpha + gamma X)^p
            else:
                return f"the term {term or c} (a power {p} of d) grows without bound (Theorem 15c bounds no increment of it)"
        elif tag == "log" and _far_poly(node[1]) is not None:
            # Theorem 15c'(iv): c log P(d) = c k log d + c log c_k + c log(1 + t(d)), |t| <= tau(X) on d >= X
            poly = _far_poly(node[1])[0]
            k = len(poly) - 1
            logs.append((c * k, flint.fmpq(0), flint.fmpq(1), 1))
            polys.append((c, [abs(q / poly[-1]) for q in poly[:-1]], k))
        elif tag in ("powi", "powc") and node[1][0] == "loglin" and c < 0:
            p = flint.fmpq(node[2]) if tag == "powi" else _frac(node[2])
            if p is None or p < 1:
                return "a power of a logarithm below 1"
            logs.append((c, _frac(node[1][1]), _frac(node[1][2]), p))
        else:
            shown = f"the term {term}" if term else "a term"
            return (f"{shown} is outside Theorem 15c's forms (c d, c log(a + g d), c (a + g d)^p, -c log(a + g d)^p, "
                    "c sin(.), c cos(.), c e^(a + g d), c log P(d) for a polynomial P), so no envelope of the tail "
                    "beyond a cut-off is proved")
    if lin > 0:
        return f"the linear part {lin} d grows without bound (Theorem 15c bounds no increment of it)"
    if any(x is None for t in logs for x in t[1:3]):
        return "a logarithm with a constant other than a number"
    A = max((al / ga for _, al, ga, _ in logs), default=flint.fmpq(0))
    fast = any(c < 0 and g > 0 for c, _, g in expos)
    if not (lin < 0 or stretched or fast or sum(c for c, _, _, p in logs if p == 1) < -1 or any(p > 1 for *_, p in logs)):
        return ("no term that makes the weights summable by itself (a linear, stretched, -e^(g d) or log term with total "
                "slope below -1); the envelope of Theorem 15c needs one (a log slope of -1 or above diverges: D_oo = 1)")

    def bound(X, f_X):
        """The envelope's bound of sum_{k >= X} f(k), given the ball f_X = f(X)."""
        x = flint.arb(X)
        s, extra = flint.arb(0), flint.arb(0)  # the log part's slope s and the constant epsilon of Theorem 15c
        for c, al, ga, p in logs:
            L = (flint.arb(al) + flint.arb(ga) * x).log()
            if p == 1:
                s -= flint.arb(c)
                if c > 0:
                    extra += flint.arb(c) * flint.arb(A) / x
            else:  # -|c| L^p >= ... : L^p - L_X^p >= p L_X^(p-1) (L - L_X) for L >= L_X >= 0
                if not (L >= 0):
                    return None
                s -= flint.arb(c) * flint.arb(p) * L ** (flint.arb(p) - 1)
        for c, al, ga, p in drops:
            extra += -flint.arb(c) * (flint.arb(al) + flint.arb(ga) * x) ** flint.arb(p)
        extra += 2 * flint.arb(bounded)  # Theorem 15c': sin and cos terms
        for c, ratios, k in polys:  # Theorem 15c'(iv): |log(1 + t)| <= -log(1 - tau) on d >= X, an increment of twice it
            tau = sum((flint.arb(r) * x ** (j - k) for j, r in enumerate(ratios) if r != 0), flint.arb(0))
            if not (tau < 1):
                return None
            extra += 2 * abs(flint.arb(c)) * (-(1 - tau).log())
        faster = flint.arb(0)  # Theorem 15c': -|c| e^(al + ga x) with ga > 0 decays at least at the rate |c| ga e^(al + ga X)
        for c, al, ga in expos:
            e_X = (flint.arb(al) + flint.arb(ga) * x).exp()
            if ga < 0 and c < 0:
                extra += -flint.arb(c) * e_X  # increases to 0
            elif ga > 0:
                faster += -flint.arb(c) * flint.arb(ga) * e_X
        best = None
        if lin < 0 or faster > 0:
            rate = -flint.arb(lin) + faster - (0 if s >= 0 else -s / (flint.arb(A) + x))
            if rate > 0:
                best = 1 / rate
        if s > 1:
            v = (flint.arb(A) + x) / (s - 1)
            best = v if best is None or v.upper() < best.upper() else best
        if s >= 0:
            for c, al, ga, p in stretched:
                # int_X^oo e^(c((al + ga x)^p - (al + ga X)^p)) dx = e^z Gamma(1/p, z) / (ga p |c|^(1/p)), z = |c| (al + ga X)^p
                cc, pp = -flint.arb(c), flint.arb(p)
                z = cc * (flint.arb(al) + flint.arb(ga) * x) ** pp
                v = z.exp() * z.gamma_upper(1 / pp) / (flint.arb(ga) * pp * cc ** (1 / pp))
                if v.is_finite():
                    best = v if best is None or v.upper() < best.upper() else best
        if best is None or not best.is_finite():
            return None
        # f(k) <= f(X) e^extra g(k)/g(X) with g non-increasing: sum_{k >= X} <= f(X) e^extra (1 + int_X^oo g/g(X))
        return (f_X * extra.exp() * (1 + best)).upper()

    return bound


def infinite_sum_arb(tree, lo, N, prec, bits=64, names=None):
    """:math:`\\sum_{k \\ge lo} e^{b(k)}` as a ball (Theorem 15c), or a string saying why not.

    Terms below ``N`` one by one, then Theorem 15 up to ``C - 1`` and Theorem 15c's envelope beyond, for the
    first ``C = 2^k``, ``k = 64, 128, ..., 16384``, whose envelope is below ``2^-(bits + 6)`` of the sum so far."""
    env = tail_envelope(tree, names)
    if isinstance(env, str):
        return env
    for k in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384):
        C = max(1 << k, 2 * max(lo, N))
        why = []
        head = range_sum_arb(tree, lo, C - 1, N, prec, why)
        split = periodic_split(tree) if head is None else None
        if split is not None:  # h + beta sin(omega d + phi): Theorem 15f up to the envelope's start
            head = mixed_sum_arb(tree, split, lo, C - 1, N, prec, why=why)
        if head is None or not (head > 0):
            step = why[-1] if why else "a ball that is not positive"
            return f"the envelope holds, but Theorem 15 does not enclose the sum from {lo} up to its start 2^{k}: {step}"
        fC = f_ball(tree, C)
        rest = env(C, fC)
        if rest is not None and rest.is_finite() and rest <= head * flint.arb(2) ** -(bits + 6):
            return head + flint.arb(0).union(rest)
    return "the envelope of Theorem 15c stays above 2^-70 of the sum up to d = 2^16384"


# -- an undamped periodic bias (Theorem 15e) --------------------------------------------------
_JA_TERMS = 400  # Bessel terms at most (|beta| up to about 150)


def _affine_parts(node):
    """``node`` as ``sum_i q_i pi^{e_i} x^{f_i}`` (``e_i, f_i`` in {0, 1}, ``q_i`` exact fractions): returns
    ``(omega, phi)``, each a pair ``(q, q_pi)`` meaning ``q + q_pi pi``, or ``None`` for any other form."""
    terms = node[1] if node[0] == "add" else (node,)
    omega, phi = [flint.fmpq(0), flint.fmpq(0)], [flint.fmpq(0), flint.fmpq(0)]
    for t in terms:
        factors = t[1] if t[0] == "mul" else (t,)
        q, has_pi, has_x = flint.fmpq(1), 0, 0
        for f in factors:
            if f[0] == "q":
                q *= _frac(f)
            elif f == ("pi",):
                has_pi += 1
            elif f == ("x",):
                has_x += 1
            else:
                return None
        if has_pi > 1 or has_x > 1:
            return None
        (omega if has_x else phi)[has_pi] += q
    return tuple(omega), tuple(phi)


def periodic_form(tree):
    """``(beta, kind, omega, phi)`` when ``b = beta sin(omega d + phi)`` or ``beta cos(omega d + phi)`` (numbers
    ``beta != 0``, ``omega``, ``phi``, each ``q + q_pi pi`` with exact fractions), else ``None`` (Theorem 15e)."""
    c, node = _terms(tree)[0] if len(_terms(tree)) == 1 else (None, None)
    if c is None or node[0] not in ("sin", "cos") or c == 0:
        return None
    parts = _affine_parts(node[1])
    if parts is None or (parts[0][0] == 0 and parts[0][1] == 0):
        return None
    return c, node[0], parts[0], parts[1]


def _bessel_tail(beta, M):
    """A ball ``>= sum_{m > M} I_m(|beta|)`` (Theorem 15e): ``I_m(x) <= (x/2)^m e^{x^2/(4(m+1))}/m!`` and a geometric
    tail (the bound with ``e^{x^2/4}`` asked for more than 400 terms from an amplitude of 47 on)."""
    x = abs(flint.arb(beta))
    h = x / 2
    if not (h < M + 2):
        return None
    first = h ** (M + 1) / flint.arb(M + 1).gamma() * (x * x / (4 * (M + 2))).exp()
    return (first / (1 - h / (M + 2))).upper()


def bessel_i_list(beta, M):
    """``[I_0(beta), ..., I_M(beta)]`` as ``arb`` balls (Theorem 15e): ``I_M`` and ``I_{M+1}`` of ``x = |beta|`` by Arb,
    the rest by the backward recurrence ``I_{m-1}(x) = (2m/x) I_m(x) + I_{m+1}(x)``, a sum of positive balls (no
    cancellation: each relative radius stays within the inputs' plus the roundings), and ``I_m(beta) = (-1)^m I_m(x)``.
    Arb's ``bessel_i`` of ``149`` at 128-256 bits takes about 1 ms a call (0.07 ms at 320): 300 calls were 0.3 s."""
    with _more_bits(16):  # the M roundings of the recurrence (log2 M bits) are absorbed, then rounded back
        x = abs(flint.arb(beta))
        out = [None] * (M + 2)
        out[M + 1], out[M] = x.bessel_i(M + 1), x.bessel_i(M)
        for m in range(M, 0, -1):
            out[m - 1] = (2 * m) / x * out[m] + out[m + 1]
    out = [v + 0 for v in out[: M + 1]]
    if beta < 0:
        out = [v if m % 2 == 0 else -v for m, v in enumerate(out)]
    return out


def periodic_sum_arb(form, a, c, bits=70):
    """:math:`\\sum_{k=a}^{c} e^{\\beta\\cos(\\omega k+\\phi')}` (``sin`` as ``cos`` with ``phi' = phi - pi/2``) by the
    Jacobi-Anger expansion (Theorem 15e): ``I_0(beta) N + 2 sum_{m=1}^{M} I_m(beta) C_m`` with
    ``C_m = sum_k cos(m(omega k + phi'))`` in closed form, plus ``[-1, 1]`` times ``2 N sum_{m>M} I_m(|beta|)``.
    Call under :func:`otprior._balls.arb_precision` with ``log2(c)`` bits to spare. ``None`` if ``M`` would exceed
    400 terms (an amplitude above about 150)."""
    beta, kind, omega, phi = form
    if c < a:
        return flint.arb(0)
    pi = flint.arb.pi()
    w = flint.arb(omega[0]) + flint.arb(omega[1]) * pi
    p = flint.arb(phi[0]) + flint.arb(phi[1]) * pi - (pi / 2 if kind == "sin" else 0)
    bb = flint.arb(beta)
    if not (abs(bb) < 150):
        return None  # about 400 Bessel terms and more: refused at once
    N = c - a + 1
    floor = (-abs(bb)).exp() * N  # every term is at least e^-|beta|
    M = max(4, int(float(abs(bb).upper())) + 4)
    while True:
        tail = _bessel_tail(beta, M)
        if tail is not None and tail * 2 * N <= floor * flint.arb(2) ** -(bits + 4):
            break
        M += max(4, M // 4)
        if M > _JA_TERMS:
            return None
    bes = bessel_i_list(bb, M)
    total = bes[0] * N
    for m in range(1, M + 1):
        # omega rational: m omega / 2 is never a multiple of pi; omega = q_pi pi: it is when 2 | m q_pi (exactly)
        whole = omega[0] == 0 and (omega[1] * m / 2).q == 1
        if whole:  # m omega k is a multiple of 2 pi: every term's phase is m phi'
            Cm = (m * p).cos() * N
        else:
            den = (m * w / 2).sin()
            if den.contains(0):
                Cm = flint.arb(0).union(flint.arb(N)).union(flint.arb(-N))
            else:
                Cm = (m * w * N / 2).sin() / den * (m * w * (a + c) / 2 + m * p).cos()
        total += 2 * bes[m] * Cm
    return total + flint.arb(0, (2 * N * tail).upper())


# -- a periodic term beside a smooth bias (Theorem 15f) ----------------------------------------
TWIST_ORDER = 12  # p: terms of the twisted summation formula, remainder through g^(12)


def periodic_split(tree):
    """``(tree_h, form)`` when ``b = h + beta sin(omega d + phi)`` (or ``cos``) with one such top-level term (the form
    of :func:`periodic_form`) beside at least one other, else ``None``."""
    if tree[0] != "add":
        return None
    found = [i for i, t in enumerate(tree[1]) if periodic_form(t) is not None]
    if len(found) != 1:
        return None
    rest = tuple(t for i, t in enumerate(tree[1]) if i != found[0])
    return (rest[0] if len(rest) == 1 else ("add", rest)), periodic_form(tree[1][found[0]])


def _twist_coefficients(z, p):
    """``a_j = [t^j] 1/(z e^t - 1)``, ``j < p``, for ``z != 1`` (acb balls): ``(z - 1) a_j = -sum_{i=1}^{j} z a_{j-i}/i!``."""
    inv = 1 / (z - 1)
    fact = [flint.arb(math.factorial(i)) for i in range(p)]
    out = [inv]
    for j in range(1, p):
        s = flint.acb(0)
        for i in range(1, j + 1):
            s += out[j - i] / fact[i]
        out.append(-z * s * inv)
    return out


_TWIST_CACHE = {}  # (m, omega, p, precision) -> (coefficients, K): they do not depend on the range (two sides, three heads)


def _twist_data(m, omega, p):
    """``(a_j(z), K_p)`` for ``z = e^{i m omega}`` at the current precision (cached), or ``None`` if ``z = 1`` is not
    excluded."""
    key = (m, omega, p, flint.ctx.prec)
    out = _TWIST_CACHE.get(key)
    if out is None:
        z = flint.acb(0, _phase(m, omega, 1)).exp()
        if (z - 1).contains(0):
            out = (None, None)
        else:
            coef = _twist_coefficients(z, p)
            K = flint.arb(0)
            for j, aj in enumerate(coef):
                K += abs(aj) / math.factorial(p - j)
            out = (coef, K)
        if len(_TWIST_CACHE) > 4096:
            _TWIST_CACHE.clear()
        _TWIST_CACHE[key] = out
    return out


def _phase(m, omega, k):
    """``m omega k`` as an ``arb`` to the current precision, ``omega = (q, q_pi)`` exact (``m k q`` is a fraction)."""
    with _more_bits(int(m * k).bit_length() + 10):
        out = flint.arb(omega[0] * m * k) + flint.arb(omega[1] * m * k) * flint.arb.pi()
    return out + 0  # rounded back to the caller's precision


def twisted_sum_arb(tree_h, m, omega, a, c, p=TWIST_ORDER, parts=None):
    """:math:`\\sum_{k=a}^{c} g(k) e^{i\\theta k}` with ``g = e^h`` (Theorem 15f): ``z^{c+1} q(c+1) - z^a q(a)`` with
    ``q = sum_{j<p} a_j g^{(j)}``, plus a disc of radius ``K_p p! sum_pieces (len) sup|g^(p)/p!|``,
    ``K_p = sum_{j<p} |a_j|/(p - j)!``; ``None`` if ``e^{i theta}`` is not proved ``!= 1`` or a bound is not finite.
    ``theta = m omega`` with ``omega = (q, q_pi)`` exact; the phases ``theta k`` are formed with ``log2 k`` more bits.
    ``parts``: :func:`twist_parts` of ``(tree_h, a, c, p)``, shared by every ``m``."""
    coef, K = _twist_data(m, omega, p)
    if coef is None:
        return None
    sup, cs_a, cs_c = twist_parts(tree_h, a, c, p) if parts is None else parts
    if sup is None:
        return None
    R = (K * math.factorial(p) * sup).upper()

    def q(cs):
        out = flint.acb(0)
        for j in range(p):
            out += coef[j] * math.factorial(j) * cs[j]
        return out

    za, zc = flint.acb(0, _phase(m, omega, a)).exp(), flint.acb(0, _phase(m, omega, c + 1)).exp()
    out = zc * q(cs_c) - za * q(cs_a)
    if not out.is_finite() or not R.is_finite():
        return None
    return out + flint.acb(flint.arb(0, R), flint.arb(0, R))


def twist_parts(tree_h, a, c, p=TWIST_ORDER):
    """What :func:`twisted_sum_arb` needs of ``g = e^h`` whatever ``z``: the bound of
    ``sum_pieces (len) sup|g^(p)/p!|`` on ``[a, c + 1]`` (``None`` if not finite) and the Taylor coefficients at
    ``a`` and ``c + 1``."""
    return sup_coeff_sum(tree_h, a, c + 1, p), _coeffs(tree_h, flint.arb(a), p), _coeffs(tree_h, flint.arb(c + 1), p)


class _less_bits:
    """Lower ``flint.ctx.prec`` by ``fewer`` bits for a block (the caller holds :func:`arb_precision`'s lock)."""

    def __init__(self, fewer):
        self.fewer = fewer

    def __enter__(self):
        self.old = flint.ctx.prec
        flint.ctx.prec = max(64, self.old - self.fewer)

    def __exit__(self, *exc):
        flint.ctx.prec = self.old


class _more_bits:
    """Raise ``flint.ctx.prec`` by ``extra`` bits for a block (the caller holds :func:`arb_precision`'s lock)."""

    def __init__(self, extra):
        self.extra = extra

    def __enter__(self):
        self.old = flint.ctx.prec
        flint.ctx.prec = self.old + self.extra

    def __exit__(self, *exc):
        flint.ctx.prec = self.old


def mixed_sum_arb(tree, split, lo, hi, N, prec, bits=64, why=None):
    """:math:`\\sum_{k=lo}^{hi} e^{b(k)}` for ``b = h + beta cos(omega d + phi')`` (Theorem 15f): terms below ``N`` one by
    one, beyond ``I_0(beta) sum g + 2 sum_{m<=M} I_m(beta) Re(e^{i m phi'} sum g z_m^k)`` with ``g = e^h``,
    ``z_m = e^{i m omega}`` (Theorem 15 for ``sum g``, :func:`twisted_sum_arb` for the rest), and
    ``[-1, 1] 2 sum_{m>M} I_m(|beta|) sum g``; ``None`` if a step is not proved (reason appended to ``why``)."""
    why = [] if why is None else why
    tree_h, (beta, kind, omega, phi) = split
    if hi < lo:
        return flint.arb(0)
    total = direct_sum_arb(tree, lo, min(hi, N - 1)) if lo < N else flint.arb(0)
    start = max(lo, N)
    if hi < start:
        return total
    if hi - start < 16:
        return total + direct_sum_arb(tree, start, hi)
    bb = flint.arb(beta)
    if not (abs(bb) < 150):
        why.append("the periodic term's amplitude is above 150 (the Jacobi-Anger series would need more than 400 terms)")
        return None
    damp = (-abs(bb)).exp()
    S0 = em_sum_arb(tree_h, start, hi, prec, scale=total * damp if lo < N else None, bits=bits, why=why)
    if S0 is None or not (S0 > 0):
        return None
    M = max(4, int(float(abs(bb).upper())) + 4)
    while True:
        tail = _bessel_tail(beta, M)
        if tail is not None and tail * 2 <= damp * flint.arb(2) ** -(bits + 5):
            break
        M += max(4, M // 4)
        if M > _JA_TERMS:
            why.append("the Jacobi-Anger series needs more than 400 Bessel terms")
            return None
    pi = flint.arb.pi()
    ph = flint.arb(phi[0]) + flint.arb(phi[1]) * pi - (pi / 2 if kind == "sin" else 0)
    bes = bessel_i_list(bb, M)
    out = bes[0] * S0
    parts = None
    for m in range(1, M + 1):
        if omega[0] == 0 and (omega[1] * m / 2).q == 1:  # m omega in 2 pi Z: the twisted sum is the plain one
            part = (m * ph).cos() * S0
        else:
            parts = twist_parts(tree_h, start, hi) if parts is None else parts
            tw = twisted_sum_arb(tree_h, m, omega, start, hi, parts=parts)
            if tw is None:
                why.append(f"the twisted sum of e^h e^(i {m} omega k) on [{_fmt(start)}, {_fmt(hi)}] was not enclosed "
                           f"(Theorem 15f's remainder of order {TWIST_ORDER} is not finite there)")
                return None
            part = (flint.acb(0, m * ph).exp() * tw).real
        out += 2 * bes[m] * part
    return total + out + flint.arb(0, (2 * tail * S0.upper()).upper())
