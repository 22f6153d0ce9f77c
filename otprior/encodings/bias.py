"""Any relative bias: an expression (parsed by ``otprior.expression``) or a Python callable."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import flint
import mpmath
import numpy as np

from .._balls import Enclosure, arb_precision, enclosure_from_arb, is_tight
from .._registry import param
from .._validation import DomainError, PrecisionError, check_real, real_array
from ..expression import (
    DEFAULT_MEMORY_BUDGET,
    DEFAULT_TIME_BUDGET,
    BudgetExceeded,
    bias_text,
    check_bias_values,
    import_sympy,
    parse_bias,
    run_budgeted,
)
from ._base import DIRECT_MAX, Encoding, MassEnclosures, Verdict, check_lengths, nonneg, register
from ._bias_float import (
    ACCEPT,
    _ja_plan,
    _mixed_plan,
    lambdify_far,
    mixed_log_sum,
    periodic_log_sum,
    running_error,
    weights_error_ok,
    weights_error_ok_lengths,
)
from ._bias_tail import (
    PROVED_ACCEPT,
    TAYLOR_ACCEPT,
    Unsupported,
    _eval,
    _interval,
    _logsumexp,
    _sides,
    anchored_log_sum,
    anchored_sum_arb,
    compile_bias,
    direct_sum_arb,
    float_tail_log,
    infinite_sum_arb,
    log_sum_bounds,
    mixed_sum_arb,
    monotone_on,
    periodic_form,
    periodic_split,
    periodic_sum_arb,
    point_interval,
    range_sum_arb,
    short_range,
    taylor_pieces_log,
)

__all__ = ["Bias", "BiasMasses"]

_EM_HEADS = (64, 256, 1024)  # certified route: terms summed one by one before Theorem 15's tail
_FLOAT_HEAD = 1 << 12  # float route: terms summed directly (numpy) before the tail
_EM_BITS = 55  # certified masses: relative radius at most 2^-55
_DOMINANCE = 746  # e^-746 < 2^-1076: a mass below it has the double enclosure [0, 2^-1074], the tightest there is
_FLOAT_GAP = 750  # the float route's dominance gap: 746 and 4 for ends read in double (|b| eps) at points


def _unit(e):
    """A mass enclosure with its outward-rounded ends clipped to [0, 1] (a proved end beyond says nothing more)."""
    return dataclasses.replace(e, lo=min(max(e.lo, 0.0), 1.0), hi=min(max(e.hi, 0.0), 1.0))


# a user bias's enclosures have every registered encoding's fields (window_mass, distant_mass, route, exact):
# one result type, the old name kept for code that imported it
BiasMasses = MassEnclosures


@functools.lru_cache(maxsize=128)
def _compiled(b, d):
    """The bias's tree for the Arb evaluators (``None``: a node outside the grammar)."""
    try:
        return compile_bias(b, d)
    except Unsupported:
        return None


@functools.lru_cache(maxsize=128)
def _linear_bias(b, d):
    """``beta`` as an exact fraction when ``b = alpha + beta d`` with numbers ``alpha``, ``beta``, else ``None``."""
    from fractions import Fraction

    sp = import_sympy()
    try:
        if not b.is_polynomial(d):
            return None
        poly = sp.Poly(b, d)
    except Exception:  # sympy raises a variety of errors on expressions it cannot read as polynomials
        return None
    if poly.degree() > 1 or not all(c.is_Number for c in poly.all_coeffs()):
        return None
    beta = poly.coeff_monomial(d)
    return Fraction(sp.Rational(beta).p, sp.Rational(beta).q)


@functools.lru_cache(maxsize=256)
def _log_distance_form(b, d):
    """``(alpha, offset)`` as doubles when ``b = c + beta log(g d + a)`` with numbers ``beta < 0``, ``g > 0``, ``a > 0``
    (the log-distance prior ``(d + o)^-alpha``, ``alpha = -beta``, ``o = a/g``: ``c + beta log g`` cancels in every
    mass) within the log-distance module's domain (``0 < alpha <= 1e15``, ``1e-300 <= o <= 1e300``), else ``None``."""
    sp = import_sympy()
    try:
        _, term = b.as_independent(d, as_Add=True)
        beta, rest = term.as_coeff_Mul()
        if not (isinstance(rest, sp.log) and beta.is_Number and beta < 0):
            return None
        arg = rest.args[0]
        if not arg.is_polynomial(d):
            return None
        poly = sp.Poly(arg, d)
        if poly.degree() != 1 or not all(c.is_number for c in poly.all_coeffs()):
            return None
        g, a = poly.all_coeffs()
        if not (bool(g > 0) and bool(a > 0)):
            return None
        alpha, offset = float(-beta), float(a / g)
    except Exception:  # sympy raises a variety of errors on expressions it cannot read in this form
        return None
    if not (0.0 < alpha <= 1e15 and 1e-300 <= offset <= 1e300):
        return None
    return alpha, offset


def _dominant_masses(tree, window, n):
    """``(m, D)`` as Arb balls when one side outweighs the other by more than ``e^746`` (Theorem 15d,
    ``proofs/closed_form_tails.md``), else ``None``.

    With ``S_W = sum_{k<W} e^{b(k)}``, ``T = sum_{W<=k<n} e^{b(k)}`` and bounds ``L <= log <= U`` of each
    (:func:`log_sum_bounds`): ``m = S_W/(S_W + T) <= S_W/T <= e^{U_S - L_T}``, and ``D <= e^{U_T - L_S}`` likewise;
    the other mass is one minus it. Below ``e^-746`` the double enclosure ``[0, 2^-1074]`` is the tightest possible,
    so nothing more is asked of the sums (a growing bias at ``n = 1e300``, ``e^{-e^d}`` past its first terms)."""
    if n <= window:
        return None
    out = _dominant_at(tree, window, n, 96)
    if out is None and n.bit_length() > 64:
        # log2 n more bits: the arguments of exp (d/1000 at d = 1e300) are then exact to well below 1
        out = _dominant_at(tree, window, n, 96 + n.bit_length())
    return out


def _whole_upper(tree, a, c):
    """``log(c - a + 1) + sup b`` over ``[a, c]`` from one interval bound (Theorem 15d(ii) with a single piece), or ``None``."""
    try:
        U = _interval(tree, a, c)[1]
    except (ValueError, ZeroDivisionError, ArithmeticError):
        return None
    return None if U is None or not U.is_finite() else flint.arb((flint.arb(c - a + 1).log() + U).upper())


def _dominant_at(tree, window, n, prec):
    """:func:`_dominant_masses` at ``prec`` bits. A side's upper bound is tried first from one interval bound over the
    whole side (Theorem 15d(ii) with a single piece: enough where the side is short, ``W = n - 1e5`` at ``1e300``), then
    on the ~60 pieces of :func:`_sides`."""
    with arb_precision(prec):
        small = flint.arb(0).union(flint.arb(-_DOMINANCE).exp())
        Ls = log_sum_bounds(tree, 0, window - 1, upper=False)[0]
        Lt = log_sum_bounds(tree, window, n - 1, upper=False)[0]
        # a side's upper bound is formed only where the other side's lower bound could beat it (U >= L)
        if Lt is not None and (Ls is None or Lt - Ls > _DOMINANCE):
            Us = _whole_upper(tree, 0, window - 1)
            if Us is None or not Lt - Us > _DOMINANCE:
                Us = log_sum_bounds(tree, 0, window - 1, lower=False)[1]
            if Us is not None and Lt - Us > _DOMINANCE:
                return small, 1 - small
        if Ls is not None and (Lt is None or Ls - Lt > _DOMINANCE):
            Ut = _whole_upper(tree, window, n - 1)
            if Ut is None or not Ls - Ut > _DOMINANCE:
                Ut = log_sum_bounds(tree, window, n - 1, lower=False)[1]
            if Ut is not None and Ls - Ut > _DOMINANCE:
                return 1 - small, small
    return None


@functools.lru_cache(maxsize=128)
def _periodic(tree):
    return periodic_form(tree)


@functools.lru_cache(maxsize=128)
def _split(tree):
    return periodic_split(tree)


def _periodic_balls(tree, window, n, why):
    """``(m, D)`` of ``b = beta sin(omega d + phi)`` (or ``cos``) by Theorem 15e's Jacobi-Anger closed form, as
    Arb balls of relative radius below ``2^-55``; ``None`` for any other bias (or an amplitude too large)."""
    form = _periodic(tree)
    if form is None:
        return None
    def side(a, c):
        # a few terms one by one: the Jacobi-Anger series of one term e^(149 sin k) ~ e^-149 adds terms I_m ~ e^149,
        # a cancellation of e^298 beyond the working precision (149 sin(d) at W = n - 1 was refused)
        return direct_sum_arb(tree, a, c) if c - a < _EM_HEADS[0] else periodic_sum_arb(form, a, c)

    with arb_precision(110 + n.bit_length() + 16):
        S_W = side(0, window - 1)
        T = side(window, n - 1)
        if S_W is None or T is None:
            why.append(f"the Jacobi-Anger series of e^({form[0]} {form[1]}(...)) needs more than 400 Bessel terms "
                       "(an amplitude above about 150)")
            return None
        m = 1 / (1 + T / S_W)
        D = T / (S_W + T) if T == 0 else 1 / (1 + S_W / T)
        if is_tight(m, _EM_BITS) and is_tight(D, _EM_BITS):
            return m, D
    why.append("the Jacobi-Anger closed form was not tight to 2^-55")
    return None


def _float_masses(sums):
    """``(m, D)`` from two float sums ``(L, V, rel)`` (each ``V e^L``), or ``None`` when either is missing or its error
    bound ``rel`` exceeds ``ACCEPT`` (``2^-38``): ``m = 1/(1 + r)``, ``D = 1/(1 + 1/r)``, ``r = T/S`` formed as
    ``(V_T/V_S) e^{L_T - L_S}`` (no logarithm of the sums: ``log T = 690`` at ``n = 1e300`` would cost 690 eps)."""
    if any(s is None or not (s[1] > 0) or not math.isfinite(s[1]) for s in sums):
        return None
    (Ls, Vs, es), (Lt, Vt, et) = sums
    if not (es <= ACCEPT and et <= ACCEPT):
        # rel bounds each sum's relative error, so S lies in V_S e^{L_S} [1 - rel_S, 1 + rel_S] (a lower end of 0 when
        # rel_S >= 1: a bound, not a value): when the upper end of one side is below e^-800 of the lower end of the
        # other, the small mass is below 2^-1074 and 0.0 lies in the tightest double enclosure (as in Theorem 15d)
        ls, lt = Ls + math.log(Vs), Lt + math.log(Vt)
        lo_s = ls + math.log1p(-es) if es < 1 else -math.inf
        lo_t = lt + math.log1p(-et) if et < 1 else -math.inf
        if ls + math.log1p(es) - lo_t < -800:
            return 0.0, 1.0
        if lt + math.log1p(et) - lo_s < -800:
            return 1.0, 0.0
        return None
    Vs, Vt = float(Vs), float(Vt)
    r = (Vt / Vs) * math.exp(Lt - Ls) if abs(Lt - Ls) < 700 else math.nan
    if 0.0 < r < math.inf:  # no logarithm: D = 9.6e-301 of 0.5*sin(d) at W = n - 1 = 1e300 keeps its last digits
        return 1.0 / (1.0 + r), (r / (1.0 + r) if r < 1 else 1.0 / (1.0 + 1.0 / r))
    lr = (Lt - Ls) + math.log(Vt) - math.log(Vs)
    return float(np.exp(-np.logaddexp(0.0, lr))), float(np.exp(-np.logaddexp(0.0, -lr)))


def _steep_at_window(b, d, window):
    """Whether ``b'(W - 1) W > log W + 32`` in double (a cheap test, no proof: Theorem 15j then keeps less than the
    window side's whole range, and is tried before Theorem 15's float)."""
    with np.errstate(all="ignore"):
        try:
            s = float(np.asarray(_numpy_fns(b, d)[1](np.array([float(window - 1)])), dtype=float).ravel()[0])
        except (ValueError, TypeError, OverflowError):
            return False
    return bool(s > 0 and s * window > math.log(window) + 32)


_NEGLIGIBLE = 2.0**-60  # Theorem 15k: an additive term within [-2^-60, 2^-60] on a range is left out of its sum
_NEGLIGIBLE_WIDE = 2.0**-58  # Theorem 15k, the certified route's second try: the ball e^{+-2^-58} (1/8 of its 2^-55)
_NEGLIGIBLE_FLOAT = 2.0**-48  # Theorem 15k, the float route's second try: e^{2^-48} - 1 (1/1024 of its 2^-38)


@functools.lru_cache(maxsize=256)  # a pure function of the expression and the exact range (sympy and Arb work per call)
def _without_negligible_terms(b, d, a, c, limit=_NEGLIGIBLE):
    """``b`` less its top-level additive terms ``p`` whose interval bound on ``[a, c]`` (Theorem 15d(i), Arb, outward
    rounded) lies within ``[-limit, limit]`` (``2^-60`` by default), or ``None`` where there is none (Theorem 15k,
    ``proofs/closed_form_tails.md``: ``sum e^{h + p} = (1 + theta) sum e^h``, ``|theta| <= e^{limit} - 1``; each term's
    bounds are added, rounded up, so that the dropped terms together lie within ``[-limit, limit]``). A double pre-test at ``a`` and ``c`` skips the
    terms that are plainly not small. ``exp(-exp(d/1000))`` beside ``-1.1 log(d + 1)`` beyond ``d = 4096``
    (``<= e^{-60}``): its complex boxes (Theorem 15i) and wide Taylor balls (Theorem 15) are unbounded where the term
    itself is below every double.

    A bound proved on a range holds on every range inside it: where ``a`` lies beyond the float's head (``4096``) and the
    terms that pass the pre-test at ``a`` and ``c`` pass it at ``4096`` too, they are proved on ``[4096, c]`` (one interval
    bound each, as on ``[a, c]``), and a later range inside a proved one (the float's window side ``[4096, W - 1]``
    after its distant side ``[W, n - 1]``) drops the same terms without a new bound. Where a term fails on the wider
    range, ``[a, c]`` itself is tried. The proved ranges are kept with the cache (cleared with it)."""
    if not b.is_Add:
        return None
    terms = _d_terms(b, d)
    if len(terms) < 2:  # dropping the only term that varies is never asked (None below whatever its bound)
        return None
    head = _FLOAT_HEAD if a > _FLOAT_HEAD else None
    pts = np.array([float(a), float(c)] + ([float(head)] if head is not None else []))
    small, wide = [], head is not None
    for i, (_, value, tree) in enumerate(terms):
        with np.errstate(all="ignore"):
            try:
                ends = (np.asarray(value(pts), dtype=float) * np.ones(pts.size)).tolist()
            except (ValueError, TypeError, OverflowError):
                continue
        if not (abs(ends[0]) <= 1e-15 and abs(ends[1]) <= 1e-15) or tree is None:
            continue
        small.append(i)
        wide = wide and abs(ends[2]) <= 1e-15
    if not small:
        return None
    if len(_NEGLIGIBLE_RANGES) > 256:  # bounded: a few ranges of a few expressions are all a call reads
        _NEGLIGIBLE_RANGES.clear()
    proved = _NEGLIGIBLE_RANGES.setdefault((b, d, limit), [])
    for x, y, dropped in proved:  # a range inside a proved one: the same terms, no new bound
        if x <= a and c <= y and dropped.issuperset(small):
            return _less_terms_of(b, terms, small)
    for x in ([head, a] if wide else [a]):
        drop = _proved_small(terms, small, x, c, limit)
        if len(proved) >= 16:
            proved.clear()
        proved.append((x, c, frozenset(drop)))
        if len(drop) == len(small):  # every candidate dropped: as on [a, c] itself (a bound on it is no wider)
            break
    return _less_terms_of(b, terms, drop)


_NEGLIGIBLE_RANGES = {}  # (b, d, limit) -> [(x, y, indices of terms proved within the limit on [x, y])]
_negligible_cache_clear = _without_negligible_terms.cache_clear


def _clear_negligible():
    """``_without_negligible_terms.cache_clear()``: its cache and the proved ranges (a first call proves afresh)."""
    _negligible_cache_clear()
    _NEGLIGIBLE_RANGES.clear()


_without_negligible_terms.cache_clear = _clear_negligible


def _proved_small(terms, small, x, y, limit):
    """The indices among ``small`` of the terms whose interval bounds on ``[x, y]`` (Arb at 96 bits, outward rounded)
    lie within ``[-limit, limit]`` together (each bound rounded up, their sum rounded up once more), in order."""
    drop, used = [], 0.0
    for i in small:
        with arb_precision(96):
            try:
                lo, hi = _interval(terms[i][2], x, y)
            except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
                continue
        if lo is not None and hi is not None and lo >= -limit and hi <= limit:
            # |p| <= sum of the dropped terms' bounds (each rounded up, the sum's rounding up once more)
            bound = max(float((-lo).upper()), float(hi.upper()), 0.0)
            if (used + bound) * (1 + 2.0**-50) <= limit:
                used = (used + bound) * (1 + 2.0**-50)
                drop.append(i)
    return drop


def _less_terms_of(b, terms, drop):
    """``b`` less the terms at the indices ``drop`` (``None`` where there are none, or where every varying term would go)."""
    if not drop or len(drop) == len(terms):
        return None
    return _less_terms(b, tuple(terms[i][0] for i in drop))


@functools.lru_cache(maxsize=256)
def _d_terms(b, d):
    """The top-level additive terms of ``b`` that contain ``d``, each with its numpy function and compiled tree (``None``
    where not compiled): what :func:`_without_negligible_terms` reads of the expression, formed once per expression."""
    out = []
    for t in b.args:
        if not t.has(d):
            continue
        try:
            value = _numpy_value(t, d)
        except (ValueError, TypeError, OverflowError):
            value = _no_value
        try:  # compiled here for every term (before, only for terms that passed the double pre-test)
            tree = _compiled(t, d)
        except (ValueError, TypeError, ArithmeticError, RecursionError):
            tree = None
        out.append((t, value, tree))
    return tuple(out)


def _no_value(x):
    raise ValueError("no numpy function")


@functools.lru_cache(maxsize=256)
def _less_terms(b, drop):
    """``b - sum(drop)`` (sympy): a pure function of the expression and the terms left out, formed once per pair (the
    proof that they are negligible on a range is :func:`_without_negligible_terms`' own, made at every first call)."""
    return b - sum(drop)


@functools.lru_cache(maxsize=128)
def _has_dying_term(b, d):
    """Whether some top-level additive term of ``b`` is below ``1e-15`` in double at ``d = 1e300`` (a cheap test, no
    proof: Theorem 15k is then tried before the whole bias in the float's tails)."""
    if not b.is_Add:
        return False
    for term in b.args:
        if not term.has(d):
            continue
        with np.errstate(all="ignore"):
            try:
                v = float(np.asarray(_numpy_value(term, d)(np.array([1e300])), dtype=float).ravel()[0])
            except (ValueError, TypeError, OverflowError):
                continue
        if abs(v) <= 1e-15:
            return True
    return False


def _anchored_float(b, d, tree, window, n):
    """``(m, D)`` in double precision by Theorem 15j (``proofs/closed_form_tails.md``), or ``None``: each side's sum
    relative to its last term (:func:`anchored_log_sum`: ``S_W = e^{b(W - 1) + phi_S}``, ``T = e^{b(n - 1) + phi_T}``) and
    ``Delta = b(n - 1) - b(W - 1)`` as an Arb ball at ``96 + log2 n`` bits, so ``T/S_W = e^{Delta + phi_T - phi_S}`` never
    forms a large ``b`` in double (``sqrt(d)`` at ``n = 1e300`` is ``1e150``, whose double is ``1e134`` off). Answers
    where ``rel_S + rel_T`` and the rounding of ``Delta`` and of the masses stay within ``2^-38``."""
    bits = 96 + n.bit_length()
    fns, third = _numpy_fns(b, d), _derivative_trees(b, d, 3)
    S = _anchored_side(b, d, tree, 0, window - 1, bits, fns, third)
    if S is None:
        return None
    T = _anchored_side(b, d, tree, window, n - 1, bits, fns, third)
    if T is None:
        return None
    try:
        with arb_precision(bits):
            delta = _eval(tree, flint.arb(n - 1), flint.arb) - _eval(tree, flint.arb(window - 1), flint.arb)
    except (ValueError, ZeroDivisionError, ArithmeticError):
        return None
    if not delta.is_finite():
        return None
    dm = float(delta.mid())
    lr = dm + T[0] - S[0]
    # m = 1/(1 + e^lr): its relative error is at most the sums' (rel_S + rel_T) plus |lr| (4 eps) for forming lr and
    # Delta's radius; D likewise
    rel = S[1] + T[1] + float(delta.rad()) + (abs(lr) + abs(dm) + 8) * 4 * 2.0**-53
    if not (math.isfinite(lr) and rel <= ACCEPT):
        return None
    return float(np.exp(-np.logaddexp(0.0, lr))), float(np.exp(-np.logaddexp(0.0, -lr)))


def _rounding_of_b(b, d, x, y, extra=()):
    """The largest running error of ``b`` read in double (Theorem 15g(vii), an estimate) at 33 points of ``[x, y]``
    (both ends among them) and at the integers ``extra`` (the heaviest terms of a sum, where a narrow feature's
    cancellation lies between the 33 points), or ``inf``: the part of a float route's error that comes from evaluating
    ``b``, including a cancellation inside it, which ``|b| eps`` does not see."""
    pts = np.round(np.linspace(float(x), float(y), 33))  # repeated points leave the largest error as it is
    if len(extra):
        pts = np.concatenate([pts, np.asarray(extra, dtype=float)])
    got = running_error(b, d, pts)
    if got is None:
        return math.inf
    with np.errstate(all="ignore"):
        top = float(np.max(np.abs(got[1])))  # nan where any error is nan, inf where any is infinite
    return top if math.isfinite(top) else math.inf


def _anchored_side(b, d, tree, a, c, bits, fns, third):
    """:func:`anchored_log_sum` on ``[a, c]`` (``(phi, rel)``, ``phi = log sum_{k=a}^{c} e^{b(k) - b(c)}``), or where it
    declines, Theorem 15l (:func:`_split_log`): halves ``[x, y]`` by :func:`anchored_log_sum` moved by
    ``b(y) - b(c)`` (an Arb ball at ``bits`` bits: no large ``b`` in double), or, where Theorem 15d's interval bound
    puts the half below ``2^-45`` of the last term ``e^{b(c)}``, by half that bound within itself; ranges of at most ``_FLOAT_HEAD``
    integers below ``2^53`` term by term less ``b(c)`` (:func:`_direct_log`); or ``None``."""
    b_err = functools.partial(_rounding_of_b, b, d)

    def anchored(x, y):
        got = anchored_log_sum(tree, x, y, bits, fns, third, b_err)
        if got is not None or y - x + 1 <= _FLOAT_HEAD:
            return got
        # Theorem 15k: without the additive terms p proved within 2^-60 on [x, y] (h = b - p), phi moves by
        # -p(y) + log(1 + theta) with |p(y)| <= 2^-60 and |log(1 + theta)| <= 2^-60: 2^-58 added to rel covers both
        # (exp(-exp(d/1000)) beside sqrt(d): its complex box is unbounded where the term is below every double)
        reduced = _without_negligible_terms(b, d, x, y)
        r_tree = None if reduced is None else _compiled(reduced, d)
        if r_tree is None:
            return None
        got = anchored_log_sum(r_tree, x, y, bits, _numpy_fns(reduced, d), _derivative_trees(reduced, d, 3),
                               functools.partial(_rounding_of_b, reduced, d))
        return None if got is None else (got[0], got[1] + 2.0**-58)

    got = anchored(a, c)
    if got is not None or c - a + 1 <= _FLOAT_HEAD:
        return got
    try:
        with arb_precision(bits):
            bc = _eval(tree, flint.arb(c), flint.arb)
    except (ValueError, ZeroDivisionError, ArithmeticError):
        return None
    if not bc.is_finite():
        return None

    def part(x, y):
        got = anchored(x, y)
        if got is None:
            # Theorem 15d's bound U >= sum_{x..y} e^{b(k) - b(c)}: below 2^-45 of the whole sum (at least its last
            # term, e^0) it is carried as U/2 within U/2 (rel 1, weighted by at most 2^-45 in the total)
            try:
                with arb_precision(bits):
                    up = _interval(tree, x, y)[1]
                    dead = None if up is None else float((up - bc + flint.arb(y - x + 1).log()).upper())
            except (ValueError, ZeroDivisionError, ArithmeticError):
                dead = None
            if dead is not None and dead <= -45 * math.log(2.0):
                return dead - math.log(2.0), 1.0
            return None
        try:
            with arb_precision(bits):
                delta = _eval(tree, flint.arb(y), flint.arb) - bc
        except (ValueError, ZeroDivisionError, ArithmeticError):
            return None
        if not delta.is_finite():
            return None
        dm = float(delta.mid())
        return got[0] + dm, got[1] + float(delta.rad()) + (abs(got[0]) + abs(dm) + 2) * 2 * 2.0**-53

    def leaf(x, y):  # b(c) as a double: its distance from the ball's midpoint and the midpoint's rounding
        shift = float(bc.mid())
        return _direct_log(b, d, x, y, shift, float(bc.rad()) + abs(shift) * 2.0**-53)

    return _split_log(part, leaf, a, c, ACCEPT)


def _anchored_balls(b, d, tree, window, n):
    """``(m, D)`` as Arb balls of relative radius below ``2^-55`` by Theorem 15j(v) (:func:`anchored_sum_arb` on each side,
    ``Delta = b(n - 1) - b(W - 1)`` at ``96 + log2 n`` bits), or ``None``."""
    bits = 96 + n.bit_length()
    try:
        with arb_precision(bits):
            S = anchored_sum_arb(tree, 0, window - 1, bits)
            T = None if S is None else anchored_sum_arb(tree, window, n - 1, bits)
            if T is None:
                return None
            delta = _eval(tree, flint.arb(n - 1), flint.arb) - _eval(tree, flint.arb(window - 1), flint.arb)
            r = delta.exp() * T / S
            m = 1 / (1 + r)
            D = 1 / (1 + 1 / r)
            if is_tight(m, _EM_BITS) and is_tight(D, _EM_BITS):
                return m, D
    except (ValueError, ZeroDivisionError, ArithmeticError):
        return None
    return None


def _periodic_float(tree, window, n):
    """``(m, D)`` of ``beta sin(omega d + phi)`` by Theorem 15e in double precision (``_bias_float.py``), or ``None``."""
    plan = _ja_plan(tree)
    if plan is None:
        return None
    return _float_masses([periodic_log_sum(plan, 0, window - 1), periodic_log_sum(plan, window, n - 1)])


def _mixed_float(b, d, tree, window, n):
    """``(m, D)`` of ``h + beta sin(omega d + phi)`` by Theorem 15f in double precision, or ``None``."""
    if _split(tree) is None:
        return None
    plan = _mixed_plan(b, d, tree)
    if plan is None:
        return None
    S = mixed_log_sum(plan, 0, window - 1)
    return None if S is None else _float_masses([S, mixed_log_sum(plan, window, n - 1)])


@functools.lru_cache(maxsize=128)
def _has_periodic(tree):
    """Whether the compiled tree has a ``sin`` or ``cos`` node (tags are the only strings in it)."""
    text = repr(tree)
    return "'sin'" in text or "'cos'" in text


def _maybe_dominant(tree, window, n):
    """Whether the single terms at ``0, W - 1, W, n - 1`` differ by more than ``e^700`` times the other side's number
    of terms (then :func:`_dominant_masses` is tried before the Euler-Maclaurin route, which would work hard to fail;
    a power law at ``W = 1e299``, ``b(0) - b(W) = 757 < 690 + 700``, is not)."""
    if n <= window:
        return False
    with arb_precision(96 + n.bit_length()):
        ends = [point_interval(tree, k) for k in (0, window - 1, window, n - 1)]
    lows = [v[0] for v in ends]
    highs = [v[1] for v in ends]

    def gap(a, b, count):  # one side's largest end term against the other's, times its number of terms, in double
        la = [float(v) for v in (lows[i] for i in a) if v is not None]
        hb = [float(v) if v is not None else math.inf for v in (highs[i] for i in b)]
        return max(la, default=-math.inf) - max(hb, default=math.inf) - math.log(count)

    return gap((2, 3), (0, 1), window) > 700 or gap((0, 1), (2, 3), n - window) > 700


def _geometric_ratio(beta, window, n):
    """``T / S_W`` for ``b = alpha + beta d`` as an Arb ball (Theorem 15b, ``proofs/closed_form_tails.md``):
    :math:`\\sum_{k=W}^{n-1} e^{\\beta k} / \\sum_{k<W} e^{\\beta k} = e^{\\beta W}\\,\\mathrm{expm1}(\\beta(n - W))/\\mathrm{expm1}(\\beta W)`
    (``(n - W)/W`` at ``beta = 0``). Call under :func:`arb_precision` with ``log2(|beta| n)`` bits to spare."""
    import flint

    if beta == 0:
        return flint.arb(n - window) / window
    bb = flint.arb(beta.numerator) / beta.denominator
    return (bb * window).exp() * (bb * (n - window)).expm1() / (bb * window).expm1()


@functools.lru_cache(maxsize=128)
def _float_head(b, d):
    """``b(0), ..., b(4095)`` as a read-only array (the float route's direct head: the bias does not depend
    on ``n``, so it is formed once per expression), or ``None`` if one is not finite."""
    with np.errstate(all="ignore"):
        logw = np.asarray(_numpy_fns(b, d)[0](np.arange(_FLOAT_HEAD, dtype=float)), dtype=float) * np.ones(_FLOAT_HEAD)
    if not np.all(np.isfinite(logw)):
        return None
    # Theorem 15g(vii)'s estimate of b in double: the largest error over the terms within e^-745 of the head's largest
    # moves a mass by at most twice that; above 2^-40 the float routes decline (1e6 log(1+d) - 1e6 log(2+d): 1e-10)
    got = running_error(b, d, np.arange(_FLOAT_HEAD, dtype=float))
    if got is None:
        return None
    err = np.asarray(got[1], dtype=float) * np.ones(_FLOAT_HEAD)
    # the gap is formed before the comparison: np.max(logw) - 745 rounds back to the maximum itself once it exceeds
    # 2^62, which left no term live (1e300 log(d + 1): an unnamed numpy ValueError on the empty selection)
    live = logw - np.max(logw) > -745.0
    if not float(np.max(err[live])) <= 2.0**-41:
        return None
    logw.flags.writeable = False
    return logw


@functools.lru_cache(maxsize=128)
def _float_head_log(b, d):
    """``log sum_{k < 4096} e^{b(k)}`` of :func:`_float_head`'s row (the same log-sum-exp, formed once per expression as the
    row is), or ``None`` where the row is."""
    logw = _float_head(b, d)
    return None if logw is None else _logsumexp(logw)


_SPLIT_CALLS = 48  # Theorem 15l: at most this many ranges handed to the float tail (bounded work)


def _split_log(part, leaf, a, c, accept):
    """``(log S, rel)`` for ``S = sum_{k=a}^{c} e^{b(k)}`` (in the frame of ``part`` and ``leaf``: both give logs
    against the same anchor) by Theorem 15l (``proofs/closed_form_tails.md``), or ``None``: where a route declines the
    whole range (a narrow bump anywhere in it widens the interval bounds of the third derivative, of Theorem 15i's
    boxes or of Theorem 15j's Cauchy estimate on the whole range), the range is halved, each half taken by
    ``part(x, y)`` or halved again, down to ranges of at most ``_FLOAT_HEAD`` integers taken by ``leaf(x, y)`` (term by
    term). Each part within a relative ``rel_i`` of its positive sum ``S_i`` puts the total within the ``S``-weighted
    mean of the ``rel_i`` (a leaf's estimate is diluted by the rest of the range as in the float head's test); the
    log-sum-exp of the parts' logs adds its rounding; ``None`` where the total exceeds ``accept``. At most
    ``_SPLIT_CALLS`` ranges are handed to ``part`` (else
    ``None``): halving isolates one bump in ``log2((c - a)/4096)`` levels of at most two declined ranges each
    (``sqrt(d) + e^{-((d - 899969)/2)^2}`` on ``[900000, 10^6)``)."""
    if c - a + 1 <= _FLOAT_HEAD:
        return None  # a range this short is the callers' own term-by-term case: nothing to split
    calls = [0]

    def one(x, y):
        if y - x + 1 <= _FLOAT_HEAD:
            return leaf(x, y)
        calls[0] += 1
        if calls[0] > _SPLIT_CALLS:
            return None
        got = part(x, y)
        if got is None and x >= 1 << 53:
            return None  # its leaves would lie beyond 2^53, where no term is read term by term: no halving can answer
        return got if got is not None else halves(x, y)

    def halves(x, y):
        m = x + (y - x) // 2
        lo = one(x, m)
        hi = None if lo is None else one(m + 1, y)
        if hi is None:
            return None
        out = float(np.logaddexp(lo[0], hi[0]))
        # each part's absolute error is at most rel_i S_i: the total's relative error is their S-weighted mean
        rel = lo[1] * math.exp(lo[0] - out) + hi[1] * math.exp(hi[0] - out)
        # logaddexp: lo - hi and the final sum rounded, each within 2 ulps of its largest operand
        return out, rel * (1 + 2.0**-50) + (abs(out) + max(abs(lo[0]), abs(hi[0])) + 2) * 2 * 2.0**-53

    got = halves(a, c)
    return got if got is not None and got[1] <= accept else None


_ARB_TERMS = 256  # Theorem 15g(vii): at most this many terms of a direct range re-read as Arb balls (bounded work)
_ARB_REST = 2.0**-46  # Theorem 15g(vii): the terms re-read are the fewest whose running errors leave at most this


def _arb_terms(b, d, ks):
    """``(v, e)``: ``b(k)`` at the integers ``ks`` as doubles, each the midpoint of an Arb ball at ``96 + log2 k`` bits
    (the tree of :func:`compile_bias`: constants as written, outward rounding), ``e`` the ball's radius plus the
    midpoint's rounding (Theorem 15g(vii)); ``None`` where a ball is not finite or the tree is not in the grammar."""
    tree = _compiled(b, d)
    if tree is None:
        return None
    v, e = np.empty(len(ks)), np.empty(len(ks))
    try:
        with arb_precision(96 + max(int(max(ks)), 1).bit_length()):
            for i, k in enumerate(ks):
                ball = _eval(tree, flint.arb(int(k)), flint.arb)
                if not ball.is_finite():
                    return None
                v[i] = float(ball.mid())
                e[i] = float(ball.rad()) + abs(v[i]) * 2.0**-53 if math.isfinite(v[i]) else 0.0
    except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
        return None
    if np.any(np.isnan(v)) or np.any(v == np.inf):
        return None
    return v, e


def _direct_log(b, d, a, c, shift=0.0, shift_err=0.0):
    """``(log sum_{k=a}^{c} e^{b(k) - shift}, rel)`` term by term in double (``c < 2^53``, at most ``_FLOAT_HEAD``
    terms), or ``None``: ``rel`` is Theorem 15g(vii)'s estimate of ``b``'s error (the ``e^b``-weighted mean over the
    range), plus ``shift_err`` (an absolute bound of the error of ``shift``) and the rounding of ``b(k) - shift`` and of
    the log-sum-exp; ``None`` where a value is not a number or ``+inf``, or ``-inf`` through an overflow.

    The terms whose running errors carry the weighted mean above ``2^-46`` (a cancellation inside ``b``:
    ``d/3 - 999995/3`` near a narrow bump, 3e-10 of ``b``), at most ``_ARB_TERMS`` of them, the largest contributions
    first, are read again as Arb balls (:func:`_arb_terms`): their error is then the ball's radius and the rounding of
    its midpoint (Theorem 15g(vii)); with more, the estimate stands and the callers' acceptance decides."""
    if c >= 1 << 53 or c - a + 1 > _FLOAT_HEAD:
        return None
    got = running_error(b, d, np.arange(a, c + 1, dtype=float))
    if got is None:
        return None
    with np.errstate(all="ignore"):
        v, e = (np.array(np.asarray(x, dtype=float) * np.ones(c - a + 1)) for x in got)
        if np.any(np.isnan(v)) or np.any(v == np.inf):
            return None
        # -inf through an intermediate overflow is not a zero weight (-d**80/1e320 at d = 8000 is -1.7e-8): read again
        # in Arb below, as any term whose error matters, or the route declines (Theorem 15g(vii))
        over = (v == -np.inf) & ~np.isfinite(e)
        finite = np.isfinite(v)
        top = float(np.max(v[finite])) if np.any(finite) else -math.inf
        w = np.where(finite, np.exp(v - top), 0.0) if math.isfinite(top) else np.zeros(v.size)
        contrib = np.where(w > 0, w * e, 0.0)
        total = float(np.sum(w))
        order = np.argsort(-contrib)
        # the fewest largest contributions whose removal leaves the weighted mean within 2^-46
        rest = np.cumsum(contrib[order][::-1])[::-1] / total if total > 0 else np.zeros(v.size)
        k_bad = int(np.count_nonzero(~(rest <= _ARB_REST))) if total > 0 else 0
        idx = np.union1d(order[:k_bad], np.flatnonzero(over))
        if 0 < idx.size <= _ARB_TERMS:
            redo = _arb_terms(b, d, idx + a)
            if redo is None:
                return None
            v[idx], e[idx] = redo
        elif np.any(over):
            return None
        v = v - shift
        top = float(np.max(v))
        if not math.isfinite(top):
            return None
        w = np.exp(v - top)
        total = float(np.sum(w))
        rel = float(np.dot(w, np.where(w > 0, e, 0.0))) / total + shift_err
        out = top + math.log(total)
        rel += (float(np.max(np.abs(v[w > 0]))) + abs(out) + 2) * 2 * 2.0**-53
    return (out, rel) if math.isfinite(rel) else None


@functools.lru_cache(maxsize=128)
def _derivative_trees(b, d, order):
    """The compiled trees of ``b`` and its ``order``-th derivative (sympy's), or ``None``: ``b'`` for Theorem 15d(v)'s
    proof of monotonicity, ``b'''`` for Theorem 15h's bounds."""
    sp = import_sympy()
    bk = sp.diff(b, d, order)
    if sp.count_ops(bk) > 400:  # bounded work (the interval evaluation walks the tree once per range)
        return None
    trees = (_compiled(b, d), _compiled(bk, d))
    return None if None in trees else trees


@functools.lru_cache(maxsize=128)
def _numpy_fns(b, d):
    """The bias and its first three derivatives as numpy functions (sympy's, lambdified once)."""
    sp = import_sympy()
    exprs = [b]
    for _ in range(3):
        exprs.append(sp.diff(exprs[-1], d))
    return tuple(lambdify_far(e, d) for e in exprs)


@functools.lru_cache(maxsize=256)
def _numpy_value(e, d):
    """``e`` alone as a numpy function (sympy's lambdify, once; no derivatives: the cheap tests of Theorem 15k)."""
    return lambdify_far(e, d)


def _real_domain_problem(b, d, asymptotic_only=False):
    """``None`` when sympy proves ``b`` real and continuous on all of ``[0, oo)``, else the reason.

    The verdict's comparisons (limits as ``d -> oo``) and the tails of ``D_oo`` read ``b`` on the
    whole half-line; a pole, a logarithm of a non-positive value or a root of a negative one at
    some ``d > 64`` (beyond the construction's check at ``d = 0..64``) makes them meaningless.
    """
    sp = import_sympy()
    from sympy.calculus.util import continuous_domain

    half_line = sp.Interval(0, sp.oo)
    try:
        dom = continuous_domain(b, d, half_line)
    except Exception as exc:  # sympy raises a variety of errors on hard domains
        return f"sympy could not establish where b(d) is real and continuous on [0, oo) ({type(exc).__name__})"
    if dom != half_line:
        gap_set = sp.Complement(half_line, dom)
        if asymptotic_only:  # a callable's asymptotic form need only hold far out
            try:
                if gap_set.is_empty or bool(gap_set.sup.is_finite):
                    return None
            except Exception:  # a set sympy cannot bound: reported below
                pass
        gaps = str(gap_set)
        if len(gaps) > 160:
            gaps = gaps[:160] + "..."
        return f"b(d) is not real and finite on all of [0, oo): it fails on {gaps}"
    return None


def _decide(b, d, asymptotic_only=False):
    """(kind, reason) for sum_d e^b(d): log-distance and Bertrand comparisons, then sympy's tests."""
    sp = import_sympy()
    problem = _real_domain_problem(b, d, asymptotic_only)
    if problem is not None:
        return "undecided", f"{problem}, so the comparisons as d -> oo do not apply."

    try:
        L1 = sp.limit(b / sp.log(d), d, sp.oo)
    except Exception:  # sympy raises a variety of errors on hard limits
        L1 = None
    if L1 is not None and L1.is_real is not False and L1.is_number:
        if L1 < -1:
            return "bounded", f"b(d) / log d -> {L1} < -1: e^b(d) <= d^-(1+e) eventually (comparison with a log-distance prior)."
        if L1 > -1:
            return "diluting", f"b(d) / log d -> {L1} > -1: e^b(d) >= d^-(1-e) eventually, not summable."
        try:
            L2 = sp.limit((b + sp.log(d)) / sp.log(sp.log(d)), d, sp.oo)
        except Exception:
            L2 = None
        if L2 is not None and L2.is_number:
            if L2 < -1:
                return "bounded", f"b(d) = -log d + c log log d with c -> {L2} < -1: a convergent Bertrand series."
            if L2 > -1:
                return "diluting", f"b(d) = -log d + c log log d with c -> {L2} > -1: a divergent Bertrand series."
    try:
        conv = sp.Sum(sp.exp(b), (d, 1, sp.oo)).is_convergent()
    except Exception:
        conv = None
    if conv is sp.true or conv is True:
        return "bounded", "sympy's convergence tests find sum e^b(d) convergent."
    if conv is sp.false or conv is False:
        return "diluting", "sympy's convergence tests find sum e^b(d) divergent."
    return "undecided", "neither the log-distance and Bertrand comparisons nor sympy's tests decide sum e^b(d)."


def _tail_limit(bias_fn, b, d, W):
    """D_oo(W): direct sum below N plus the tail as an integral in u = log(x/N), for N = 2^14 and 2^17."""
    sp = import_sympy()

    ctx = mpmath.MPContext()
    ctx.dps = 30
    b_mp = sp.lambdify(d, b, modules=[{"log": ctx.log, "exp": ctx.exp, "sqrt": ctx.sqrt, "sin": ctx.sin, "cos": ctx.cos}, "mpmath"])

    def integrand(u, N):
        # the tail integrand in u (x = N e^u) is e^(b(x)) x: below e^-10000 it is nothing next
        # to the head, and exp of a huge argument is never taken
        x = N * ctx.exp(u)
        value = b_mp(x) + ctx.log(x)
        return ctx.mpf(0) if value < -10000 else ctx.exp(value)

    values = []
    for N in (1 << 14, 1 << 17):
        head = np.exp(bias_fn(np.arange(N, dtype=float)))
        tail = ctx.quad(lambda u, N=N: integrand(u, N), [0, 1, 10, ctx.inf])
        tail += ctx.exp(b_mp(ctx.mpf(N))) / 2
        total = math.fsum(head) + float(tail)
        values.append((total - math.fsum(head[:W])) / total)
    return values


_TAIL_PIECES = 2048  # geometric pieces [x, 2x] of the tail beyond direct summation (n up to 1e300)
_TAIL_EVALS = 2000  # Theorem 13's tail: integrand evaluations in all of one tail's acb.integral calls (then: not proved)
_FLOAT_BALLS = {}  # (sympy Float, precision) -> its arb ball (_ball_eval)


def _ball_eval(expr, d, x, complex_=False, analytic=False):
    """``expr`` at the ball ``x`` (``arb``, or ``acb`` with ``complex_``) by its sympy tree.

    Supported: numbers, the symbol, ``+``, ``*``, powers, ``log``, ``exp``, ``sin``, ``cos``;
    anything else returns ``None`` (the caller refuses). With ``analytic`` (Arb integration)
    the branch cuts of ``log`` and of non-integer powers are checked: a ball that touches
    one gives a non-finite result, as ``acb.integral`` requires.
    """
    import flint

    sp = import_sympy()
    kind = flint.acb if complex_ else flint.arb

    def ev(e):
        if e == d:
            return x
        if e.is_Number:
            if e.is_Integer:
                return kind(int(e))
            if e.is_Rational:
                return kind(int(e.p)) / int(e.q)
            key = (e, flint.ctx.prec)  # sympy's printing of a Float is slow: once per constant and precision
            if key not in _FLOAT_BALLS:
                if len(_FLOAT_BALLS) > 1024:
                    _FLOAT_BALLS.clear()
                _FLOAT_BALLS[key] = flint.arb(str(sp.Float(e, 40)))
            return kind(_FLOAT_BALLS[key])
        if e.is_Add:
            out = kind(0)
            for a in e.args:
                v = ev(a)
                if v is None:
                    return None
                out += v
            return out
        if e.is_Mul:
            out = kind(1)
            for a in e.args:
                v = ev(a)
                if v is None:
                    return None
                out *= v
            return out
        if e.is_Pow:
            base, ex = ev(e.args[0]), e.args[1]
            if base is None:
                return None
            if ex.is_Integer:
                return base ** int(ex)
            if ex.is_Rational and ex.q == 2 and complex_:
                return base.sqrt(analytic=analytic) ** int(ex.p)
            ev_ex = ev(ex)
            if ev_ex is None:
                return None
            if complex_:
                return (ev_ex * base.log(analytic=analytic)).exp()
            return base**ev_ex
        name = type(e).__name__
        if name in ("log", "exp", "sin", "cos") and len(e.args) == 1:
            v = ev(e.args[0])
            if v is None:
                return None
            if name == "log":
                return v.log(analytic=analytic) if complex_ else v.log()
            return getattr(v, name)()
        return None

    return ev(expr)


def _tail_sum_arb(expr, d, N, n, prec=96):
    """A ball containing ``sum_{k=N}^{n-1} e^{b(k)}`` for a bias decreasing on ``[N, n]`` (Theorem 13).

    ``b`` decreasing on ``[N, n]`` (``b' < 0`` proved on geometric pieces ``[x, 2x]`` in Arb)
    gives ``int_N^n f <= sum <= f(N) + int_N^{n-1} f`` with ``f = e^b``; each piece of the
    integral is Arb's rigorous ``acb.integral``. Returns ``None`` when a step is not proved
    (then the caller refuses), when the expression has an unsupported function, or when the
    integrals together need more than 2000 evaluations of the integrand (bounded time).
    """
    import flint

    from .._balls import arb_precision

    sp = import_sympy()
    db = sp.diff(expr, d)
    with arb_precision(prec):
        edges = [N]
        while edges[-1] < n - 1:
            edges.append(min(2 * edges[-1], n - 1))
            if len(edges) > _TAIL_PIECES:
                return None
        total = flint.arb(0)
        spent = [0]
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            # b' < 0 on [lo, hi]: split the interval a few times before giving up
            pieces = [(lo, hi)]
            for _ in range(6):
                undecided = []
                for a, b in pieces:
                    ball = flint.arb(a).union(flint.arb(b))
                    val = _ball_eval(db, d, ball)
                    if val is None:
                        return None
                    if not val < 0:
                        undecided.extend([(a, (a + b) / 2), ((a + b) / 2, b)])
                pieces = undecided
                if not pieces:
                    break
            if pieces:
                return None

            def f(z, analytic):
                spent[0] += 1
                v = _ball_eval(expr, d, z, complex_=True, analytic=analytic)
                return v.exp() if v is not None else flint.acb("nan")

            # bounded work: at most _TAIL_EVALS evaluations over all pieces (successful tails take a few hundred;
            # -1.1 log(d + 1) + exp(-exp(d/1000)) at n = 1e6 spent 47,000 of them, 4-7 s, and was not proved)
            left = _TAIL_EVALS - spent[0]
            if left <= 0:
                return None
            piece = flint.acb.integral(f, flint.acb(lo), flint.acb(hi), rel_tol=flint.arb(2) ** -70,
                                       eval_limit=min(20000, left))
            if not piece.real.is_finite() or not (piece.imag.rad() < 1):
                return None
            total += piece.real
        fN = _ball_eval(expr, d, flint.arb(N))
        if fN is None:
            return None
        fN = fN.exp()
        # total = int_N^{n-1} f <= int_N^n f <= sum_{k=N}^{n-1} f(k) <= f(N) + int_N^{n-1} f
        lower, upper = total, total + fN
        # Theorem 13(ii): where f = e^b is also convex (b'' + b'^2 >= 0, proved on the pieces),
        # trapezoid <= sum <= midpoint: width about f'(N)/8 instead of f(N)
        g = sp.diff(db, d) + db**2
        half = flint.arb(1) / 2
        convex = True
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            a0 = flint.arb(lo) - half if lo == N else flint.arb(lo)
            b0 = flint.arb(hi) + half if hi == n - 1 else flint.arb(hi)
            pieces = [(a0, b0)]
            for _ in range(6):
                undecided = []
                for a, b in pieces:
                    val = _ball_eval(g, d, a.union(b))
                    if val is None:
                        return lower.union(upper)
                    if not val >= 0:
                        m = (a + b) / 2
                        undecided.extend([(a, m), (m, b)])
                pieces = undecided
                if not pieces:
                    break
            if pieces:
                convex = False
                break
        if convex:

            def f(z, analytic):
                v = _ball_eval(expr, d, z, complex_=True, analytic=analytic)
                return v.exp() if v is not None else flint.acb("nan")

            first = flint.acb.integral(f, flint.acb(flint.arb(N) - half), flint.acb(N), rel_tol=flint.arb(2) ** -70)
            last = flint.acb.integral(f, flint.acb(n - 1), flint.acb(flint.arb(n - 1) + half), rel_tol=flint.arb(2) ** -70)
            f_last = _ball_eval(expr, d, flint.arb(n - 1)).exp()
            trapezoid = total + (fN + f_last) / 2
            midpoint = first.real + total + last.real
            if trapezoid.is_finite() and midpoint.is_finite():
                lo_end = trapezoid.lower() if trapezoid.lower() > lower.lower() else lower.lower()
                hi_end = midpoint.upper() if midpoint.upper() < upper.upper() else upper.upper()
                return flint.arb(lo_end).union(flint.arb(hi_end))
        return lower.union(upper)


@register
@dataclass(frozen=True, repr=False)
class Bias(Encoding):
    """Any relative bias :math:`b(d)`: an expression text, a sympy expression, or a callable.

    Parameters
    ----------
    expr : str, sympy expression or callable
        ``b(d)``. Text is parsed with the whitelist grammar of :mod:`otprior.expression`
        (never evaluated). A sympy expression is taken as given (trusted, programmatic use).
        Either must be real and finite at every integer ``d >= 0``: it is refused
        (``DomainError``) when it contains ``I`` or when its value at some ``d = 0, ..., 64``,
        enclosed in complex Arb balls, is not finite or not real
        (:func:`otprior.expression.check_bias_values`). A callable needs ``asymptotic``.
        A decimal constant means the decimal as written, every digit up to 60 significant ones
        (``1.10000000000000000001`` is that number, not ``1.1``; beyond 60 digits, its double's shortest
        ``repr``), kept as the exact rational it writes, so that constants sympy combines stay exact
        (``(d - 99998.7)/0.7`` is ``10*d/7 - 999987/7``; ``repr`` writes decimals back as decimals): the certified routes, and the exact phase reductions of the float routes of
        Theorems 15e-15f, use that exact decimal; the other float routes evaluate its nearest double,
        a relative change of at most ``2^-53`` in each constant, which their error estimates count as
        part of the rounding of ``b`` (``|b| eps``, assuming no cancellation between terms). Near a
        resonance the decimal and its double differ measurably (``sin(6.28318530717959*d)`` at
        ``n = 1e15``: 3.7%; ``sin(6.28318530717958647692*d)`` at ``W = 1000``, ``n = 66000``: 1.6e-11).
    symbol : str or sympy.Symbol, optional
        The distance symbol (``"d"`` for text; a sympy expression's only free symbol by default).
    asymptotic : str or sympy expression, optional
        For a callable: an expression with the same behaviour as ``d -> oo``.
    time_budget, memory_budget : float, int
        The verdict (sympy's limits and tests) and ``D_oo`` each run under these, in a child
        process; the time is the child's CPU time (the same verdict on a busy machine as on
        an idle one), with a wall-clock backstop of ``4 * time_budget + 1`` s. When one runs
        out during the verdict, the verdict is "undecided" with that
        reason; during ``Verdict.limit_distant_mass(W)``, that call raises
        :class:`~otprior.PrecisionError` naming the budget.

    Notes
    -----
    The verdict decides :math:`\\sum e^{b(d)} < \\infty` by comparison with the log-distance
    and Bertrand series: :math:`L_1 = \\lim b(d)/\\log d` (:math:`< -1` summable,
    :math:`> -1` not); at :math:`L_1 = -1`, :math:`L_2 = \\lim (b(d) + \\log d)/\\log\\log d`
    likewise. When sympy cannot take the limits or both are borderline, sympy's
    ``is_convergent`` is asked. If that fails too, or the budget ends, the verdict is
    "undecided", never a guess. Before any comparison, sympy's ``continuous_domain`` must
    find ``b`` real and continuous on all of ``[0, oo)`` (a pole or a complex value past the
    construction's check at ``d = 0..64`` gives "undecided", naming where it fails).

    Masses: direct log-sum-exp up to ``n = 2**16``; beyond, for an expression bias, Theorem 15
    (``proofs/closed_form_tails.md``) at any ``n`` up to 1e300: a direct head of 4096 terms and the
    Euler–Maclaurin tail in double precision (Theorem 15i: the 16-point quadrature in ``log x``, the remainder and any
    tail left out proved below ``2^-40`` from one Arb bound of ``b(e^z)`` on a complex box per group of pieces, else
    declined; measured within 2 ulps of 30-digit references on moderate biases; its rounding about
    ``(max|b| + max|x b'(x)| ln n) eps`` relative, from the quadrature nodes in ``log x``; a range short against its start, such as ``W = n - 1e5``, by
    Theorem 15h: second-order Taylor pieces of ``b`` whose width comes from an Arb interval bound of the third
    derivative on the whole range, with a proved truncation bound), with :meth:`mass_enclosures` giving proved
    enclosures (relative radius below 2^-55, Arb). Where the float declines the enclosure's midpoint is returned; where
    Theorem 15 does not apply (an oscillating tail such as ``sin(d)`` without decay, a steeply
    growing bias), the direct head plus Theorem 13's monotone bracket, else direct summation up to
    ``n = 2**22`` (a ``DomainError`` naming ``n`` beyond). A callable bias keeps the cap ``n <= 2**22``.
    A linear bias ``alpha + beta d`` is a geometric sum in closed form at every length and window
    (Theorem 15b). The verdict's ``D_oo(W)`` is :meth:`limit_enclosure`'s midpoint (Theorem 15c: Theorem 15 up
    to a cut-off and a proved envelope of the rest) where the bias's terms fit the envelope, else sampled.

    Further routes, at every ``n`` and window (certified by :meth:`mass_enclosures`, and in double precision
    by the float route, Theorem 15g, ``otprior/encodings/_bias_float.py``):
    where one side outweighs the other by more than ``e^746`` (a growing bias such as ``sqrt(d)``,
    ``exp(d/1000)``, ``d^2``, ``exp(exp(d))``; ``-exp(d)`` past its first terms) the small mass is
    ``[0, 2^-1074]`` from interval bounds of ``b`` alone (Theorem 15d; the float reads the same bounds from
    ``b`` at the ends and the sign of ``b'`` at the pieces' ends, a gap of ``e^750``); ``beta sin(omega d + phi)``
    (or ``cos``) is a Jacobi–Anger closed form (Theorem 15e); ``h + beta sin(omega d + phi)`` adds twisted
    Euler–Maclaurin sums to Theorem 15 (Theorem 15f). Their float routes reduce every phase exactly (the
    decimals as written) and answer when an a-posteriori bound of their error is at most ``2^-38`` (measured:
    a few ulps), else the enclosure's midpoint answers. Theorem 15's float proves its truncation (Theorem 15i: a
    feature narrower than its pieces, ``5*exp(-((d-90000)/30)**2)`` in a decay at ``n = 1e5``, which it once missed
    for 5% of ``D``, makes the bound large and the route declines; a range short against its start by Theorem 15h,
    an interval bound of ``b'''`` on the whole range), while :meth:`mass_enclosures` bounds ``b`` on every piece and
    encloses or refuses; a bias growing towards ``W - 1`` and ``n - 1`` (``sqrt(d)`` at ``W = n - 1e5`` and ``n - 1``, any
    ``n``) by Theorem 15j: each side relative to its last term, ``b(c - t) - b(c)`` as its Taylor polynomial about the
    top ``c`` (Lagrange's remainder proved by Cauchy's estimate on a complex box around the kept range, so a narrow step
    or bump there declines the route), Theorem 15h on the polynomial, and the terms before the kept range bounded by
    an interval bound of ``b`` (error about ``(|log(T/S_W)| + 8) eps`` plus Theorem 15h's); a top-level additive term
    proved within ``[-2^-60, 2^-60]`` on a range by interval bounds is left out of that range's sum, in both routes
    (Theorem 15k: ``exp(-exp(d/1000))`` beside ``-1.1*log(d+1)``, unbounded on the complex boxes and wide Taylor balls
    where it is below every double). Still refused beyond ``n = 2**22``, by name and
    at once: two periodic terms, a periodic factor, amplitudes above 150, and weights whose logarithms
    are beyond Arb's range on both sides (``exp(exp(d))`` from ``d = 64``).
    """

    name = "bias"

    expr: object = param(doc="the bias b(d) in d: numbers, d, + - * / **, log exp sqrt sin cos abs min max")
    symbol: object = param(None, doc="the distance symbol (default d)")
    asymptotic: object = param(None, doc="for a callable: an expression with its behaviour as d -> oo", kw_only=True)
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)
    time_budget: float = param(DEFAULT_TIME_BUDGET, doc="CPU seconds the verdict may take (then: undecided); "
                               "wall-clock at most 4x + 1 s", kw_only=True)
    memory_budget: int = param(DEFAULT_MEMORY_BUDGET, doc="bytes the verdict may add (then: undecided)", kw_only=True)
    _sym: object = field(default=None, init=False, repr=False, compare=False)
    _callable: object = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        sp = import_sympy()

        s = object.__setattr__
        s(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))
        s(self, "time_budget", check_real(self.time_budget, "time_budget", low=0.0, low_open=True))
        s(self, "memory_budget", int(check_real(self.memory_budget, "memory_budget", low=float(1 << 24))))
        name = None if self.symbol is None else str(self.symbol)
        expr = self.expr
        if callable(expr) and not isinstance(expr, sp.Basic):
            if self.asymptotic is None:
                raise DomainError("asymptotic", None, "an expression in d giving the callable's behaviour as d -> oo")
            s(self, "_callable", expr)
            expr = self.asymptotic
        if isinstance(expr, str):
            expr = parse_bias(expr, name or "d")
        elif not isinstance(expr, sp.Basic):
            raise DomainError("expr", expr, "an expression text, a sympy expression or a callable")
        free = sorted(expr.free_symbols, key=str)
        if name is None:
            if len(free) > 1:
                raise DomainError("symbol", None, f"the distance symbol (expression has free symbols {free})")
            sym = free[0] if free else sp.Symbol("d")
        else:
            sym = next((f for f in free if str(f) == name), sp.Symbol(name))
            if free and sym not in free:
                raise DomainError("symbol", self.symbol, f"one of the expression's free symbols {free}")
            if len(free) > 1:
                raise DomainError("expr", bias_text(expr), "an expression in the distance symbol alone")
        if self._callable is None:
            check_bias_values(expr, sym)  # real and finite at d = 0..64 (parsed text: a second, cheap check)
        d = sp.Symbol(str(sym), positive=True)
        body = expr.subs(sym, d)
        if self._callable is None:
            # Attention is invariant to an additive constant (it cancels in every mass, the verdict
            # and the limit), and a large one would erase b's dependence on d in double and in
            # fixed-precision balls (1e16 - 1.5 log(1+d) rounds to 1e16): the masses use b - b_0,
            # b_0 the sum of the top-level terms free of d.
            _, body = body.as_independent(d, as_Add=True)
        s(self, "_sym", (d, body))
        if self._callable is None:
            s(self, "expr", expr)

    @property
    def expression(self):
        """The sympy expression in a positive distance symbol, without its top-level additive
        constant (``1e16 - 1.5*log(1 + d)`` gives ``-1.5*log(d + 1)``: the same attention)."""
        return self._sym[1]

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        with np.errstate(all="ignore"):
            if self._callable is not None:
                return real_array(self._callable(d), "bias", "a callable returning real values") * np.ones_like(d)
            fn = _numpy_fns(*reversed(self._sym))[0]
            values = np.asarray(fn(d))
            if np.iscomplexobj(values):
                raise DomainError("expr", bias_text(self.expression), "an expression real at every distance (this one is complex)")
            return values.astype(float) * np.ones_like(d)

    def _masses(self, window, n):
        """Direct log-sum-exp up to ``2**16``; beyond, for an expression bias, the float routes of Theorem 15g
        (15b's closed form; a log-distance bias ``beta log(g d + a)``, ``beta < 0``, by the log-distance prior's
        float route, O(1) in ``n``; 15e and 15f in double; 15d's dominance in double; Theorem 15's float with a direct head of
        4096 terms, checked by two quadrature rules), else the
        midpoint of the certified enclosure (:meth:`mass_enclosures`), else the direct head plus Theorem 13's monotone
        tail; a callable bias sums directly (``n <= 2**22``)."""
        if window >= n:  # T is an empty sum: m = 1, D = 0 whatever the weights
            return 1.0, 0.0
        if self._callable is not None:
            return super()._masses(window, n)
        # Theorem 15g(vii): where b in double moves the masses by more than 2^-39 (a first-order estimate: 149 sin(2.5 d
        # + 0.3) at W = 59999, n = 60000 gave D 1.35e-9 relative off) the direct sum declines, and the routes below answer
        # (15e's exact phase reduction, the enclosure's midpoint) or refuse
        if n <= 1 << 16 and weights_error_ok(*reversed(self._sym), n, window):
            try:
                return super()._masses(window, n)
            except DomainError:
                # weights beyond double's range (exp(d) at d >= 710): Theorem 15d's dominance bound
                # answers where one side outweighs the other by e^746; otherwise the refusal stands
                tree = _compiled(*reversed(self._sym))
                dominant = None if tree is None else _dominant_masses(tree, window, n)
                if dominant is None:
                    raise
                return float(dominant[0].mid()), float(dominant[1].mid())
        geometric = self._geometric_balls(window, n)
        if geometric is not None:  # a linear bias: the closed form's midpoint (Theorem 15b)
            return float(geometric[0].mid()), float(geometric[1].mid())
        form = _log_distance_form(*reversed(self._sym))
        if form is not None:  # beta log(g d + a), beta < 0: the log-distance prior's float route (Theorem 7, O(1) in n)
            from ..log_distance import _float_masses

            return _float_masses(window, n, *form)
        tree = _compiled(*reversed(self._sym))
        fast = None if tree is None else _periodic_float(tree, window, n)
        if fast is not None:  # beta sin(omega d + phi): Theorem 15e in double precision
            return fast
        periodic = None if tree is None else _periodic_balls(tree, window, n, [])
        if periodic is not None:  # beta sin(omega d + phi): the closed form's midpoint (Theorem 15e)
            return float(periodic[0].mid()), float(periodic[1].mid())
        fast = None if tree is None else _mixed_float(*reversed(self._sym), tree, window, n)
        if fast is not None:  # h + beta sin(omega d + phi): Theorem 15f in double precision
            return fast
        if tree is not None and self._float_maybe_dominant(window, n):
            fast = self._float_dominance(tree, window, n)
            if fast is not None:  # Theorem 15d(ii) read in double precision
                return fast
            head = _float_head(*reversed(self._sym)) if window <= _FLOAT_HEAD else None
            # b(n - 1) from below, exactly at the integer n - 1 (float(n - 1) may round to n or beyond above 2^53,
            # and numpy's sin(2 pi k) is noise at k = 1e18): one far term outweighs the window
            with arb_precision(96 + n.bit_length()):
                low = point_interval(tree, n - 1)[0]
            last = -math.inf if low is None else float(low)
            if head is not None and last - _logsumexp(head[:window]) > 800:
                return 0.0, 1.0
            dominant = _dominant_masses(tree, window, n)
            if dominant is not None:
                return float(dominant[0].mid()), float(dominant[1].mid())
        # a bias growing steeply towards W - 1 (its sum held by its last log(W) + 32 slopes): Theorem 15j first, each
        # side relative to its last term (Theorem 15i's proof declines a growing range, after Theorem 15h paid for T)
        steep = tree is not None and _steep_at_window(*reversed(self._sym), window)
        fast = _anchored_float(*reversed(self._sym), tree, window, n) if steep else None
        if fast is not None:
            return fast
        fast = self._em_float(window, n)
        if fast is not None:
            return fast
        fast = None if tree is None or steep else _anchored_float(*reversed(self._sym), tree, window, n)
        if fast is not None:  # Theorem 15j where Theorem 15's float declined
            return fast
        # Theorem 15g(iv)'s float is withdrawn: its quadrature reads b' only at nodes and
        # has no proved error (sqrt(d) - 0.5 e^{-e^{d - 999999849}} at W = 999900000, n = 1e9 gave 0.2057222409339728 for
        # 0.2054046678756502); a growing bias is answered by the enclosure's midpoint, or refused
        why = []
        balls = self._em_balls(window, n, why)
        if balls is not None:
            return float(balls[0].mid()), float(balls[1].mid())
        dominant = None if tree is None else _dominant_masses(tree, window, n)
        if dominant is not None:
            return float(dominant[0].mid()), float(dominant[1].mid())
        try:
            return self._monotone_masses(window, n)
        except DomainError as exc:
            if not why:
                raise
            # name the step that failed first (Theorem 15's), not only the fallback's cap
            raise DomainError("n", n, f"a length at which Theorem 15 or 15d encloses exp({bias_text(self.expression)}) (here "
                              f"{why[-1]}; and Theorem 13's fallback: {exc.domain})") from None

    def _float_dominance(self, tree, window, n):
        """``(1, 0)`` or ``(0, 1)`` when one side outweighs the other by more than ``e^750`` in double precision (Theorem
        15d(ii) with bounds read from ``b`` at the ends): a decreasing ``b`` on ``[W, n - 1]`` gives
        ``log T <= log(n - W) + b(W)``, an increasing one on ``[0, W - 1]`` gives ``log S_W <= log W + b(W - 1)``, one
        term bounds a sum below. The sign of ``b'`` is read first at the ~60 piece ends per side of :func:`_sides` (a
        cheap filter), then proved on the whole side by one interval bound of ``b'`` (Theorem 15d(v),
        :func:`monotone_on`); the end values are read in double (4 units of the gap). Where a value overflows a double
        (``exp(d/1000)`` at ``d = 1e299``) the two end values are Arb points at ``96 + log2 n`` bits. Biases with ``sin``
        or ``cos`` are left to the other routes (``sin(2 pi k)`` in double is noise at ``k = 1e18``)."""
        if _has_periodic(tree):
            return None
        d, b = self._sym
        fns = _numpy_fns(b, d)
        left, right = _sides(0, window - 1), _sides(window, n - 1)

        def vals(f, ks):
            with np.errstate(all="ignore"):
                try:
                    return np.asarray(f(np.array([float(k) for k in ks])), dtype=float) * np.ones(len(ks))
                except (ValueError, TypeError, OverflowError):
                    return None

        def arb_ends(ks):  # (L, U) exact arb points of b at each k (None where unbounded), 96 + log2 n bits
            with arb_precision(96 + n.bit_length()):
                return [point_interval(tree, k) for k in ks]

        def gap(lower, upper, count):  # lower - upper - log(count) as a double (nan: undecided)
            with np.errstate(all="ignore"):
                return float(np.float64(lower) - np.float64(upper) - math.log(count))

        slope_r = vals(fns[1], right[:-1] + [n - 1])
        if slope_r is not None and np.all(slope_r <= 0):  # b decreasing on [W, n - 1]: T <= (n - W) e^{b(W)}
            v = vals(fns[0], [0, window - 1, window])
            g = math.nan if v is None else gap(np.nanmax(v[:2]) if not np.all(np.isnan(v[:2])) else math.nan, v[2], n - window)
            # an infinite gap is read again exactly: b(W) = -inf in double may be an intermediate overflow
            # (-0.5 log(d**2 + 1) at W = 1e200 gave m = 1 for 0.67)
            if not math.isfinite(g):
                (l0, _), (l1, _), (_, uw) = arb_ends([0, window - 1, window])
                ls = [x for x in (l0, l1) if x is not None]
                g = float(max(ls) - uw - math.log(n - window)) if ls and uw is not None else math.nan
            # the sign of b' read at points missed a narrow bump (-0.05 sqrt(d) + 2000 e^{-((d - 999950000)/10)^2}
            # gave D = 0 for 1): answered only where b' <= 0 is proved on the whole range (Theorem 15d(v))
            if g > _FLOAT_GAP and monotone_on(_derivative_trees(b, d, 1), window, n - 1, -1):
                return 1.0, 0.0
        slope_l = vals(fns[1], left[:-1] + [window - 1])
        if slope_l is not None and np.all(slope_l >= 0):  # b increasing on [0, W - 1]: S_W <= W e^{b(W - 1)}
            v = vals(fns[0], [window - 1, n - 1])
            g = math.nan if v is None else gap(v[1], v[0], window)
            if not math.isfinite(g):
                (_, us), (lt, _) = arb_ends([window - 1, n - 1])
                g = float(lt - us - math.log(window)) if us is not None and lt is not None else math.nan
            if g > _FLOAT_GAP and monotone_on(_derivative_trees(b, d, 1), 0, window - 1, +1):
                return 0.0, 1.0
        return None

    def _float_maybe_dominant(self, window, n):
        """The double-precision pre-test of :func:`_maybe_dominant`: ``b`` at ``0, W - 1, W, n - 1`` in numpy (a
        value that overflows counts as a gap)."""
        with np.errstate(all="ignore"):
            try:
                v = np.asarray(self.bias(np.array([0.0, window - 1.0, float(window), float(n - 1)])), dtype=float)
            except (ValueError, TypeError, OverflowError):
                return True
        if np.any(np.isnan(v)):
            return True
        s, t = max(v[0], v[1]), max(v[2], v[3])
        if not (np.isfinite(s) and np.isfinite(t)):
            return True
        return bool(t - s - math.log(window) > 700 or s - t - math.log(n - window) > 700)

    def _em_float(self, window, n):
        """``(m, D)`` in double precision by Theorem 15 (p = 2) beyond a direct head, or ``None``."""
        d, b = self._sym
        tree = _compiled(b, d)  # Theorem 15i's proof of the quadrature and the remainder
        if tree is None:
            return None
        fns = _numpy_fns(b, d)
        N = _FLOAT_HEAD
        logw = _float_head(b, d)
        if logw is None:
            return None
        logsumexp = _logsumexp
        d3 = _derivative_trees(b, d, 3)  # Theorem 15h's bound of b''' on a range short against its start

        def one(k):
            # a range of a single term, (b(k), its error): b(k) as an Arb ball at 96 + log2 k bits, its midpoint within
            # the ball's radius and the midpoint's rounding (Theorem 15g(viii); 20 us, a tenth of the running error's
            # tree walk): b read in double carried the rounding of d/5 - 99998/5 into D unchecked (8.4e-12 at
            # k = 99999 for 5 e^{-((d - 99998)/5)^2}), and float(k) is not k beyond 2^53
            got = _arb_terms(b, d, [k])
            return None if got is None else (float(got[0][0]), float(got[1][0]))

        def range_log(expr, a, c, ref):
            """``(log S, rel)`` of one range by the float tail of ``expr`` (``b`` or ``b`` less terms of Theorem 15k),
            or ``None``. A short range of at most ``2^16`` integers below ``2^53`` that Theorem 15h declines (a bump in
            it) is summed term by term with Theorem 15g(vii)'s running error of ``b`` (:func:`_direct_log`), where
            :func:`float_tail_log` sums it in double unchecked (``5 e^{-((d - 99995)/3)^2}`` on ``[99997, 99999]``:
            7.3e-12 off); ``rel`` is Theorem 15h's own bound, else the float tail's acceptance: ``2^-38`` on a short
            range, ``2^-40 + 2^-39`` on a long one (Theorem 15i's proved part and Theorem 15g(v)'s rounding estimate)."""
            f3, ftree = (d3, tree) if expr is b else (_derivative_trees(expr, d, 3), _compiled(expr, d))
            efns = fns if expr is b else _numpy_fns(expr, d)
            short = short_range(a, c)
            if short and c < 1 << 53 and c - a < 1 << 16:
                if f3 is not None and c - a >= 1024:
                    got = taylor_pieces_log(efns, f3, a, c)
                    if got is not None:
                        return got
                if c - a + 1 <= _FLOAT_HEAD:
                    return _direct_log(expr, d, a, c)
                return _split_log(lambda x, y: None, lambda x, y: _direct_log(expr, d, x, y), a, c, TAYLOR_ACCEPT)
            out = float_tail_log(efns, a, c, ref, f3, ftree)
            return None if out is None else (out, TAYLOR_ACCEPT if short else PROVED_ACCEPT + 2.0**-39)

        def tail_log(a, c, ref=-math.inf, split=True):
            """``(log S, rel)`` for ``[a, c]``: the whole bias, else without terms proved negligible (Theorem 15k: their
            ``e^{2^-60} - 1`` or ``e^{2^-48} - 1`` added to ``rel``), else by halves (Theorem 15l), or ``None``."""
            dying = _has_dying_term(b, d)  # a term that falls below every double far out: Theorem 15k first
            out = None if dying else range_log(b, a, c, ref)
            if out is None:  # Theorem 15k: without the additive terms proved below 2^-60 on [a, c], if any
                reduced = _without_negligible_terms(b, d, a, c)
                if reduced is not None:
                    out = range_log(reduced, a, c, ref)
                    out = None if out is None else (out[0], out[1] + 2.0**-59)
                if out is None and dying:
                    out = range_log(b, a, c, ref)
            if out is None:  # Theorem 15k with 2^-48: a relative e^{2^-48} - 1, 1/1024 of the float's acceptance 2^-38
                reduced = _without_negligible_terms(b, d, a, c, _NEGLIGIBLE_FLOAT)
                if reduced is not None:
                    out = range_log(reduced, a, c, ref)
                    out = None if out is None else (out[0], out[1] + 2.0**-47)
            if out is None and split:  # Theorem 15l: a feature (a narrow bump) spoils the bounds on the whole range only
                # each part with its own bound (a part claimed 2^-38 whatever it was, so that halves of parts alone,
                # with the log-sum-exp's rounding on top, never met 2^-38 and a multi-bump bias fell to an O(n) sum)
                out = _split_log(lambda x, y: tail_log(x, y, split=False), lambda x, y: _direct_log(b, d, x, y), a, c,
                                 TAYLOR_ACCEPT + 2.0**-47)
            return out if out is not None and out[1] <= TAYLOR_ACCEPT + 2.0**-47 else None

        if window > N:
            # the distant side first: it declines more often (a growing bias), before the window side's proof is paid
            tn = tail_log(window, n - 1) if n - 1 > window else one(window)  # T alone: D's relative accuracy
            if tn is None:
                return None
            lh = _float_head_log(b, d)  # logsumexp(logw), formed once per expression like the head itself
            tw = tail_log(N, window - 1, lh) if window - 1 > N else one(N)
            if tw is None:
                return None
            log_head = np.logaddexp(lh, tw[0])
            log_tail = tn[0]
        else:
            log_head = logsumexp(logw[:window])
            rest = logsumexp(logw[window:]) if window < N else -math.inf  # the head's terms from W on, formed once
            tn = tail_log(N, n - 1, rest)
            if tn is None:
                return None
            log_tail = np.logaddexp(rest, tn[0]) if window < N else tn[0]
        # a single term's error (:func:`one`; the ranges' are checked in tail_log) within the acceptance, or the sides
        # more than e^800 apart beyond it (a mass below 2^-1074 of the other: 0 and 1 are its doubles, Theorem 15d(ii))
        rel = max(tn[1], tw[1] if window > N else 0.0)
        if not (rel <= TAYLOR_ACCEPT + 2.0**-47 or abs(log_tail - log_head) > 800 + 2 * rel):
            return None
        # 1/(1 + e^x) as e^(-log(1 + e^x)): no overflow of e^x (math.exp(800) raised for log(1 + d) at n = 1e300),
        # and subnormal masses keep their digits
        m = float(np.exp(-np.logaddexp(0.0, log_tail - log_head)))
        D = float(np.exp(-np.logaddexp(0.0, log_head - log_tail)))
        return m, D

    def _geometric_balls(self, window, n):
        """``(m, D)`` of a linear bias ``alpha + beta d`` in closed form (Theorem 15b), or ``None``."""
        d, b = self._sym
        beta = None if self._callable is not None else _linear_bias(b, d)
        if beta is None:
            return None
        # the exponents beta W and beta n are formed to 2^-70 of themselves and of 1
        extra = max(0, (abs(beta.numerator) * n).bit_length() - beta.denominator.bit_length() + 2) if beta else 0
        with arb_precision(96 + extra):
            r = _geometric_ratio(beta, window, n)
            m, D = 1 / (1 + r), (r / (1 + r) if r == 0 else 1 / (1 + 1 / r))
            if is_tight(m, _EM_BITS) and is_tight(D, _EM_BITS):
                return m, D
        return None

    def _em_balls(self, window, n, why=None, used=None):
        """``(m, D)`` as Arb balls of relative radius below ``2^-55`` (Theorem 15b for a linear bias,
        else Theorem 15), or ``None``."""
        d, b = self._sym
        tree = _compiled(b, d)
        if tree is None or self._callable is not None:
            return None
        geometric = self._geometric_balls(window, n)
        if geometric is not None:
            return geometric
        why = [] if why is None else why
        periodic = _periodic_balls(tree, window, n, why)
        if periodic is not None:
            return periodic
        # b(W) is formed to 2^-70 of 1 (e^b to 2^-70 of itself) and a far window's ends resolved
        try:
            with np.errstate(all="ignore"):
                bw = float(np.asarray(self.bias(np.array([float(window)])))[0])
        except (ValueError, TypeError, OverflowError):  # complex or not a number there: the balls will say so
            bw = math.nan
        extra = int(math.log2(1.0 + abs(bw))) if math.isfinite(bw) else 0
        # the ends of T's range [W, n - 1] are resolved in u = log x when (n - W)/W is tiny (Theorem 15, far windows):
        # log2(W / (n - W)) bits more, not log2 W (1100 bits at W = 1e299 made far windows 10x dearer)
        prec = 96 + extra + (window // (n - window)).bit_length()
        split = _split(tree)
        # a side's sum depends on the head N only while the head cuts into it: S_W = sum_{k < W} is the same for every
        # N >= W, T = sum_{W <= k < n} for every N <= W; each is formed once per route and reused (a refusal too),
        # where three heads x two routes summed both sides six times (-3 log(1 + d) + 20 sin(d) at 1e18: 60 ms)
        memo = {}

        def key_of(twisted, lo, hi, N):
            return twisted, lo, N if lo < N <= hi else None

        def side(twisted, lo, hi, N):
            key = key_of(twisted, lo, hi, N)
            if key not in memo:
                if twisted:
                    memo[key] = mixed_sum_arb(tree, split, lo, hi, N, prec + 16, why=why)
                else:
                    # Theorem 15k: beyond a point where some terms are below 2^-60, without them (first where a term of
                    # b falls below every double far out: Theorem 15 on the whole bias then declines)
                    dying = _has_dying_term(b, d)
                    memo[key] = self._sum_without_negligible(lo, hi, N, prec, why) if dying else None
                    if memo[key] is None:
                        memo[key] = range_sum_arb(tree, lo, hi, N, prec, why)
                    if memo[key] is None and not dying:
                        memo[key] = self._sum_without_negligible(lo, hi, N, prec, why)
            return memo[key]

        for N in _EM_HEADS:
            for twisted in ((True, False) if split is not None else (False,)):
                # h + beta sin(omega d + phi): Theorem 15f first (Theorem 15's remainder does not shrink there)
                with arb_precision(prec + 16 if twisted else prec):
                    if memo.get(key_of(twisted, window, n - 1, N), 0) is None:
                        continue  # the distant side was refused already, the same sum: no need of the window side
                    try:
                        if twisted:
                            S_W = side(twisted, 0, window - 1, N)
                            T = side(twisted, window, n - 1, N) if S_W is not None else None
                        else:  # Theorem 15 fails on a periodic term's distant side first (its remainder does not shrink)
                            T = side(twisted, window, n - 1, N)
                            S_W = side(twisted, 0, window - 1, N) if T is not None else None
                    except (ValueError, ZeroDivisionError, ArithmeticError):
                        continue
                    if S_W is None or T is None or not (S_W > 0) or not (T >= 0):
                        continue
                    m = 1 / (1 + T / S_W)
                    D = T / (S_W + T) if T == 0 else 1 / (1 + S_W / T)
                    if is_tight(m, _EM_BITS) and is_tight(D, _EM_BITS):
                        if twisted and used is not None:
                            used.append("twisted")
                        return m, D
        return None

    def _sum_without_negligible(self, lo, hi, N, prec, why):
        """``sum_{k=lo}^{hi} e^{b(k)}`` as an Arb ball, split at the first ``K = 2^j N`` beyond which some top-level
        additive terms of ``b`` are proved within ``[-2^-60, 2^-60]`` (:func:`_without_negligible_terms`): Theorem 15 with
        ``b`` below ``K``, with ``b`` less those terms from ``K`` on, times the ball ``e^{[-2^-60, 2^-60]}`` (Theorem 15k);
        ``None`` where there is no such ``K`` (40 doublings) or a part is not proved."""
        d, b = self._sym
        if not b.is_Add:
            return None
        K, reduced = max(lo, N), None
        for _ in range(40):
            if K > hi:
                return None
            reduced = _without_negligible_terms(b, d, K, hi)
            if reduced is not None:
                break
            K *= 2
        tree_h = None if reduced is None else _compiled(reduced, d)
        first = rest = None
        if tree_h is not None:
            first = range_sum_arb(_compiled(b, d), lo, K - 1, N, prec, why) if K > lo else flint.arb(0)
            rest = None if first is None else range_sum_arb(tree_h, K, hi, K, prec, why)
        small = flint.arb(_NEGLIGIBLE)
        if rest is None:
            # the terms within 2^-58 on the whole side (2^-59 e^{-((d - x0)/10)^2}: a bump below the float's accuracy
            # but above 2^-60), carried as the ball e^{[-2^-58, 2^-58]}, 1/8 of the 2^-55 asked (Theorem 15k)
            K = max(lo, N)
            reduced = _without_negligible_terms(b, d, K, hi, _NEGLIGIBLE_WIDE)
            tree_h = None if reduced is None else _compiled(reduced, d)
            if tree_h is None:
                return None
            first = range_sum_arb(_compiled(b, d), lo, K - 1, N, prec, why) if K > lo else flint.arb(0)
            rest = None if first is None else range_sum_arb(tree_h, K, hi, K, prec, why)
            if rest is None:
                return None
            small = flint.arb(_NEGLIGIBLE_WIDE)
        return first + rest * (-small).exp().union(small.exp())

    def mass_enclosures(self, window, n) -> BiasMasses:
        """Proved enclosures of :math:`m_n(W)` and :math:`D_n(W)` at one length ``n`` (any integer up to 1e300).

        Up to ``n = 64`` every term is summed in Arb; beyond, the terms below a head ``N``
        (64, 256 or 1024) are summed in Arb and the rest enclosed by Theorem 15
        (``proofs/closed_form_tails.md``): Euler–Maclaurin of order 12 with the remainder bounded by
        the expression's 12th derivative on geometric pieces, and the integral by Arb's
        ``acb.integral``. The relative radius is at most ``2^-55``. ``route`` says which theorem answered:
        "direct Arb sum", "Euler-Maclaurin (Theorem 15)", "geometric closed form (Theorem 15b)",
        "dominance bound (Theorem 15d)" (one mass below ``e^-746``: ``[0, 2^-1074]`` and ``[1 - 2^-53, 1]``,
        the tightest double enclosures), "anchored geometric sums (Theorem 15j)" (a bias growing towards
        ``n`` and linear to ``2^-62`` over the terms that matter: ``sqrt(d)`` next to ``n = 1e300``),
        "Jacobi-Anger closed form (Theorem 15e)", "Jacobi-Anger with
        twisted Euler-Maclaurin sums (Theorem 15f)" or "empty distant sum" (``W = n``).

        Raises
        ------
        DomainError
            (parameter ``n``) for a callable bias, an expression outside the compiled grammar
            (``Abs``, ``Min``, ``Max``), or one whose tail no theorem encloses that tightly (e.g. two
            periodic terms beside a decay), naming the step that failed; (parameter ``bias``) when the
            weights of a short sum are beyond Arb's range and no side dominates.
        """
        from .._validation import check_int, check_window

        window = check_int(window, "window")
        values, shape = check_lengths(n)
        if shape is not None:
            raise DomainError("n", n, "one integer length (call once per length)")
        n = values[0]
        check_window(window, n)
        if window >= n:  # T is an empty sum: m = 1, D = 0 exactly, whatever the weights (e^(1e300 d) included)
            return BiasMasses(Enclosure(1.0, 1.0, 1.0, 0.0), Enclosure(0.0, 0.0, 0.0, 0.0), "empty distant sum", True)
        d, b = self._sym
        tree = None if self._callable is not None else _compiled(b, d)
        if tree is None:
            raise DomainError("n", n, "a length for an expression bias in the grammar of Theorem 15 (not a callable, Abs, Min, Max)")
        dominant_route = "dominance bound (Theorem 15d)"

        def masses(m, D, route, exact):
            # both masses lie in [0, 1]: the outward-rounded ends are clipped there (a proved
            # end above 1 says nothing more); a ball that is not finite (e^b overflows Arb's
            # exponent range, e.g. exp(exp(d))) is refused by name
            try:
                pair = [enclosure_from_arb(x) for x in (m, D)]
            except ValueError:
                raise DomainError("bias", bias_text(self.expression), f"a bias whose weights e^b(d), d < {n}, are finite "
                                  "numbers in ball arithmetic") from None
            pair = [dataclasses.replace(e, lo=min(max(e.lo, 0.0), 1.0), hi=min(max(e.hi, 0.0), 1.0)) for e in pair]
            if route == dominant_route:  # a mass below e^-746: [0, 2^-1074] and [1 - 2^-53, 1] are the tightest
                below = math.nextafter(1.0, 0.0)
                pair = [dataclasses.replace(e, lo=below) if e.lo > 0.5 else e for e in pair]
            return BiasMasses(pair[0], pair[1], route, exact)

        if n <= _EM_HEADS[0]:
            with arb_precision(96):
                S_W = direct_sum_arb(tree, 0, window - 1)
                T = direct_sum_arb(tree, window, n - 1)
                m = 1 / (1 + T / S_W)
                D = T / (S_W + T)
            if not (m.is_finite() and D.is_finite()):  # e^b beyond Arb's range (exp(exp(d))): the logs may still say
                dominant = _dominant_masses(tree, window, n)
                if dominant is not None:
                    return masses(*dominant, dominant_route, False)
            return masses(m, D, "direct Arb sum", True)
        if _linear_bias(b, d) is None and _periodic(tree) is None and _maybe_dominant(tree, window, n):
            dominant = _dominant_masses(tree, window, n)
            if dominant is not None:
                return masses(*dominant, dominant_route, False)
        anchored = _anchored_balls(b, d, tree, window, n) if _steep_at_window(b, d, window) else None
        if anchored is not None:  # a bias growing towards n, linear over each side's kept range (Theorem 15j(v))
            return masses(*anchored, "anchored geometric sums (Theorem 15j)", False)
        why, used = [], []
        balls = self._em_balls(window, n, why, used)
        if balls is None:
            dominant = _dominant_masses(tree, window, n)
            if dominant is not None:
                return masses(*dominant, dominant_route, False)
            reason = f"; here {why[-1]}" if why else ""
            raise DomainError(
                "n", n, f"a length whose tail Theorem 15 encloses to 2^-55 for exp({bias_text(self.expression)}) (lengths up to "
                f"{_EM_HEADS[0]} are summed directly; beyond, the tail must be smooth enough for order 12){reason}"
            )
        if _linear_bias(b, d) is not None:
            route = "geometric closed form (Theorem 15b)"
        elif _periodic(tree) is not None:
            route = "Jacobi-Anger closed form (Theorem 15e)"
        elif used:
            route = "Jacobi-Anger with twisted Euler-Maclaurin sums (Theorem 15f)"
        else:
            route = "Euler-Maclaurin (Theorem 15)"
        with arb_precision(96):
            return masses(balls[0], balls[1], route, False)

    def _monotone_masses(self, window, n):
        """Direct head plus Theorem 13's monotone tail (the route before Theorem 15)."""
        d, b = self._sym
        if window > DIRECT_MAX:
            raise DomainError("window", window, f"an integer at most {DIRECT_MAX} for a user bias")
        refusal = DomainError("n", n, f"a length at which exp({bias_text(self.expression)}) is read in double within 2^-39 "
                              "of the masses (first-order estimate) or enclosed by Theorem 15")

        def direct():  # every b(k), k < n, summed: checked first (Theorem 15g(vii)), as the head below
            if not weights_error_ok(b, d, n, window):
                raise refusal
            return super(Bias, self)._masses(window, n)

        if n - 1 <= max(1 << 12, window):
            return direct()
        # the direct head grows (x16) until the tail bracket's width f(N) is below 2^-60 of the total and of the
        # distant part (a tiny D read against the total came back as the bracket's midpoint, 0.46 off)
        N = 1 << 12
        while True:
            N = max(N, window)
            if not weights_error_ok(b, d, N, window):  # Theorem 15g(vii): the head's b in double not good enough
                raise refusal
            logw = self.log_weights(N)
            shift = float(np.max(logw))
            w = np.exp(logw - shift)
            head = math.fsum(w[:window])
            mid_part = math.fsum(w[window:])
            tail = _tail_sum_arb(b - shift, d, N, n)
            if tail is None and n <= DIRECT_MAX:  # no proved tail, but the direct sum is affordable
                return direct()
            if tail is None:
                raise DomainError(
                    "n",
                    n,
                    f"an integer at most {DIRECT_MAX} for this bias: beyond it the tail needs b(d) proved "
                    "decreasing (log, exp, powers, sin, cos only) and its integral enclosed by Arb",
                )
            t = float(tail.mid())
            total = head + mid_part + t
            width = float(tail.rad()) * 2
            if width <= 2.0**-60 * min(total, mid_part + t) or (
                N >= DIRECT_MAX and width <= 2.0**-40 * min(total, mid_part + t)
            ):
                return head / total, (mid_part + t) / total
            if N >= DIRECT_MAX:
                if n <= DIRECT_MAX:
                    return direct()
                raise refusal
            N = min(N * 16, DIRECT_MAX)
            if N >= n - 1:  # the head would reach the end: the direct sum is exact and no dearer
                return direct()

    def _masses_array(self, window, n):
        """Arrays of lengths up to ``2**22``: one row of log-weights for the longest, and the tail
        of each length as a log-sum-exp over the segment since the previous length, accumulated
        with ``logaddexp`` (each weight is read once; the bias does not depend on ``n``)."""
        from scipy.special import logsumexp

        top = int(n.max())
        if top > DIRECT_MAX:
            return None
        uniq, inverse = np.unique(n, return_inverse=True)
        if self._callable is None and not weights_error_ok_lengths(*reversed(self._sym), uniq[uniq > window], window):
            return None  # Theorem 15g(vii): b in double not good enough for some length; each length by :meth:`_masses`
        logw = self.log_weights(top)
        head = logsumexp(logw[:window])
        tails = np.empty(uniq.size)
        acc, start = -np.inf, window
        for i, nk in enumerate(uniq.tolist()):
            if nk > start:
                acc = np.logaddexp(acc, logsumexp(logw[start:nk]))
                start = nk
            tails[i] = acc
        total = np.logaddexp(head, tails)
        m = np.exp(head - total)
        D = np.where(np.isneginf(tails), 0.0, np.exp(tails - total))
        return m[inverse].reshape(n.shape), D[inverse].reshape(n.shape)

    def _verdict(self):
        d, b = self._sym
        try:
            kind, reason = run_budgeted(
                _decide, b, d, self._callable is not None, time_budget=self.time_budget, memory_budget=self.memory_budget
            )
        except BudgetExceeded as exc:
            return Verdict(self, None, "undecided", f"the summability of e^b(d) was not decided: {exc.reason}.")
        if kind == "bounded":
            return self._bounded(reason)
        if kind == "diluting":
            return Verdict(self, False, "diluting", reason, None)
        return Verdict(self, None, "undecided", reason)

    def limit_enclosure(self, window) -> Enclosure:
        """A proved enclosure of :math:`D_\\infty(W) = \\lim_n D_n(W)` for a summable expression bias.

        :math:`D_\\infty = T_\\infty/(S_W + T_\\infty)` with :math:`S_W = \\sum_{d<W} e^{b(d)}` (Theorem 15 or direct
        terms) and :math:`T_\\infty = \\sum_{d \\ge W} e^{b(d)}`: Theorem 15 (or 15f for a periodic term beside a
        decay) up to ``C - 1`` and the envelope of Theorems 15c and 15c' (``proofs/closed_form_tails.md``; sin, cos
        and ``c e^(a + g d)`` terms included) beyond, all in Arb; relative radius below ``2^-55``.
        A linear bias ``alpha + beta d`` (``beta < 0``) is the geometric closed form ``e^{beta W}``.

        Raises
        ------
        DomainError
            (parameter ``expr``) naming the step that failed: a callable bias, a term outside the
            envelope's forms (by its text, e.g. ``-exp(-d)*sin(d)``), no summable term (e.g. ``0.5*sin(d)``,
            ``-log(1 + d)``), or, the envelope holding, Theorem 15 up to its cut-off (with the reason).
        """
        from .._validation import check_int

        window = check_int(window, "window", minimum=1)
        d, b = self._sym
        tree = None if self._callable is not None else _compiled(b, d)
        if tree is None:
            raise DomainError("expr", bias_text(self.expression), "an expression bias in the grammar of Theorem 15 (not a callable, Abs, Min, Max)")
        beta = _linear_bias(b, d)
        if beta is not None:
            if beta >= 0:
                raise DomainError("expr", bias_text(self.expression), "a summable bias (this linear one is not)")
            import flint

            with arb_precision(96 + max(0, (-beta.numerator * window).bit_length() - beta.denominator.bit_length() + 2)):
                bb = flint.arb(beta.numerator) / beta.denominator
                return _unit(enclosure_from_arb((bb * window).exp()))  # T/(S_W + T) = e^{beta W} (Theorem 15b)
        why = "no enclosure"
        for N in _EM_HEADS:
            with arb_precision(96):
                try:
                    S_W = range_sum_arb(tree, 0, window - 1, N, 96)
                    T = infinite_sum_arb(tree, window, N, 96, names=[bias_text(a) for a in import_sympy().Add.make_args(b)])
                except (ValueError, ZeroDivisionError, ArithmeticError):
                    S_W, T = None, "an Arb evaluation failed"
                if isinstance(T, str):
                    why = T
                    if not T.startswith("the envelope holds"):
                        break  # the envelope's form: no head changes it
                    continue
                if S_W is None or not (S_W > 0) or not (T > 0):
                    continue
                D = 1 / (1 + S_W / T)
                if is_tight(D, _EM_BITS):
                    return _unit(enclosure_from_arb(D))
        raise DomainError("expr", bias_text(self.expression), f"a bias whose D_oo(W) Theorems 15 and 15c enclose (here: {why})")

    def _bounded(self, reason):
        d, b = self._sym

        def limit(W):
            if self._callable is None and _compiled(b, d) is not None:
                try:
                    return self.limit_enclosure(W).mid  # certified (Theorems 15-15c)
                except DomainError:
                    pass  # outside Theorem 15c's envelope: the sampled route below
            try:
                values = run_budgeted(_tail_limit, self.bias, b, d, W, time_budget=self.time_budget, memory_budget=self.memory_budget)
            except BudgetExceeded as exc:
                raise PrecisionError(f"D_oo(W) for exp({bias_text(self.expression)}) was not computed: {exc.reason}") from None
            if not all(math.isfinite(v) for v in values):
                raise PrecisionError(f"D_oo(W) for exp({bias_text(self.expression)}) is not finite at the cut-offs 2^14 and 2^17")
            if abs(values[0] - values[1]) > 1e-6 * abs(values[1]):
                raise PrecisionError(
                    f"D_oo(W) for exp({bias_text(self.expression)}) cannot be certified: cut-offs 2^14 and 2^17 give "
                    f"{values[0]:.8g} and {values[1]:.8g}"
                )
            return values[1]

        return Verdict(self, True, "bounded", reason, None, limit_fn=limit)

    def __repr__(self):
        shown = self.expression if self._callable is not None else self.expr.subs(self._sym[0].name, self._sym[0])
        return f"Bias({bias_text(shown)!r})"
