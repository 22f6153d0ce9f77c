"""Interval arithmetic over Arb, and a bisection prover for inequalities on boxes.

An :class:`Iv` is a closed interval ``[lo, hi]`` whose end points are exact ``arb``
numbers. Every operation computes each end point as an Arb ball and keeps the outer
end of that ball (``lower()`` of the lower end, ``upper()`` of the upper end), so the
result contains the exact image of the operands: inf-sup interval arithmetic with
outward rounding. Inf-sup (rather than Arb's midpoint-radius) arithmetic is exact on
expressions in which every variable occurs once, which lets a box that touches the
equality set of a tight inequality be decided (``0 * x`` is exactly 0).

:class:`Jet` carries an interval and its gradient over the box (forward-mode
differentiation over :class:`Iv`), for the mean-value form
``F(box) ⊂ F(mid) + Σ ∂_i F(box) (box_i - mid_i)``, whose overestimation shrinks
with the square of the box width.

:func:`prove` decides ``lhs <= rhs`` for every pair a claim returns, on every point of
a box: it evaluates both sides (and an optional certificate, a gap expression that
sympy has checked to equal ``rhs - lhs`` identically) on sub-boxes, bisects the
undecided ones within a budget, and looks for a counterexample at the centre and two
corners of each box. The verdict is ``"proved"`` only if every sub-box is decided;
``"refuted"`` comes with a point where ``lhs > rhs`` holds in ball arithmetic; anything
else is ``"undecided"``. Claims are written once, as functions of an ``ops`` namespace,
and evaluated with :data:`IV_OPS` (intervals), :data:`JET_OPS` (mean-value form) or
:data:`SYM_OPS` (sympy, to check a certificate).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from types import SimpleNamespace

import flint
import sympy as sp

from otprior._balls import arb_precision

PREC = 128  # bits of every Arb operation in these checks


def tol(x):
    """A tolerance or stopping rule of a check's harness (not a constant of the claim): the mutation test
    (``mutation.py``) leaves the constants inside ``tol(...)`` alone. Returns ``x``."""
    return x


def case(x):
    """An instance a check is run at (a size, a sample point, a grid, a slope), not a constant of the claim:
    the mutation test leaves the constants inside ``case(...)`` alone. Returns ``x``."""
    return x


class Undecidable(Exception):
    """An operation is not defined on the whole interval (division by an interval holding 0,
    log of a non-positive one): the box must be split."""


def _lo(x):
    return x.lower()


def _hi(x):
    return x.upper()


def _exact(value):
    """An exact ``arb`` for an int or a binary64 float; a tight interval for a Fraction."""
    if isinstance(value, Iv):
        return value
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, int):
        x = flint.arb(value)
        return Iv(x, x)
    if isinstance(value, float):
        x = flint.arb(value)
        return Iv(x, x)
    if isinstance(value, (Fraction, sp.Rational)):
        x = flint.arb(int(value.numerator if isinstance(value, Fraction) else value.p)) / flint.arb(
            int(value.denominator if isinstance(value, Fraction) else value.q)
        )
        return Iv(_lo(x), _hi(x))
    if isinstance(value, flint.arb):
        return Iv(_lo(value), _hi(value))
    raise TypeError(f"cannot make an interval of {value!r}")


class Iv:
    """The closed interval ``[lo, hi]`` with exact ``arb`` end points."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi=None):
        self.lo = lo
        self.hi = lo if hi is None else hi

    def __repr__(self):
        return f"Iv({self.lo.str(10, radius=False)}, {self.hi.str(10, radius=False)})"

    # arithmetic
    def __add__(self, other):
        if isinstance(other, Jet):
            return NotImplemented
        o = _exact(other)
        return Iv(_lo(self.lo + o.lo), _hi(self.hi + o.hi))

    __radd__ = __add__

    def __neg__(self):
        return Iv(-self.hi, -self.lo)

    def __sub__(self, other):
        if isinstance(other, Jet):
            return NotImplemented
        o = _exact(other)
        return Iv(_lo(self.lo - o.hi), _hi(self.hi - o.lo))

    def __rsub__(self, other):
        if isinstance(other, Jet):
            return NotImplemented
        return _exact(other) - self

    def __mul__(self, other):
        if isinstance(other, Jet):
            return NotImplemented
        o = _exact(other)
        products = [a * b for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        lo = min((_lo(p) for p in products), key=_Key)
        hi = max((_hi(p) for p in products), key=_Key)
        return Iv(lo, hi)

    __rmul__ = __mul__

    def inverse(self):
        if self.lo > 0 or self.hi < 0:
            return Iv(_lo(1 / self.hi), _hi(1 / self.lo))
        raise Undecidable("division by an interval that holds 0")

    def __truediv__(self, other):
        if isinstance(other, Jet):
            return NotImplemented
        return self * _exact(other).inverse()

    def __rtruediv__(self, other):
        return _exact(other) * self.inverse()

    def __pow__(self, k):
        if isinstance(k, Jet):
            return jet_exp(k * jet_log(Jet.lift(self, len(k.d))))
        if isinstance(k, int) and k >= 0:
            result = Iv(flint.arb(1))
            for _ in range(k):
                result = result * self
            return result
        if isinstance(k, int):
            return (self ** (-k)).inverse()
        return iv_exp(_exact(k) * iv_log(self))

    def __abs__(self):
        if self.lo >= 0:
            return self
        if self.hi <= 0:
            return -self
        return Iv(flint.arb(0), max(-self.lo, self.hi, key=_Key))

    # the ball methods the library's code calls (so that its own expressions can be evaluated on intervals)
    def exp(self):
        return iv_exp(self)

    def expm1(self):
        return iv_expm1(self)

    def log(self):
        return iv_log(self)

    def upper(self):
        return Iv(self.hi)

    def lower(self):
        return Iv(self.lo)

    def mid(self):
        return self

    def union(self, other):
        o = _exact(other)
        return Iv(min(self.lo, o.lo, key=_Key), max(self.hi, o.hi, key=_Key))

    # comparisons are true only when they hold for every point (as Arb's)
    def __gt__(self, other):
        return bool(self.lo > _exact(other).hi)

    def __lt__(self, other):
        return bool(self.hi < _exact(other).lo)

    def __ge__(self, other):
        return bool(self.lo >= _exact(other).hi)

    def __le__(self, other):
        return bool(self.hi <= _exact(other).lo)

    def __eq__(self, other):
        if not isinstance(other, (Iv, int, float, Fraction, flint.arb)) or isinstance(other, bool):
            return NotImplemented
        o = _exact(other)
        return bool(self.lo == self.hi == o.lo == o.hi)

    __hash__ = None

    # helpers
    def width(self):
        return float(_hi(self.hi - self.lo))

    def contains_zero(self):
        return self.lo <= 0 <= self.hi


class _Key:
    """Total order on exact arbs (for min/max)."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __lt__(self, other):
        return bool(self.x < other.x)


def _midpoint(iv):
    m = (iv.lo + iv.hi) / 2  # exact at PREC for the dyadic boxes of prove()
    return Iv(_lo(m), _hi(m))


def _monotone(f, increasing=True):
    def g(x):
        x = _exact(x)
        a, b = f(x.lo), f(x.hi)
        return Iv(_lo(a), _hi(b)) if increasing else Iv(_lo(b), _hi(a))

    return g


def iv_exp(x):
    return _monotone(lambda a: a.exp())(x)


def iv_expm1(x):
    return _monotone(lambda a: a.expm1())(x)


def iv_log(x):
    x = _exact(x)
    if not x.lo > 0:
        raise Undecidable("log of an interval that reaches 0")
    return _monotone(lambda a: a.log())(x)


def _exprel_point(a):
    # (e^a - 1)/a = int_0^1 e^(a t) dt, increasing in a; 1 at a = 0
    return flint.arb(1) if a == 0 else a.expm1() / a


def _exprel_prime_point(a):
    # d/da (e^a - 1)/a = int_0^1 t e^(a t) dt = ((a - 1) e^a + 1) / a^2, increasing in a; 1/2 at 0
    return flint.arb(1) / 2 if a == 0 else ((a - 1) * a.exp() + 1) / (a * a)


def iv_exprel(x):
    """``(e^x - 1)/x`` (1 at 0): increasing, so its end points are those of the interval."""
    return _monotone(_exprel_point)(x)


def iv_exprel_prime(x):
    return _monotone(_exprel_prime_point)(x)


def iv_hurwitz_zeta(s, a):
    """Hurwitz zeta ``zeta(s, a)`` by Arb (whose enclosures are rigorous).

    For ``s > 1`` and ``a >= 1`` every term ``(k + a)^-s`` decreases in ``s`` (``log(k+a) >= 0``)
    and in ``a``, so the end points are ``zeta(s_hi, a_hi)`` and ``zeta(s_lo, a_lo)``; otherwise
    Arb is called on a ball holding both intervals."""
    s, a = _exact(s), _exact(a)
    if s.lo > 1 and a.lo >= 1:
        lo, hi = s.hi.zeta(a.hi), s.lo.zeta(a.lo)
        if lo.is_finite() and hi.is_finite():
            return Iv(_lo(lo), _hi(hi))
    z = s.lo.union(s.hi).zeta(a.lo.union(a.hi))
    if not z.is_finite():
        raise Undecidable("zeta not finite on the box")
    return Iv(_lo(z), _hi(z))


def iv_max0(x):
    x = _exact(x)
    zero = flint.arb(0)
    return Iv(max(x.lo, zero, key=_Key), max(x.hi, zero, key=_Key))


IV_OPS = SimpleNamespace(
    exp=iv_exp, expm1=iv_expm1, log=iv_log, exprel=iv_exprel, zeta=iv_hurwitz_zeta, max0=iv_max0, abs=abs,
    const=_exact,
)


# --- forward-mode differentiation over intervals (mean-value form)


class Jet:
    """A value and its gradient, each an interval over the whole box."""

    __slots__ = ("v", "d")

    def __init__(self, v, d):
        self.v, self.d = v, d

    @staticmethod
    def lift(other, n):
        if isinstance(other, Jet):
            return other
        zero = _exact(0)
        return Jet(_exact(other), (zero,) * n)

    def __add__(self, other):
        o = Jet.lift(other, len(self.d))
        return Jet(self.v + o.v, tuple(a + b for a, b in zip(self.d, o.d, strict=True)))

    __radd__ = __add__

    def __neg__(self):
        return Jet(-self.v, tuple(-a for a in self.d))

    def __sub__(self, other):
        return self + (-Jet.lift(other, len(self.d)))

    def __rsub__(self, other):
        return Jet.lift(other, len(self.d)) - self

    def __mul__(self, other):
        o = Jet.lift(other, len(self.d))
        return Jet(self.v * o.v, tuple(a * o.v + self.v * b for a, b in zip(self.d, o.d, strict=True)))

    __rmul__ = __mul__

    def inverse(self):
        r = self.v.inverse()
        r2 = -(r * r)
        return Jet(r, tuple(a * r2 for a in self.d))

    def __truediv__(self, other):
        return self * Jet.lift(other, len(self.d)).inverse()

    def __rtruediv__(self, other):
        return Jet.lift(other, len(self.d)) * self.inverse()

    def __pow__(self, k):
        if isinstance(k, int) and k >= 0:
            result = Jet.lift(1, len(self.d))
            for _ in range(k):
                result = result * self
            return result
        if isinstance(k, int):
            return (self ** (-k)).inverse()
        return jet_exp(Jet.lift(k, len(self.d)) * jet_log(self))


def _jet_method(name):
    def method(self, *args):
        return {"exp": jet_exp, "expm1": jet_expm1, "log": jet_log}[name](self)

    return method


for _name in ("exp", "expm1", "log"):
    setattr(Jet, _name, _jet_method(_name))
Jet.upper = Jet.lower = Jet.mid = lambda self: self
Jet.__gt__ = lambda self, other: self.v > Jet.lift(other, len(self.d)).v
Jet.__lt__ = lambda self, other: self.v < Jet.lift(other, len(self.d)).v


def _chain(x, value, derivative):
    return Jet(value, tuple(a * derivative for a in x.d))


def jet_exp(x):
    e = iv_exp(x.v)
    return _chain(x, e, e)


def jet_expm1(x):
    return _chain(x, iv_expm1(x.v), iv_exp(x.v))


def jet_log(x):
    return _chain(x, iv_log(x.v), x.v.inverse())


def jet_exprel(x):
    return _chain(x, iv_exprel(x.v), iv_exprel_prime(x.v))


def jet_abs(x):
    if x.v.lo >= 0:
        return x
    if x.v.hi <= 0:
        return -x
    # |x| is 1-Lipschitz: its derivative lies in the hull of +-dx
    hull = tuple(Iv(min(a.lo, -a.hi, key=_Key), max(a.hi, -a.lo, key=_Key)) for a in x.d)
    return Jet(abs(x.v), hull)


JET_OPS = SimpleNamespace(exp=jet_exp, expm1=jet_expm1, log=jet_log, exprel=jet_exprel, abs=jet_abs, const=_exact)

SYM_OPS = SimpleNamespace(
    exp=sp.exp,
    expm1=lambda x: sp.exp(x) - 1,
    log=sp.log,
    exprel=lambda x: (sp.exp(x) - 1) / x,
    zeta=sp.zeta,
    max0=lambda x: sp.Max(0, x),
    abs=sp.Abs,
    const=lambda v: sp.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else sp.sympify(v),
)


# --- the prover


@dataclass(frozen=True)
class Claim:
    """An inequality claimed in ``proofs/``: ``lhs <= rhs`` for every pair, on the box.

    ``sides(ops, **point)`` returns a list of ``(lhs, rhs)``; ``certificate(ops, **point)``
    (optional) returns one gap expression per pair, each of which sympy must find equal
    to ``rhs - lhs`` before it is used (a form written so that interval arithmetic sees
    its sign). ``centered`` selects the mean-value form for the sides.
    """

    name: str
    source: str
    statement: str
    domain: dict
    sides: object
    certificate: object = None
    centered: bool = False
    budget: int = 2000
    tight: tuple = ()  # ((point, pair index, rel[, abs]), ...): |rhs - lhs| <= rel |rhs| + abs there (attained or nearly)


@dataclass(frozen=True)
class InequalityRecord:
    """What :func:`prove` established: the claim, its domain, the boxes used, the verdict."""

    claim: str
    source: str
    statement: str
    domain: dict
    boxes: int
    verdict: str  # "proved", "refuted" or "undecided"
    undecided_boxes: int = 0
    counterexample: dict | None = None
    certificate_checked: bool | None = None
    notes: list = field(default_factory=list)


def certificate_holds(claim) -> bool:
    """sympy's verdict that every certificate gap equals ``rhs - lhs`` identically."""
    if claim.certificate is None:
        return False
    symbols = {name: sp.Symbol(name, positive=True) for name in claim.domain}
    pairs = claim.sides(SYM_OPS, **symbols)
    gaps = claim.certificate(SYM_OPS, **symbols)
    if len(gaps) != len(pairs):
        return False
    for (lhs, rhs), gap in zip(pairs, gaps, strict=True):
        if gap is not None and _rational_form(rhs - lhs - gap) != 0:
            return False
    return True


def _rational_form(expr):
    """``expr`` as one cancelled fraction, with every ``exp`` split over the terms of its argument."""
    expr = expr.replace(sp.exp, lambda arg: sp.exp(sp.expand(sp.cancel(arg))))
    expr = sp.expand(expr, power_exp=True, mul=False, multinomial=False)
    expr = sp.powsimp(expr, combine="base")
    return sp.cancel(sp.together(expr))


def tightness_failures(claim):
    """The entries ``(point, index, rel[, abs])`` of ``claim.tight`` where ``|rhs - lhs| <= rel |rhs| + abs``
    is not proved (in balls).

    A bound that is attained (or approached) at a point cannot be loosened without this failing: the
    check of an inequality is then sharp in both directions (a stronger claim is refuted by :func:`prove`,
    a weaker one fails here)."""
    failures = []
    with arb_precision(PREC):
        for point, index, rel, *absolute in claim.tight:
            box = {n: _exact(Fraction(v) if isinstance(v, str) else v) for n, v in point.items()}
            try:
                lhs, rhs = (_exact(x) for x in claim.sides(IV_OPS, **box)[index])
                gap, slack = rhs - lhs, _exact(rel) * abs(rhs) + _exact(absolute[0] if absolute else 0)
                ok = bool(gap.hi <= slack.lo and gap.lo >= -slack.lo)  # |rhs - lhs| <= rel |rhs|, holding either way
            except Undecidable:
                ok = False
            if not ok:
                failures.append((point, index, rel))
    return failures


def _box_of(domain):
    return {name: Iv(flint.arb(lo), flint.arb(hi)) for name, (lo, hi) in domain.items()}


def _evaluate_iv(claim, box):
    return claim.sides(IV_OPS, **box)


def _evaluate_centered(claim, box):
    """Enclosures of ``rhs - lhs`` over the box in the mean-value form, intersected with the direct ones."""
    names = list(box)
    n = len(names)
    jets = {}
    for i, name in enumerate(names):
        d = tuple(_exact(1 if j == i else 0) for j in range(n))
        jets[name] = Jet(box[name], d)
    mid = {name: _midpoint(box[name]) for name in names}
    over_box = claim.sides(JET_OPS, **jets)
    at_mid = claim.sides(IV_OPS, **mid)
    out = []
    for (jl, jr), (ml, mr) in zip(over_box, at_mid, strict=True):
        jet = Jet.lift(jr, n) - Jet.lift(jl, n)
        value = _exact(mr) - _exact(ml)
        for name, g in zip(names, jet.d, strict=True):
            value = value + g * (box[name] - mid[name])
        out.append(Iv(max(value.lo, jet.v.lo, key=_Key), min(value.hi, jet.v.hi, key=_Key)))
    return out


def _decided(gaps, certificates):
    for i, gap in enumerate(gaps):
        if gap.lo >= 0:
            continue
        if certificates is not None and certificates[i] is not None and _exact(certificates[i]).lo >= 0:
            continue
        return False
    return True


def _certificates_decide(claim, box):
    """Every certificate gap is >= 0 on the box (the gaps are sympy-identical to rhs - lhs where both are
    defined; a side may be undefined on a face of the box, e.g. a division by m0 at m0 = 0, where the claim
    is read as its limit)."""
    try:
        certificates = claim.certificate(IV_OPS, **box)
    except Undecidable:
        return False
    return all(c is not None and _exact(c).lo >= 0 for c in certificates)


def _refuted_at(claim, point):
    box = {name: Iv(v, v) for name, v in point.items()}
    try:
        pairs = _evaluate_iv(claim, box)
    except Undecidable:
        return None
    for i, (lhs, rhs) in enumerate(pairs):
        lhs, rhs = _exact(lhs), _exact(rhs)
        if lhs.lo > rhs.hi:
            return i
    return None


def prove(claim: Claim, budget: int | None = None) -> InequalityRecord:
    """Prove or refute ``lhs <= rhs`` on ``claim.domain`` by bisection, within ``budget`` boxes.

    A box is decided when, for every pair, the interval of ``lhs`` lies at or below that
    of ``rhs``, or when the certificate gap (checked by sympy to equal ``rhs - lhs``) has a
    non-negative lower end. Otherwise the centre and two corners are tried as
    counterexamples (a point where ``lhs > rhs`` in ball arithmetic refutes the claim),
    and the box is split in half along its widest side (relative to the domain).
    """
    budget = claim.budget if budget is None else budget
    with arb_precision(PREC):
        use_certificate = certificate_holds(claim)
        widths = {name: float(hi) - float(lo) or 1.0 for name, (lo, hi) in claim.domain.items()}
        stack = deque([_box_of(claim.domain)])  # breadth first: counterexamples are sought at every scale
        boxes, stuck = 0, 0
        while stack and boxes < budget:
            box = stack.popleft()
            boxes += 1
            try:
                if use_certificate and _certificates_decide(claim, box):
                    continue
                gaps = [_exact(rhs) - _exact(lhs) for lhs, rhs in _evaluate_iv(claim, box)]
                if claim.centered and not _decided(gaps, None):
                    gaps = _evaluate_centered(claim, box)
                certificates = claim.certificate(IV_OPS, **box) if use_certificate else None
                if _decided(gaps, certificates):
                    continue
            except Undecidable:
                pass
            corners = [
                {n: _midpoint(v).lo for n, v in box.items()},
                {n: v.lo for n, v in box.items()},
                {n: v.hi for n, v in box.items()},
            ]
            for point in corners:
                if _refuted_at(claim, point) is not None:
                    return InequalityRecord(
                        claim.name, claim.source, claim.statement, _domain_str(claim.domain), boxes, "refuted",
                        counterexample={n: float(v) for n, v in point.items()}, certificate_checked=use_certificate,
                    )
            name = max(box, key=lambda k: box[k].width() / widths[k])
            if box[name].width() == 0:  # a point that interval arithmetic cannot decide
                stuck += 1
                continue
            m = _midpoint(box[name]).lo
            for half in (Iv(box[name].lo, m), Iv(m, box[name].hi)):
                stack.append({**box, name: half})
        verdict = "proved" if not stack and not stuck else "undecided"
        notes = [
            "undecided box " + ", ".join(f"{n} in [{float(v.lo):.6g}, {float(v.hi):.6g}]" for n, v in box.items())
            for box in list(stack)[:3]
        ]
        return InequalityRecord(
            claim.name, claim.source, claim.statement, _domain_str(claim.domain), boxes, verdict,
            undecided_boxes=len(stack) + stuck, certificate_checked=use_certificate, notes=notes,
        )


def _domain_str(domain):
    return {name: (float(lo), float(hi)) for name, (lo, hi) in domain.items()}


# --- the library's own expressions, evaluated on intervals, jets or sympy


class SymArb:
    """A sympy expression behind the ball methods the library calls (``exp()``, ``log()``, ``upper()``...),
    so that a library function can be run on symbols and its expression compared with a proof's."""

    __slots__ = ("e",)

    def __init__(self, e):
        self.e = e.e if isinstance(e, SymArb) else sp.sympify(e)

    def _bin(self, other, f):
        return SymArb(f(self.e, SymArb(other).e))

    def __add__(self, o):
        return self._bin(o, lambda a, b: a + b)

    def __radd__(self, o):
        return self._bin(o, lambda a, b: b + a)

    def __sub__(self, o):
        return self._bin(o, lambda a, b: a - b)

    def __rsub__(self, o):
        return self._bin(o, lambda a, b: b - a)

    def __mul__(self, o):
        return self._bin(o, lambda a, b: a * b)

    def __rmul__(self, o):
        return self._bin(o, lambda a, b: b * a)

    def __truediv__(self, o):
        return self._bin(o, lambda a, b: a / b)

    def __rtruediv__(self, o):
        return self._bin(o, lambda a, b: b / a)

    def __pow__(self, o):
        return self._bin(o, lambda a, b: a**b)

    def __rpow__(self, o):
        return self._bin(o, lambda a, b: b**a)

    def __neg__(self):
        return SymArb(-self.e)

    def exp(self):
        return SymArb(sp.exp(self.e))

    def expm1(self):
        return SymArb(sp.exp(self.e) - 1)

    def log(self):
        return SymArb(sp.log(self.e))

    def upper(self):
        return self

    lower = mid = upper

    def union(self, other):
        return SymPair(self, SymArb(other))

    def __gt__(self, other):  # the library's "certainly positive" tests take the generic branch
        return True

    __ge__ = __gt__

    def __lt__(self, other):
        return False

    __le__ = __lt__

    def __eq__(self, other):
        return False

    __hash__ = None


class SymPair:
    """The two ends of a bracket the library returns as ``lo.union(hi)``."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def __add__(self, o):
        return SymPair(self.lo + o, self.hi + o)

    __radd__ = __add__


def library_function(fn, **overrides):
    """``fn`` (a library function or method) with some of its module's globals replaced: e.g. ``flint`` by a
    namespace whose ``arb`` makes intervals, so that the library's own expression is evaluated on a box."""
    import types

    fn = getattr(fn, "__func__", fn)
    return types.FunctionType(fn.__code__, {**fn.__globals__, **overrides}, fn.__name__, fn.__defaults__, fn.__closure__)


class _NoPrecision:
    def __init__(self, *args):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def ball_namespace(kind):
    """Replacements for ``flint``, ``arb_from_float`` and ``arb_precision`` that make the library's ball code
    compute on intervals (``"iv"``: :class:`Iv`/:class:`Jet`) or on sympy (``"sym"``: :class:`SymArb`)."""
    from types import SimpleNamespace

    def make(x):
        if isinstance(x, str):  # flint.arb("nan"): the library's "not decided" branch
            raise Undecidable(f"the library's code took its {x!r} branch")
        if kind == "sym":
            return SymArb(x)
        return x if isinstance(x, (Iv, Jet)) else _exact(x)

    flint_ns = SimpleNamespace(arb=make, ctx=SimpleNamespace(prec=PREC))
    return {"flint": flint_ns, "arb_from_float": make, "arb_precision": _NoPrecision}


def sym_eval(expr, env, ops=None):
    """Evaluate a sympy expression (sums, products, powers, exp, log) on intervals: ``env`` maps each
    symbol's name to its value. Used to evaluate a derivative that sympy derived from a claim's own
    expression, after simplification (so that interval arithmetic sees its sign)."""
    ops = ops or IV_OPS
    if expr.is_Symbol:
        return env[expr.name]
    if expr.is_Rational:
        return _exact(Fraction(int(expr.p), int(expr.q)))
    if expr.is_Add:
        out = 0
        for a in expr.args:
            out = out + sym_eval(a, env, ops)
        return out
    if expr.is_Mul:
        out = 1
        for a in expr.args:
            out = out * sym_eval(a, env, ops)
        return out
    if expr.is_Pow:
        base, e = expr.args
        if e.is_Integer:
            return sym_eval(base, env, ops) ** int(e)
        return sym_eval(base, env, ops) ** sym_eval(e, env, ops)
    if isinstance(expr, sp.exp):
        return ops.exp(sym_eval(expr.args[0], env, ops))
    if isinstance(expr, sp.log):
        return ops.log(sym_eval(expr.args[0], env, ops))
    raise TypeError(f"cannot evaluate {expr!r} on intervals")
