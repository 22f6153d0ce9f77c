"""Machine checks of the inequalities claimed in proofs/ (run by tests/test_proof_checks.py).

Each claim is an inequality ``lhs <= rhs`` on a box of parameters, decided by
:func:`intervals.prove` with outward-rounded interval arithmetic over Arb (see
``intervals.py``): the box is bisected until every sub-box is decided, a counterexample
is found, or the budget runs out (then the verdict is ``"undecided"``, never
``"proved"``). Where both ends of an inequality are attained, a *certificate* (the gap
``rhs - lhs`` written so that interval arithmetic sees its sign) is used, and only after
sympy has found it identically equal to ``rhs - lhs``.

A claim restates a step of a proof in finitely many real variables; the docstring of
each builder says which step and why the reduction is exact. Claims over a finite set of
integers (window sizes, lengths, orders) are one box claim per element of the set.
"""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction
from pathlib import Path

import flint

_here = Path(__file__).resolve().parent
if "proof_intervals" in sys.modules:
    iv = sys.modules["proof_intervals"]
else:
    _spec = importlib.util.spec_from_file_location("proof_intervals", _here / "intervals.py")
    iv = importlib.util.module_from_spec(_spec)
    sys.modules["proof_intervals"] = iv
    _spec.loader.exec_module(iv)

Claim, prove, InequalityRecord, tol = iv.Claim, iv.prove, iv.InequalityRecord, iv.tol


# --- the library's own expressions (one source: a check evaluates the code, not a copy of it)


def library_expressions(fn, names):
    """The expressions that ``fn``'s source assigns to ``names`` (the last assignment of each), compiled.

    ``fn.__mutated_source__`` (set by the mutation test on a corrupted copy) replaces the source."""
    import ast
    import inspect
    import textwrap

    fn = getattr(fn, "__func__", fn)
    key = (fn.__code__, getattr(fn, "__mutated_source__", None), tuple(names))
    if key in _EXPRESSIONS:
        return _EXPRESSIONS[key]
    source = getattr(fn, "__mutated_source__", None) or textwrap.dedent(inspect.getsource(fn))
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in names:
                out[node.targets[0].id] = compile(ast.Expression(node.value), f"<{fn.__name__}>", "eval")
    missing = set(names) - set(out)
    if missing:
        raise LookupError(f"{fn.__name__} assigns no {sorted(missing)}")
    _EXPRESSIONS[key] = out
    return out


_EXPRESSIONS = {}


def _lib(kind, name, **names):
    """Evaluate the library expression ``name`` with the variables ``names`` (ball code on intervals/sympy)."""
    import importlib

    module = importlib.import_module("otprior.ot_prior")
    fn = {"dilution": module.ot_dilution_bound}[kind]
    exprs = library_expressions(fn, (name,))
    scope = {**fn.__globals__, **iv.ball_namespace("sym" if any(isinstance(v, iv.SymArb) for v in names.values()) else "iv")}
    return eval(exprs[name], scope, dict(names))  # a compiled expression of the library's own source, not user text


def _as_ball(ops, x):
    """Wrap a value for the library's ball code: an :class:`iv.SymArb` under sympy, else as is."""
    return iv.SymArb(x) if ops is iv.SYM_OPS else x


def _unwrap(x):
    return x.e if isinstance(x, iv.SymArb) else x


# --- Theorem 5 (proofs/bounded_score_dilution.md)


def _theorem5_spread(ops, B, rho):
    """The proof's spread of the ratios r_j: e^(2B + osc(delta)), osc(delta) <= 4 rho B / (1 - rho)."""
    return ops.exp(2 * B + 4 * rho * B / (1 - rho))


def _library_share(ops, B, rho, m):
    """``ot_dilution_bound``'s own expression: ``log_k = 2b(1+r)/(1-r)`` and ``1/(1 + e^-log_k (1-m)/m)``."""
    b, r, ball = _as_ball(ops, B), _as_ball(ops, rho), _as_ball(ops, m)
    log_k = _lib("dilution", "log_k", b=b, r=r)
    return _unwrap(_lib("dilution", "val", log_k=log_k, ball=ball))


def bounded_score_share(B_max=1.0, rho_max=0.875, budget=4000):
    """Theorem 5, last step, as the library evaluates it: a row whose ratios ``r_j`` spread over at most
    the proof's factor ``e^(2B + 4 rho B/(1-rho))`` gives the window at most ``ot_dilution_bound``'s value
    ``1/(1 + e^(-log K)(1 - m0)/m0)``, with the library's ``log K``.

    Dividing by the smallest ratio, the window's and the tail's weighted mean ratios are
    ``x = 1 + (S-1)a`` and ``y = 1 + (S-1)b`` with ``a, b`` in [0, 1] (``S`` the spread), and the share is
    ``x m0 / (x m0 + y (1 - m0))``: five real variables, no loss. Both ends are attained at
    ``a = 1, b = 0`` (``tight``), so the spread and the library's ``K`` must agree; the certificate
    ``m0 (1-m0) (K-1)(1 - a + K b) / (...)`` (checked by sympy against the library's expression) decides
    the boxes that touch the equality set.
    """

    def sides(ops, B, rho, m, a, b):
        S = _theorem5_spread(ops, B, rho)
        x, y = 1 + (S - 1) * a, 1 + (S - 1) * b
        return [(x * m / (x * m + y * (1 - m)), _library_share(ops, B, rho, m))]

    def certificate(ops, B, rho, m, a, b):
        K = ops.exp(2 * B * (1 + rho) / (1 - rho))
        x, y = 1 + (K - 1) * a, 1 + (K - 1) * b
        return [m * (1 - m) * (K - 1) * (1 - a + K * b) / ((x * m + y * (1 - m)) * (1 + (K - 1) * m))]

    return Claim(
        "bounded_score_share",
        "proofs/bounded_score_dilution.md (Theorem 5)",
        "x m0/(x m0 + y(1-m0)) <= 1/(1 + e^-logK (1-m0)/m0) for x, y in [1, e^(2B+4 rho B/(1-rho))], "
        "logK = 2B(1+rho)/(1-rho) as ot_dilution_bound computes it",
        {"B": (0.0, B_max), "rho": (0.0, rho_max), "m": (0.0, 1.0), "a": (0.0, 1.0), "b": (0.0, 1.0)},
        sides,
        certificate,
        budget=budget,
        tight=(({"B": 0.5, "rho": 0.5, "m": 0.25, "a": 1, "b": 0}, 0, 2.0**-100),
               ({"B": 0.125, "rho": 0.75, "m": 0.5, "a": 1, "b": 0}, 0, 2.0**-100)),
    )


def bounded_score_linear(K_max=2.0**40, budget=2000):
    """Theorem 5: ``K m0 / (1 + (K - 1) m0) <= K m0`` for every ``K >= 1`` (equality at ``m0 = 0`` or ``K = 1``;
    ``K`` is a variable: the claim is the same for every factor)."""

    def sides(ops, K, m):
        return [(_window_share(K, m), K * m)]

    def certificate(ops, K, m):
        return [K * (K - 1) * m * m / (1 + (K - 1) * m)]

    return Claim(
        "bounded_score_linear",
        "proofs/bounded_score_dilution.md (Theorem 5)",
        "K m0/(1+(K-1)m0) <= K m0 for K >= 1",
        {"K": (1.0, K_max), "m": (0.0, 1.0)},
        sides,
        certificate,
        budget=budget,
        tight=(({"K": 1, "m": 0.5}, 0, 0), ({"K": 64, "m": 2.0**-60}, 0, 2.0**-50)),
    )


def _window_share(K, m):
    """Theorem 5's bound as a function of the factor and the constant-score share: ``K m / (1 + (K - 1) m)``."""
    return K * m / (1 + (K - 1) * m)


def bounded_score_monotone(K_max=2.0**40, budget=2000):
    """Theorem 5 (checks.py::check_bounded_score_constant derives the partial derivatives by sympy):
    ``K m / (1 + (K-1) m)`` increases in ``m`` and in ``K``: both partial derivatives, derived by sympy from
    the bound itself (not from a formula for them), are >= 0. ``d/dK`` vanishes at
    ``m = 0`` and ``m = 1`` (``tight``)."""

    import sympy as sp

    Ks, ms = sp.symbols("K m", positive=True)
    bound = _window_share(Ks, ms)
    d_m, d_K = (sp.factor(sp.diff(bound, v)) for v in (ms, Ks))  # derived by sympy from the bound itself

    def sides(ops, K, m):
        env = {"K": K, "m": m}
        return [(0, iv.sym_eval(d_m, env)), (0, iv.sym_eval(d_K, env))]

    return Claim(
        "bounded_score_monotone",
        "proofs/bounded_score_dilution.md (Theorem 5)",
        "d/dm [K m/(1+(K-1)m)] >= 0 and d/dK [K m/(1+(K-1)m)] >= 0 on K in [1, 2^40], m in [0, 1]",
        {"K": (1.0, K_max), "m": (0.0, 1.0)},
        sides,
        budget=budget,
        tight=(({"K": 2, "m": 0}, 1, 0), ({"K": 2, "m": 1}, 1, 0)),
    )


# --- Theorem 10 (proofs/content_bound.md)


def _library_band(ops, B, T, H):
    """``content_band_balls(T, H, B)``, the library's own code, on intervals, jets or sympy."""
    from otprior import content_bound as module

    fn = iv.library_function(module.content_band_balls, **iv.ball_namespace("sym" if ops is iv.SYM_OPS else "iv"))
    lo, hi = fn(_as_ball(ops, T), _as_ball(ops, H), _as_ball(ops, B) if ops is iv.SYM_OPS else B)
    return _unwrap(lo), _unwrap(hi)


M_MAX = 1 - 2.0**-30  # window shares up to here: the library divides by the tail T = 1 - m (T = 0 is its own branch)


def content_band(B_max=4.0, budget=4000):
    """Theorem 10 as the library evaluates it: ``D-(T, H, B) <= D <= D+(T, H, B)`` with ``D-, D+`` from
    ``otprior.content_bound.content_band_balls`` (its code run on intervals).

    With ``|e_d| <= B`` the tail's and the window's weighted means of ``e^{e_d}`` are
    ``e^beta`` and ``e^gamma`` with ``beta = B(2a-1)``, ``gamma = B(2b-1)``, ``a, b`` in [0, 1];
    with ``m = H/(H+T)``, ``D = (1-m) e^beta / ((1-m) e^beta + m e^gamma)``. Both ends are
    attained (``tight``), so the certificates ``(1-m) m e^gamma expm1(2B(1+a-b)) / (...)`` and
    ``(1-m) m e^(beta-2B) expm1(2B(1+b-a)) / (...)`` (checked by sympy against the library's
    expressions) are used.
    """

    def parts(ops, B, m, a, b):
        beta, gamma = B * (2 * a - 1), B * (2 * b - 1)
        tail, window = (1 - m) * ops.exp(beta), m * ops.exp(gamma)
        D = tail / (tail + window)
        return beta, gamma, tail, window, D

    def sides(ops, B, m, a, b):
        *_, D = parts(ops, B, m, a, b)
        lower, upper = _library_band(ops, B, 1 - m, m)
        return [(lower, D), (D, upper)]

    def certificate(ops, B, m, a, b):
        beta, gamma, tail, window, D = parts(ops, B, m, a, b)
        den_d = tail + window
        g1 = (1 - m) * m * ops.exp(gamma) * ops.expm1(2 * B * (1 + a - b)) / (den_d * ((1 - m) + ops.exp(2 * B) * m))
        g2 = (1 - m) * m * ops.exp(beta - 2 * B) * ops.expm1(2 * B * (1 + b - a)) / (
            den_d * ((1 - m) + ops.exp(-2 * B) * m)
        )
        return [g1, g2]

    return Claim(
        "content_band",
        "proofs/content_bound.md (Theorem 10)",
        "content_band_balls(T, H, B) = (T/(T+e^{2B}H), T/(T+e^{-2B}H)) brackets D for content within B",
        {"B": (0.0, B_max), "m": (0.0, M_MAX), "a": (0.0, 1.0), "b": (0.0, 1.0)},
        sides,
        certificate,
        budget=budget,
        tight=(({"B": 1, "m": 0.25, "a": 0, "b": 1}, 0, 2.0**-100), ({"B": 1, "m": 0.25, "a": 1, "b": 0}, 1, 2.0**-100),
               ({"B": 1, "m": 0, "a": 0.5, "b": 0.5}, 0, 0), ({"B": 1, "m": 0, "a": 0.5, "b": 0.5}, 1, 0),
               ({"B": 1, "m": 1, "a": 0.5, "b": 0.5}, 0, 0), ({"B": 1, "m": 1, "a": 0.5, "b": 0.5}, 1, 0)),
    )


# --- Lemma 9a (proofs/margin_selection.md): the library's growth, its Lipschitz constant and its factors


def _sum_terms(d0, d1, alpha, o):
    """sum_{d=d0}^{d1} (d + o)^-alpha term by term (replaces ``arb_sum`` when margin's code runs on a box)."""
    total = 0
    for d in range(d0, d1 + 1):
        total = total + (-alpha * (d + o).log()).exp()
    return total


def margin_growth(W, L0, L1, relative, B, offset, kind="iv", sums=None):
    """margin.py's ``_Growth`` with its own ``__init__``, ``_record`` and ``decreasing_upper`` code run on
    intervals/jets (``kind="iv"``) or sympy (``kind="sym"``): ``(self, record(alpha), upper(alpha))``.

    ``sums`` replaces ``arb_sum`` (default: the finite sum term by term); ``content_band_balls`` is the
    library's, run on the same kind of numbers."""
    from types import SimpleNamespace

    from otprior import content_bound, margin

    fakes = iv.ball_namespace(kind)
    band = iv.library_function(content_bound.content_band_balls, **fakes)
    self = SimpleNamespace(evaluations=0)
    iv.library_function(margin._Growth.__init__, **fakes)(self, W, L0, L1, relative, B, offset)
    record = iv.library_function(margin._Growth._record, **fakes, arb_sum=sums or _sum_terms, content_band_balls=band)
    upper = iv.library_function(margin._Growth.decreasing_upper, **fakes)
    return self, (lambda alpha: record(self, alpha, prec=0)), (lambda alpha: upper(self, alpha))


def _offset(o):
    return iv._exact(Fraction(o))


def _alpha_jet(alpha):
    """alpha as a jet in itself, so that the library's code returns d/dalpha with every value."""
    return iv.Jet(alpha, (iv._exact(1),)) if isinstance(alpha, iv.Iv) else alpha


def growth_log_lipschitz(kind, W, L0, L1, B=0.0, offset=1, alpha=(1.0, 6.0), budget=1500):
    """Lemma 9a(i) as ``margin_for`` uses it: ``|d/dalpha log G| <= 2 Lambda``, with ``G`` the growth that
    ``_Growth._record`` computes (``phi = log(up * down)``) and ``2 Lambda`` the ``lipschitz`` that
    ``_Growth.__init__`` computes, both by the library's code run on intervals; the derivative by
    forward differentiation of that code (not by the lemma's argument)."""
    rel = kind == "relative"

    def sides(ops, alpha):
        self, record, _ = margin_growth(W, L0, L1, rel, B, _offset(offset))
        slope = record(_alpha_jet(alpha)).phi.d[0]
        return [(slope, self.lipschitz), (-slope, self.lipschitz)]

    return Claim(
        f"growth_log_lipschitz_{kind}_W{W}_L{L0}_{L1}_B{B:g}",
        "proofs/margin_selection.md (Lemma 9a(i))",
        f"|d log G/d alpha| <= 2 log((L1-1+o)/o) for margin's G ({kind}, W={W}, L0={L0}, L1={L1}, B={B:g}, o={offset})",
        {"alpha": alpha},
        sides,
        budget=budget,
    )


def growth_factors_monotone(kind, W, L0, L1, B=0.0, offset=1, alpha=(1.0, 6.0), budget=1500):
    """Lemma 9a(ii) and (iii) as ``margin_for`` uses them: the factor ``up = A = H/(T1 + H/k)`` increases in
    alpha and ``down`` (``P/T0``, times ``T0/(T0 + kH)`` for absolute growth) decreases: ``_record``'s
    ``log_up`` and ``log_down``; and the second split, ``up2 = F1`` (``H/T0`` relative, ``H/(T0 + kH)``
    absolute) increases and ``down2 = F2 = P/(T1 + H/k)`` decreases: ``_record``'s ``log_up2`` and
    ``log_down2``. All differentiated through the library's code. With ``G = up down = up2 down2`` (the
    identities are checks.py::check_margin_code_is_lemma_9), ``interval_bound``'s candidates
    ``log up(b) + log down(a)`` and ``log up2(b) + log down2(a)`` bound ``log G`` on ``[a, b]``."""
    rel = kind == "relative"

    def sides(ops, alpha):
        _, record, _ = margin_growth(W, L0, L1, rel, B, _offset(offset))
        rec = record(_alpha_jet(alpha))
        # (ii) the split A * (G/A) and (iii) the split F1 * F2, as _record computes them for interval_bound; one
        # zero for the four signs (the slopes of (iii) do not vanish on the box: the tight slope of (ii) pins it)
        zero = 0
        return [(zero, rec.log_up.d[0]), (rec.log_down.d[0], zero), (zero, rec.log_up2.d[0]), (rec.log_down2.d[0], zero)]

    # up -> k as alpha -> oo, and for relative growth with B > 0 down = P/T0 -> k - 1/k: those slopes vanish there
    tight = (({"alpha": 2**20}, 0, 0, 2.0**-100),) + ((({"alpha": 2**20}, 1, 0, 2.0**-100),) if rel and B > 0 else ())
    return Claim(
        f"growth_factors_monotone_{kind}_W{W}_L{L0}_{L1}_B{B:g}",
        "proofs/margin_selection.md (Lemma 9a(ii))",
        f"d log(up)/d alpha >= 0 >= d log(down)/d alpha, same for up2, down2, for margin's factors ({kind}, W={W}, L0={L0}, L1={L1}, B={B:g})",
        {"alpha": alpha},
        sides,
        budget=budget,
        tight=tight,
    )


GROWTH_CASES = [("absolute", 1, 2, 4, 0.0), ("relative", 2, 4, 8, 0.0), ("absolute", 3, 5, 12, 0.25), ("relative", 1, 3, 6, 0.125)]


# --- Lemma 9b (proofs/margin_selection.md)


def growth_decreasing_upper(kind, W, L0, L1, B, offset=1, alpha=(1.25, 8.0), budget=1500, tight_alpha=2**20):
    """Lemma 9b as ``margin_for`` uses it: ``G(alpha) <= U(alpha)`` and ``dU/dalpha <= 0``, with ``U`` the
    value of ``_Growth.decreasing_upper`` and ``G`` that of ``_Growth._record`` (the library's code on
    intervals). ``tight``: at a large exponent (and, for absolute growth, a large ``B``) ``U`` is within a
    small relative distance of ``G`` (both tend to ``k (W+o)^-alpha/o^-alpha`` resp. ``e^{4B} - 1``), and
    ``dU/dalpha`` is within ``2^-100`` of 0."""
    rel = kind == "relative"

    def sides(ops, alpha):
        _, record, upper = margin_growth(W, L0, L1, rel, B, _offset(offset))
        a = _alpha_jet(alpha)
        G, U = record(a).growth, upper(a)
        if isinstance(U, iv.Jet):
            return [(G.v, U.v), (U.d[0], 0)]
        return [(G, U)]

    tight = (({"alpha": tight_alpha}, 0, 2.0**-12), ({"alpha": tight_alpha}, 1, 0, 2.0**-100)) if (rel and B > 0) or (not rel and B >= 4) else ()
    return Claim(
        f"growth_decreasing_upper_{kind}_W{W}_L{L0}_{L1}_B{B:g}",
        "proofs/margin_selection.md (Lemma 9b)",
        f"G(alpha) <= decreasing_upper(alpha), decreasing in alpha ({kind}, W={W}, L0={L0}, L1={L1}, B={B:g}, o={offset})",
        {"alpha": alpha},
        sides,
        budget=budget,
        tight=tight,
    )


UPPER_CASES = [("absolute", 1, 2, 4, 4.0), ("absolute", 3, 5, 12, 0.0), ("relative", 2, 4, 8, 0.125), ("relative", 1, 3, 6, 0.0)]


def tail_integral(W, alpha=(1.25, 8.0), s=(0.0, 0.0), budget=1500):
    """Lemma 9b's integral step: ``T_oo = zeta(alpha, W+1+s) <= int_W^oo (x+s)^-alpha dx = (W+s)^(1-alpha)/(alpha-1)``
    (Hurwitz zeta by Arb), for one ``W``; nearly attained as alpha -> 1: at ``alpha = 1 + 2^-30`` the two
    sides differ by ``(psi(W+1+s) - log(W+s)) 2^-30`` relative, below ``2^-31`` for ``s = 0`` (``tight``)."""

    def sides(ops, alpha, s):
        return [(ops.zeta(alpha, W + 1 + s), ops.exp((1 - alpha) * ops.log(W + s)) / (alpha - 1))]

    return Claim(
        f"tail_integral_W{W}",
        "proofs/margin_selection.md (Lemma 9b)",
        f"zeta(alpha, W+1+s) <= (W+s)^(1-alpha)/(alpha-1), W={W}",
        {"alpha": alpha, "s": s},
        sides,
        budget=budget,
        tight=(({"alpha": 1 + 2.0**-30, "s": s[0]}, 0, 2.0**-31),),
    )


# --- Theorems N4, N5 (proofs/normalisers.md): finite rows, on boxes of content, constant and gates


def _sigmoid(ops, z):
    return 1 / (1 + ops.exp(-z))


def stick_breaking_every_constant(side, K=2, weights=("1", "1/4", "1/4"), budget=200):
    """Theorem N4(iii) on a row of three keys (``W = 1``), step by step, for every constant ``c`` and every
    content: ``e^(b_d)`` = ``weights``, content ``x_d = e^(e_d)`` in ``[1/K, K]`` (``B = log K``), ``u = e^c``;
    ``H = e^(b_0)``, ``T = e^(b_1) + e^(b_2)``, ``h = H/K``, ``S = K T``:

    (A) ``P_1 = 1 - sigma(z_0) <= 1/(1 + u h)``, attained at ``x_0 = 1/K``;
    (B) ``1 - P_3/P_1 = 1 - (1 - sigma(z_1))(1 - sigma(z_2)) <= min(1, u S)``, the ratio tending to 1 as
        ``u -> 0`` (at ``x_1 = x_2 = K``) and as ``u -> oo``;
    (C) ``min(1, u S)/(1 + u h) <= T/(T + K^-2 H)``, attained at ``u S = 1``;

    so ``P_1 - P_3 = P_1 (1 - P_3/P_1) <= T/(T + e^(-2B) H)``: each step is the proof's, and each is sharp
    (``tight``), so a loosened constant fails as a stronger one does. The weights make ``S = 1``, so that
    ``u S = 1`` at ``c = 0``, where the domain is cut: ``side="below"`` is ``c`` in [-8, 0] (``min = u S``),
    ``"above"`` is ``c`` in [0, 8] (``min = 1``). The certificates (checked by sympy) write each gap as a sum
    of non-negative terms, with ``y_d = u e^(b_d) x_d``:
    ``u H (x_0 - 1/K)/((1 + u h)(1 + y_0))``;
    ``sum_d u e^(b_d)(K - x_d) + (y_1^2 + y_1 y_2 + y_2^2 + y_1^2 y_2 + y_1 y_2^2)/((1 + y_1)(1 + y_2))``;
    ``S (1 - u S)/((S + h)(1 + u h))`` resp. ``h (u S - 1)/((S + h)(1 + u h))``."""
    below = side == "below"
    w = [Fraction(x) for x in weights]

    def parts(ops, c, x0, x1, x2):
        u, k = ops.exp(c), ops.const(Fraction(K))
        H, T = ops.const(w[0]), ops.const(w[1] + w[2])
        y = [u * ops.const(wd) * x for wd, x in zip(w, (x0, x1, x2), strict=True)]
        s0, s1, s2 = (_sigmoid(ops, c + ops.log(ops.const(wd) * x)) for wd, x in zip(w, (x0, x1, x2), strict=True))
        return u, k, H, T, H / k, k * T, y, s0, s1, s2

    def sides(ops, c, x0, x1, x2):
        u, k, H, T, h, S, _, s0, s1, s2 = parts(ops, c, x0, x1, x2)
        cap = u * S if below else 1  # min(1, u S) on this side of u S = 1
        return [(1 - s0, 1 / (1 + u * h)), (1 - (1 - s1) * (1 - s2), cap), (cap / (1 + u * h), T / (T + k**-2 * H))]

    def certificate(ops, c, x0, x1, x2):
        u, k, H, T, h, S, y, *_ = parts(ops, c, x0, x1, x2)
        y1, y2 = y[1], y[2]
        a = u * H * (x0 - 1 / k) / ((1 + u * h) * (1 + y[0]))
        if below:
            far = (u * ops.const(w[1]) * (k - x1) + u * ops.const(w[2]) * (k - x2)
                   + (y1 * y1 + y1 * y2 + y2 * y2 + y1 * y1 * y2 + y1 * y2 * y2) / ((1 + y1) * (1 + y2)))
            return [a, far, S * (1 - u * S) / ((S + h) * (1 + u * h))]
        return [a, None, h * (u * S - 1) / ((S + h) * (1 + u * h))]

    return Claim(
        f"stick_breaking_every_constant_{side}",
        "proofs/normalisers.md (Theorem N4(iii))",
        f"P_1 <= 1/(1+uh), 1 - P_3/P_1 <= min(1, uS), min(1, uS)/(1+uh) <= T/(T+K^-2 H); e^b = {weights}, "
        f"e^(e_d) in [1/{K}, {K}], c in {'[-8, 0]' if below else '[0, 8]'}",
        {"c": (-8.0, 0.0) if below else (0.0, 8.0), "x0": (0.5, 2.0), "x1": (0.5, 2.0), "x2": (0.5, 2.0)},
        sides,
        certificate,
        budget=budget,
        tight=(({"c": 1, "x0": 0.5, "x1": 1, "x2": 1}, 0, 0, 2.0**-100), ({"c": 0, "x0": 1, "x1": 1, "x2": 1}, 2, 0, 2.0**-100))
        + ((({"c": -40, "x0": 1, "x1": 2, "x2": 2}, 1, 2.0**-50),) if below else (({"c": 8, "x0": 1, "x1": 2, "x2": 2}, 1, 2.0**-18),)),
    )


def forgetting_gates_worst_case(f_min=0.5, f_max=0.9, biases=("0", "-1/2", "-1", "-3/2"), budget=2000):
    """Theorem N5 on a row of four keys (``W = 1``): with forget gates ``g_k`` in ``[f_min, f_max]`` (key ``d``
    gains ``sum_{k<d} log g_k``), the distant share is at most that of constant gates ``f_max``; attained at
    ``g = f_max`` (``tight``). The certificate writes ``T* - T`` as the telescoping sum
    ``sum_d e^(b_d) sum_{k<d} (f_max - g_k) f_max^(d-1-k) prod_{j<k} g_j`` (checked by sympy)."""
    bs = [Fraction(b) for b in biases]

    def parts(ops, g0, g1, g2):
        gates = (g0, g1, g2)
        w = [ops.exp(ops.const(b)) for b in bs]
        T = sum(w[d] * _prod(gates[:d]) for d in range(1, 4))
        T_star = sum(w[d] * ops.const(Fraction(f_max)) ** d for d in range(1, 4))
        return w, gates, T, T_star

    def sides(ops, g0, g1, g2):
        w, _, T, T_star = parts(ops, g0, g1, g2)
        return [(T / (T + w[0]), T_star / (T_star + w[0]))]

    def certificate(ops, g0, g1, g2):
        w, gates, T, T_star = parts(ops, g0, g1, g2)
        f = ops.const(Fraction(f_max))
        diff = sum(w[d] * sum((f - gates[k]) * f ** (d - 1 - k) * _prod(gates[:k]) for k in range(d)) for d in range(1, 4))
        return [w[0] * diff / ((T_star + w[0]) * (T + w[0]))]

    return Claim(
        "forgetting_gates_worst_case",
        "proofs/normalisers.md (Theorem N5)",
        f"D(gates) <= D(constant gates f_max) for gates in [{f_min}, {f_max}], b = {biases}, W = 1, n = 4",
        {"g0": (f_min, f_max), "g1": (f_min, f_max), "g2": (f_min, f_max)},
        sides,
        certificate,
        budget=budget,
        tight=(({"g0": f_max, "g1": f_max, "g2": f_max}, 0, 2.0**-100),),
    )


def _prod(xs):
    out = 1
    for x in xs:
        out = out * x
    return out


# --- Lemma N0, Theorems N1, N2, N3, N6 (proofs/normalisers.md): finite rows on boxes


class _Row(list):
    """A row of logits on intervals or sympy (stands for the library's numpy row)."""


class _Factor:
    """A scalar factor on intervals or sympy that multiplies a :class:`_Row` entry by entry (``a * row``)."""

    def __init__(self, a):
        self.a = a

    def __mul__(self, row):
        return _Row(self.a * z for z in row)


def _softmax_on(ops):
    def softmax(z):
        w = [ops.exp(x) for x in z]
        total = sum(w[1:], w[0])
        return [x / total for x in w]

    return softmax


def _library_attention(ops, normaliser, logits):
    """``normaliser.attention(logits)``, the library's own code, with scipy's softmax and ``row`` replaced by
    their interval (or sympy) versions."""
    fn = iv.library_function(type(normaliser).attention, _softmax=_softmax_on(ops), row=_Row)
    return fn(normaliser, _Row(logits))


def softmax_scaled_band(B=1.0, biases=("0", "-1/2", "-1"), a=(0.25, 4.0), budget=400):
    """Lemma N0 (softmax family), Theorems N1 and N2 on a row of three keys (``W = 1``): with a factor ``a``
    on the logits (``Temperature.attention``, the library's code run on intervals; ``a = 1`` is plain softmax,
    ``a = s ln n`` is SSMax at length ``n``) and content ``|e_d| <= B``, the distant share ``D`` lies between
    ``content_band_balls(T_a, H_a, a B)`` (the library's Theorem 10 code), with ``e^(a b_d)`` the scaled bias:
    N2's reduction (bias ``a b``, content ``a B``) and N0's monotonicity (the extremes are the uniform
    advantages ``-2B`` and ``+2B``). Both ends are attained (``tight``); the certificates are
    ``sum_d e^(a(b_d + b_0)) e^(a(e_d - 2B)) expm1(a(e_0 - e_d + 2B)) / (...)`` and its mirror (sympy-checked)."""
    from otprior import content_bound
    from otprior.normalisers import Temperature

    bs = [Fraction(x) for x in biases]

    def parts(ops, a, e0, e1, e2):
        lb = [ops.const(x) for x in bs]
        z = [b + e for b, e in zip(lb, (e0, e1, e2), strict=True)]
        norm = Temperature.__new__(Temperature)
        object.__setattr__(norm, "factor", _Factor(a))
        p = _library_attention(ops, norm, z)
        D = p[1] + p[2]
        H = ops.exp(a * lb[0])
        T = ops.exp(a * lb[1]) + ops.exp(a * lb[2])
        return lb, z, D, H, T

    def sides(ops, a, e0, e1, e2):
        _, _, D, H, T = parts(ops, a, e0, e1, e2)
        kind = "sym" if ops is iv.SYM_OPS else "iv"
        fn = iv.library_function(content_bound.content_band_balls, **iv.ball_namespace(kind))
        aB = a * ops.const(Fraction(B))
        lo, hi = fn(_as_ball(ops, T), _as_ball(ops, H), _as_ball(ops, aB))
        return [(_unwrap(lo), D), (D, _unwrap(hi))]

    def certificate(ops, a, e0, e1, e2):
        lb, z, D, H, T = parts(ops, a, e0, e1, e2)
        B2 = 2 * ops.const(Fraction(B))
        den = sum((ops.exp(a * x) for x in z[1:]), ops.exp(a * z[0]))
        up = sum(ops.exp(a * (lb[d] + lb[0])) * ops.exp(a * (e - B2)) * ops.expm1(a * (e0 - e + B2))
                 for d, e in ((1, e1), (2, e2)))
        down = sum(ops.exp(a * (lb[d] + lb[0])) * ops.exp(a * e0) * ops.expm1(a * (e - e0 + B2))
                   for d, e in ((1, e1), (2, e2)))
        return [down / (den * (T + ops.exp(a * B2) * H)), up / (den * (T + ops.exp(-a * B2) * H))]

    return Claim(
        "softmax_scaled_band",
        "proofs/normalisers.md (Lemma N0, Theorems N1, N2)",
        f"content_band_balls(T_a, H_a, aB) brackets D of softmax(a z), z = b + e, b = {biases}, |e| <= {B:g}, a in {a}",
        {"a": a, "e0": (-B, B), "e1": (-B, B), "e2": (-B, B)},
        sides,
        certificate,
        budget=budget,
        tight=(({"a": 2, "e0": B, "e1": -B, "e2": -B}, 0, 0, 2.0**-100), ({"a": 2, "e0": -B, "e1": B, "e2": B}, 1, 0, 2.0**-100)),
    )


def _vmax(a, b):
    """``max`` on intervals or jets, for the library's ``max`` of two thresholds: the larger one where the two
    are ordered on the whole box, else the hull (of the values and of the derivatives: ``max`` is Lipschitz,
    its derivative lies between theirs)."""
    if not isinstance(a, iv.Jet) and not isinstance(b, iv.Jet):
        a, b = iv._exact(a), iv._exact(b)
        return iv.Iv(max(a.lo, b.lo, key=iv._Key), max(a.hi, b.hi, key=iv._Key))
    n = len(a.d) if isinstance(a, iv.Jet) else len(b.d)
    a, b = iv.Jet.lift(a, n), iv.Jet.lift(b, n)
    if a.v.lo >= b.v.hi:
        return a
    if b.v.lo >= a.v.hi:
        return b
    return iv.Jet(_vmax(a.v, b.v), tuple(x.union(y) for x, y in zip(a.d, b.d, strict=True)))


def _library_threshold(ops, s, b_star, distant, tail):
    """``_scaled_classify``'s ``threshold`` (Theorem N3), the library's expression evaluated on intervals or sympy."""
    from otprior.normalisers import scalable

    exprs = library_expressions(scalable._scaled_classify, ("threshold",))
    scope = {**scalable._scaled_classify.__globals__, "max": max if ops is iv.SYM_OPS else _vmax}
    value = eval(exprs["threshold"], scope, {"s": s, "b_star": b_star, "distant": distant, "tail": tail})  # library source
    if ops is iv.SYM_OPS:  # the library's float constants (1.0) as the exact numbers they are
        import sympy as sp

        value = sp.nsimplify(value, rational=True)
    return value


def ssmax_threshold(side, s, bias=("0", "-1"), tail="-2", budget=200):
    """Theorem N3 at every length, with the library's threshold: SSMax multiplies the logits of a row of ``n``
    keys by ``lambda = s ln n``; the bias is ``bias`` at distances ``d < S = len(bias)`` and ``tail`` from ``S``
    on, window ``W = 1``; ``Delta*`` is ``_scaled_classify``'s ``threshold`` (the library's expression). Put
    ``u_d = b_d - b* - Delta* <= 0`` (distant keys) and ``v = 1 + s(tail - b* - Delta*) <= 0``; one of them is 0.
    With ``logn = ln n`` in [2, 40] and ``eta`` in [0, 4] the distant-to-window ratio is
    ``R = sum_d e^(lambda(u_d -+ eta)) + (1 - S/n) e^(logn v -+ lambda eta)`` at ``Delta = Delta* +- eta``, and

    ``side="above"`` (``Delta = Delta* + eta``): ``m_n = 1/(1 + R) >= 1/(1 + S)``, nearly attained where both
    branches of the threshold meet (``s = 1``, ``eta = 0``, ``n = e^40``: ``tight``);

    ``side="below"`` (``Delta = Delta* - eta``): ``m_n <= e^(-lambda eta) n/(n - S) = n^(-s eta) n/(n - S)``.

    So the window keeps a share iff ``Delta >= Delta*``: a threshold too low fails above, one too high fails
    below. ``s`` is exact (one claim per slope: a finite set), so ``u_d`` and ``v`` are exact and the
    certificates ``sum_d -expm1(lambda(u_d - eta)) + S e^(-logn) e^(logn v - lambda eta) - expm1(logn v - lambda eta)``
    (over ``(1 + S)(1 + R)``) and ``e^(-lambda eta) + sum_(d != d*) e^(lambda u_d) + (e^(lambda u_d*) +
    (1 - S e^(-logn)) expm1(logn v))`` (over ``(1 - S e^(-logn))(1 + R)``; ``d*`` the largest ``u_d``) see the signs."""
    above = side == "above"
    S = len(bias)

    def parts(ops, logn, eta):
        sx = ops.const(Fraction(s))
        b = [ops.const(Fraction(x)) for x in bias]
        c_T = ops.const(Fraction(tail))
        threshold = _library_threshold(ops, sx, b[0], ops.const(max(Fraction(x) for x in bias[1:])), c_T)
        u = [bd - b[0] - threshold for bd in b[1:]]
        v = sx * (c_T - b[0] - threshold) + 1
        lam = sx * logn
        shift = -lam * eta if above else lam * eta
        tail_share = 1 - S * ops.exp(-logn)  # (n - S)/n
        R = sum((ops.exp(lam * ud + shift) for ud in u), tail_share * ops.exp(logn * v + shift))
        return u, v, lam, tail_share, R

    def sides(ops, logn, eta):
        *_, lam, tail_share, R = parts(ops, logn, eta)
        m = 1 / (1 + R)
        if above:
            return [(1 / (1 + ops.const(S)), m)]
        return [(m, ops.exp(-lam * eta) / tail_share)]

    def certificate(ops, logn, eta):
        u, v, lam, tail_share, R = parts(ops, logn, eta)
        if above:
            gap = sum((-ops.expm1(lam * (ud - eta)) for ud in u), S * ops.exp(-logn) * ops.exp(logn * v - lam * eta) - ops.expm1(logn * v - lam * eta))
            return [gap / ((1 + ops.const(S)) * (1 + R))]
        top = max(range(len(u)), key=lambda d: Fraction(bias[d + 1]))
        rest = sum((ops.exp(lam * u[d]) for d in range(len(u)) if d != top), ops.exp(-lam * eta))
        return [(rest + (ops.exp(lam * u[top]) + tail_share * ops.expm1(logn * v))) / (tail_share * (1 + R))]

    tight = ((({"logn": 40, "eta": 0}, 0, 2.0**-50),) if above and Fraction(s) == 1 else ())
    return Claim(
        f"ssmax_threshold_{side}_s{float(Fraction(s)):g}",
        "proofs/normalisers.md (Theorem N3)",
        ("m_n >= 1/(1+S) at Delta = Delta* + eta" if above else "m_n <= n^(-s eta) n/(n-S) at Delta = Delta* - eta")
        + f", Delta* = _scaled_classify's threshold, s = {s}, b = {bias} then {tail}, n = e^logn",
        {"logn": (2.0, 40.0), "eta": (0.0, 4.0)},
        sides,
        certificate,
        budget=budget,
        tight=tight,
    )


SSMAX_SLOPES = ("1/4", "1", "7/4")  # the tail's branch, both branches, the distant key's branch


def _entmax_closed_forms():
    """Closed forms (sympy, checked against their defining equation here) of the entmax thresholds used by
    the box claims: ``tau`` for ``alpha = 3/2`` (``p = (x - tau)^2``) on three keys with total ``r`` and
    scale ``lam`` (``x_d = lam z_d``), and on a flat row (one key at ``x_0``, ``1/nu - 1`` keys at 0, total 1)
    for ``alpha = 3/2`` and ``alpha = 2`` (``p = x - tau``). The smaller root keeps every key in the support."""
    import sympy as sp

    lam, r, nu, x0, tau = sp.symbols("lam r nu x0 tau", positive=True)
    z = sp.symbols("z0:3", real=True)
    x = [lam * zd for zd in z]
    sx, sxx = sum(x), sum(xd**2 for xd in x)
    tau3 = (sx - sp.sqrt(sx**2 - 3 * (sxx - r))) / 3
    flat15 = nu * x0 - sp.sqrt(nu * (1 - x0**2) + nu**2 * x0**2)
    flat2 = nu * (x0 - 1)
    equations = (
        (sum((xd - tau) ** 2 for xd in x) - r, tau3),
        ((x0 - tau) ** 2 + (1 / nu - 1) * tau**2 - 1, flat15),
        ((x0 - tau) + (1 / nu - 1) * (0 - tau) - 1, flat2),
    )
    for equation, root in equations:
        assert sp.simplify(sp.expand(equation.subs(tau, root))) == 0, root
    return {"lam": lam, "r": r, "z": z, "tau3": tau3, "nu": nu, "x0": x0, "flat15": flat15, "flat2": flat2}


def entmax_monotone(budget=1500):
    """Lemma N0 for 1.5-entmax on a row of three keys, all in the support: the window weight
    ``p_0 = u_0^2``, ``u_0 = lam z_0 - tau``, increases in ``z_0`` and decreases in ``z_1`` and ``z_2``. As
    ``p_0`` is an increasing function of ``u_0`` (any power ``1/(alpha - 1)``), the claim is on ``u_0``:
    ``d u_0/d z_0 = lam (1 - u_0/sum u) >= 0 >= d u_0/d z_i = -lam u_i/sum u``, for every scale ``lam`` in
    [1/2, 2] and every total ``r`` in [1/2, 2] (the signs hold for any scale and total, so both are variables
    of the claim, not constants); ``z`` in [-1/16, 1/16]^3 keeps every key in the support (``u_d > 0``,
    checked as pairs of the claim). The derivatives are sympy's, of the closed form of ``tau`` checked against
    its equation. Each sign is attained where a key leaves the support (``tight``, outside the box: there
    ``u_i = 0`` makes ``d u_0/d z_i = 0``, and ``u_1 = u_2 = 0`` makes ``d u_0/d z_0 = 0``)."""
    import sympy as sp

    f = _entmax_closed_forms()
    z0, z1, z2 = f["z"]
    u0 = f["lam"] * z0 - f["tau3"]
    derivatives = [sp.diff(u0, v) for v in (z0, z1, z2)]
    support = [f["lam"] * zd - f["tau3"] for zd in (z0, z1, z2)]

    def sides(ops, lam, r, z0, z1, z2):
        env = {"lam": lam, "r": r, "z0": z0, "z1": z1, "z2": z2}
        d0, d1, d2 = (iv.sym_eval(d, env) for d in derivatives)
        return [(0, d0), (d1, 0), (d2, 0)] + [(0, iv.sym_eval(u, env)) for u in support]

    return Claim(
        "entmax_monotone",
        "proofs/normalisers.md (Lemma N0)",
        "d u_0/d z_0 >= 0 >= d u_0/d z_1, d u_0/d z_2, u_0 = lam z_0 - tau, 1.5-entmax (scale lam, total r), three keys in the support",
        {"lam": (0.5, 2.0), "r": (0.5, 2.0), "z0": (-0.0625, 0.0625), "z1": (-0.0625, 0.0625), "z2": (-0.0625, 0.0625)},
        sides,
        budget=budget,
        tight=(({"lam": 1, "r": 1, "z0": 1, "z1": 0, "z2": 0}, 0, 0, 2.0**-100),
               ({"lam": 1, "r": 0.5, "z0": 0.5, "z1": 0, "z2": 0.5}, 1, 0, 2.0**-100),
               ({"lam": 1, "r": 0.5, "z0": 0.5, "z1": 0.5, "z2": 0}, 2, 0, 2.0**-100)),
    )


def entmax_flat_row(budget=1500):
    """Theorem N6 (i), (iii) on a flat row of ``n = 1/nu = e^t`` keys, ``t`` in [1, 40]: one window key at
    ``x_0 = (alpha - 1) Delta`` in [1/16, 1/2] (``Delta`` its advantage), the others at 0, all in the support.
    The threshold ``tau`` (closed forms checked against their equations) satisfies, for ``alpha = 3/2``,
    ``0 <= -tau <= sqrt(nu)``, and for ``alpha = 2`` (sparsemax) ``0 <= -tau <= nu``; so the window's weight
    ``p_0 = (x_0 - tau)^(1/(alpha-1))`` lies between ``((alpha-1)Delta)^(1/(alpha-1))`` (at every length: N6(i))
    and ``((alpha-1)Delta + sqrt(nu))^2`` resp. ``(alpha-1)Delta + nu``, and tends to the former (N6(iii)).
    The upper bounds are checked as ``-tau/sqrt(nu) <= 1`` and ``-tau/nu <= 1`` (sympy's quotients), equal at
    ``x_0 = 0`` (where ``p_0 = nu = 1/n``: no advantage dilutes, the threshold is strict); the lower ones are
    attained as ``nu -> 0`` (``tight``; ``x_0 = 0`` is outside the box, where the sides are equal)."""
    import sympy as sp

    f = _entmax_closed_forms()
    g15 = sp.simplify(-f["flat15"] / sp.sqrt(f["nu"]))
    g2 = sp.simplify(-f["flat2"] / f["nu"])

    def sides(ops, x, t):
        env = {"nu": ops.exp(-t), "x0": x}
        tau15, tau2 = (iv.sym_eval(f[k], env, ops) for k in ("flat15", "flat2"))
        u15, u2 = (iv.sym_eval(g, env, ops) for g in (g15, g2))
        return [(0, -tau15), (u15, 1), (0, -tau2), (u2, 1), (0, x - tau15), (0, x - tau2)]

    return Claim(
        "entmax_flat_row",
        "proofs/normalisers.md (Theorem N6)",
        "0 <= -tau <= sqrt(nu) (alpha = 3/2), 0 <= -tau <= nu (alpha = 2) on a flat row of 1/nu keys, x_0 in [1/16, 1/2]",
        {"x": (0.0625, 0.5), "t": (1.0, 40.0)},
        sides,
        budget=budget,
        tight=(({"x": 0.25, "t": 100}, 0, 0, 2.0**-60), ({"x": 0, "t": 20}, 1, 0, 2.0**-100),
               ({"x": 0.25, "t": 100}, 2, 0, 2.0**-100), ({"x": 0, "t": 20}, 3, 0, 2.0**-100)),
    )


# --- Theorem 8 (proofs/window_mass_bounds.md)

def _b2j_over_fact(j):
    """B_2j / (2j)! from the library's table ``otprior._power_sums._B2J_FRACTIONS`` (one source; its entries
    are compared with sympy's Bernoulli numbers by checks.py::check_euler_maclaurin_ingredients)."""
    from otprior import _power_sums

    p, q = _power_sums._B2J_FRACTIONS[j - 1]
    return Fraction(p, q)


def euler_maclaurin(a, b, p, alpha=(0.25, 4.0), s=(0.0, 0.0), budget=3000, tight_abs=None):
    """Theorem 8: ``sum_{k=a}^b f(k)`` lies between ``E_p`` and ``E_p + tau_{p+1}``, for
    ``f(x) = (x+s)^-alpha``; ``tau_{p+1}`` has the sign ``(-1)^p`` (``B_{2p+2}`` has sign
    ``(-1)^p`` and ``f^{(2p+1)}`` increases), so the pairs are ordered by that sign.

    The integral is the pole-free form of Theorem 7, ``(a+s)^(1-alpha) L exprel((1-alpha) L)``;
    ``f^{(m)}(x) = (-1)^m (alpha)_m (x+s)^(-alpha-m)``. Evaluated in the mean-value form. With
    ``tight_abs``, the end ``E + tau`` is within ``tight_abs`` of the sum at the lower end of the alpha range
    (far from the origin the next term is much smaller than ``tau``: the bracket is sharp there).
    """

    def sides(ops, alpha, s):
        def f(x):
            return ops.exp(-alpha * ops.log(x + s))

        def rising(m):
            out = 1
            for i in range(m):
                out = out * (alpha + i)
            return out

        def deriv(m, x):  # f^(m)(x)
            return (-1) ** m * rising(m) * ops.exp((-alpha - m) * ops.log(x + s))

        total = 0
        for k in range(a, b + 1):
            total = total + f(k)
        L = ops.log((b + s) / (a + s))
        integral = ops.exp((1 - alpha) * ops.log(a + s)) * L * ops.exprel((1 - alpha) * L)
        E = integral + (f(a) + f(b)) / 2
        for j in range(1, p + 1):
            c = ops.const(_b2j_over_fact(j))
            E = E + c * (deriv(2 * j - 1, b) - deriv(2 * j - 1, a))
        c = ops.const(_b2j_over_fact(p + 1))
        tau = c * (deriv(2 * p + 1, b) - deriv(2 * p + 1, a))
        if p % 2 == 0:
            return [(E, total), (total, E + tau)]
        return [(E + tau, total), (total, E)]

    return Claim(
        f"euler_maclaurin_a{a}_b{b}_p{p}",
        "proofs/window_mass_bounds.md (Theorem 8)",
        f"sum_(k={a})^{b} (k+s)^-alpha between E_{p} and E_{p} + tau_{p + 1}",
        {"alpha": alpha, "s": s},
        sides,
        centered=True,
        budget=budget,
        tight=() if tight_abs is None else (({"alpha": alpha[0], "s": s[0]}, 0 if p % 2 else 1, 0, tight_abs),),
    )


EULER_MACLAURIN_CASES = [(1, 6, 1), (1, 6, 2), (2, 12, 2), (3, 9, 3)]


# --- Theorem 4(i) (proofs/window_law.md): exhaustive on a grid of exact points


def _recurrence(c, rho, t):
    """Theorem 2's backward recurrence from ``Phi_t = c`` in Iv arithmetic (``rho > 0``): ``(Phi_0, Psi, positive)``,
    ``positive`` False when some ``Phi_k`` (k >= 1) is not certainly positive."""
    phi, psi = c, iv.Iv(flint.arb(0))
    Psi = {}
    for k in range(t, 0, -1):
        psi = psi + phi.inverse()
        Psi[k] = psi
        phi = phi - psi ** (-rho)
        if k > 1 and not phi.lo > 0:
            return phi, Psi, False
    return phi, Psi, True


def _root_enclosure(rho, t, steps=200):
    """An interval ``[c_lo, c_hi]`` on which the recurrence stays positive and ``Phi_0`` changes
    sign: it holds the root of Theorem 2 (intermediate values; the root is unique by Theorem 1)."""
    lo, hi = flint.arb(1), flint.arb(2)
    while True:
        phi0, _, ok = _recurrence(iv.Iv(hi), rho, t)
        if ok and phi0.lo > 0:
            break
        lo, hi = hi, 2 * hi
    for _ in range(steps):
        mid = ((lo + hi) / 2).lower()
        phi0, _, ok = _recurrence(iv.Iv(mid), rho, t)
        if ok and phi0.lo > 0:
            hi = mid
        elif not ok or phi0.hi < 0:
            lo = mid
        else:  # Phi_0(mid) holds 0 (mid may be the root itself): bracket it closely
            eps = flint.arb(2) ** -100
            a, b = (mid * (1 - eps)).lower(), (mid * (1 + eps)).upper()
            phi_a, _, ok_a = _recurrence(iv.Iv(a), rho, t)
            phi_b, _, ok_b = _recurrence(iv.Iv(b), rho, t)
            if ok_b and phi_b.lo > 0 and (not ok_a or phi_a.hi < 0):
                lo, hi = a, b
            break
    return lo, hi


def _theorem4_factor(x, rho):
    """Theorem 4(i)'s lower factor ``(1 - x)^rho`` (``x = d c^(rho-1)`` for one entry, ``(W-1) c^(rho-1)`` for a
    window), read as 0 where ``1 - x`` reaches 0: one expression for both uses."""
    inner = iv.iv_max0(1 - x)
    return inner**rho if inner.lo > 0 else iv._exact(0)


def _grid(rho_grid):
    return rho_grid or [Fraction(k, 16) for k in range(1, 16)]


def _iteration_prior_top(rho, t, dps=40):
    """pi_t(0) by the plain iteration of Theorem 1's map (s = 0, log domain, private mpmath context), stopped by its
    certificate ``||g - g*|| <= ||G(g) - g||/(1 - rho)``: a route to the root ``c = pi_t(0)^(1/(rho-1))`` that does
    not use the recurrence. Returns ``(pi_t(0), error bound on log pi_t(0))``."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = dps
    r = ctx.mpf(rho.numerator) / rho.denominator

    def lse(xs):
        top = max(xs)
        return top + ctx.log(ctx.fsum(ctx.exp(x - top) for x in xs))

    g = [ctx.zero] * t
    for _ in range(10000):
        f = [-lse(g[: i + 1]) for i in range(t)]
        g_new = [-r * lse(f[j:]) for j in range(t)]
        residual = max(abs(a - b) for a, b in zip(g_new, g, strict=True))
        g = g_new
        if tol(residual / (1 - r) < ctx.mpf(10) ** -(dps - 8)):
            break
    f = [-lse(g[: i + 1]) for i in range(t)]
    # the row's log-weights move by at most 2 osc(g - g*) <= 2 residual/(1 - r) (and the rounding at dps digits)
    return ctx.exp(f[t - 1] + g[t - 1]), tol(2 * residual / (1 - r) + ctx.mpf(10) ** -(dps - 5))


def window_law_exact_bounds(t_max=10, rho_grid=None, independent_root=False):
    """Theorem 4(i) at every ``2 <= W <= t <= t_max`` and every ``rho`` of a grid of exact points, with the
    proof's steps: for every entry ``d < t``

    ``(d+1)/c <= Psi_{t-d} <= (d+1)/(c - d c^rho)`` (equal at ``d = 0``: checked as an equality there),

    the entry bounds ``(d+1)^-rho c^(rho-1) F(d c^(rho-1)) <= pi_t(d) <= (d+1)^-rho c^(rho-1)`` with
    ``F(x) = max(0, 1-x)^rho`` (:func:`_theorem4_factor`), and the window bounds
    ``H c^(rho-1) F((W-1) c^(rho-1)) <= m_t(W) <= H c^(rho-1)``.

    The root ``c`` is enclosed by :func:`_root_enclosure` and certified: on the whole
    interval the recurrence, run in interval arithmetic, keeps ``Phi_k > 0`` for ``k >= 1``
    and ``Phi_0`` has a negative value at the lower end and a positive one at the upper
    end. ``m_t(W) = sum_{d<W} Psi_{t-d}^-rho / c``. With ``independent_root`` the enclosure must also hold
    the root from the plain iteration of Theorem 1 (:func:`_iteration_prior_top`, mpmath at 40 digits), so
    that a wrong recurrence cannot pass. Rigorous at the grid points only (the record says so).
    At ``d = 0`` (``W = 1``) both bounds are attained (``Psi_t = 1/c``): there the check is that each bound's
    ball meets the value's (an equality, which a wrong constant breaks). Where ``d c^(rho-1) < 1`` the lower
    bound must be positive (the factor is not read as 0 there). ``rho = 0`` attains the upper bounds
    everywhere (``c = t``, ``m = W/t``) and is refused: interval arithmetic cannot decide an equality.
    """
    rho_grid = _grid(rho_grid)
    if any(r <= 0 for r in rho_grid):
        raise ValueError("rho_grid: points in (0, 1) (rho = 0 attains the bounds: no strict comparison to decide)")
    checked, failures, undecided = 0, [], []
    with iv.arb_precision(iv.PREC):
        for rho_f in rho_grid:
            rho = iv._exact(rho_f)
            for t in range(2, t_max + 1):
                lo, hi = _root_enclosure(rho, t)
                c = iv.Iv(lo, hi)
                phi_lo, _, ok_lo = _recurrence(iv.Iv(lo), rho, t)
                phi_hi, _, ok_hi = _recurrence(iv.Iv(hi), rho, t)
                _, Psi, ok = _recurrence(c, rho, t)
                if not (ok and ok_lo and ok_hi and phi_lo.hi < 0 < phi_hi.lo):
                    undecided.append((float(rho_f), t, "root"))
                    continue
                if independent_root:
                    top, err = _iteration_prior_top(rho_f, t)
                    c_ref = float(top) ** (1 / (float(rho_f) - 1))
                    slack = tol(1e-12 + 10 * float(err))
                    if not (float(lo) * tol(1 - slack) <= c_ref <= float(hi) * tol(1 + slack)):
                        failures.append((float(rho_f), t, "root"))
                        continue
                c_pow = c ** (rho - 1)
                m, H = iv._exact(0), iv._exact(0)
                for W in range(1, t + 1):
                    d = W - 1
                    psi = Psi[t - d]
                    entry = psi ** (-rho) / c
                    weight = iv._exact(W) ** (-rho)
                    m, H = m + entry, H + weight
                    # the proof's steps for entry d
                    inside = (d * c_pow).hi < 1  # d c^(rho-1) < 1: the upper bound on Psi and the lower factor are defined
                    psi_lo = (d + 1) / c
                    psi_hi = (d + 1) / (c - d * c**rho) if inside else None  # None: no upper bound
                    entry_hi = weight * c_pow
                    entry_lo = weight * c_pow * _theorem4_factor(d * c_pow, rho)
                    checked += 1
                    if d == 0:  # Psi_t = 1/c: both bounds are attained, entry_lo = entry_hi = entry
                        together = (psi_lo, psi_hi, entry_lo, entry_hi)
                        if not all(b.lo <= psi.hi and psi.lo <= b.hi for b in together[:2]):
                            failures.append((float(rho_f), t, "Psi_t = 1/c"))
                        if not all(b.lo <= entry.hi and entry.lo <= b.hi for b in together[2:]):
                            failures.append((float(rho_f), t, "pi_t(0) = c^(rho-1)"))
                        continue
                    if (psi_lo.lo > psi.hi or (psi_hi is not None and psi.lo > psi_hi.hi) or entry.lo > entry_hi.hi
                            or entry_lo.lo > entry.hi):
                        failures.append((float(rho_f), t, f"entry {d}"))
                    elif not (psi_lo.hi <= psi.lo and (psi_hi is None or psi.hi <= psi_hi.lo) and entry.hi <= entry_hi.lo
                              and entry_lo.hi <= entry.lo):
                        undecided.append((float(rho_f), t, f"entry {d}"))
                    if inside and not entry_lo.lo > 0:  # where the factor is positive it must be used
                        failures.append((float(rho_f), t, f"entry {d}: lower bound read as 0 where 1 - d c^(rho-1) > 0"))
                    upper = H * c_pow
                    lower = H * c_pow * _theorem4_factor((W - 1) * c_pow, rho)
                    if m.lo > upper.hi or lower.lo > m.hi:
                        failures.append((float(rho_f), t, W))
                    elif not (m.hi <= upper.lo and lower.hi <= m.lo):
                        undecided.append((float(rho_f), t, W))
    verdict = "refuted" if failures else ("undecided" if undecided else "proved")
    return InequalityRecord(
        "window_law_exact_bounds",
        "proofs/window_law.md (Theorem 4(i))",
        "(d+1)/c <= Psi_{t-d} <= (d+1)/(c - d c^rho); H c^(rho-1) max(0, 1-(W-1)c^(rho-1))^rho <= m_t(W) <= H c^(rho-1)",
        {"rho": f"the {len(rho_grid)} points {[str(r) for r in rho_grid]}", "t": (2, t_max), "W": (2, "t")},
        checked,
        verdict,
        undecided_boxes=len(undecided),
        counterexample={"rho, t, W": failures[0]} if failures else None,
        notes=["exhaustive on grid points, ball arithmetic at each point; nothing is claimed between them"]
        + [f"undecided at (rho, t, W) = {u}" for u in undecided[:5]],
    )


OFFSET_SHIFTS = (-0.5, 1.0, 2.0)  # s = offset - 1 for the slow runs (offset 1 is the default run)


def all_claims(full=False):
    """Every box claim. The default set runs in a few seconds; ``full=True`` adds the offsets
    0.5, 2 and 3 and the harder Euler-Maclaurin cases (some of which stay "undecided" within
    their budget: the bracket's margin is ~1e-6 of the sum there)."""
    claims = [bounded_score_share(), bounded_score_linear(), bounded_score_monotone(), content_band()]
    claims += [growth_log_lipschitz(*case[:4], B=case[4]) for case in GROWTH_CASES]
    claims += [growth_factors_monotone(*case[:4], B=case[4]) for case in GROWTH_CASES]
    claims += [growth_decreasing_upper(*case) for case in UPPER_CASES]
    claims += [tail_integral(W) for W in (1, 2, 8)]
    claims += [euler_maclaurin(1, 6, 1)]
    claims += [stick_breaking_every_constant("below"), stick_breaking_every_constant("above"), forgetting_gates_worst_case()]
    claims += [softmax_scaled_band(), entmax_monotone(), entmax_flat_row(), *(ssmax_threshold(side, sl) for side in ("above", "below") for sl in SSMAX_SLOPES)]
    if full:
        for shift in OFFSET_SHIFTS:
            s = (shift, shift)
            o = Fraction(1 + shift).limit_denominator(8)
            claims += [_renamed(growth_log_lipschitz(*case[:4], B=case[4], offset=o), shift) for case in GROWTH_CASES]
            claims += [_renamed(growth_factors_monotone(*case[:4], B=case[4], offset=o), shift) for case in GROWTH_CASES]
            claims += [_renamed(growth_decreasing_upper(*case, offset=o), shift) for case in UPPER_CASES]
            claims += [_renamed(tail_integral(W, s=s), shift) for W in (1, 2, 8)]
        for shift in (0.0, *OFFSET_SHIFTS):
            claims += [_renamed(euler_maclaurin(*case, s=(shift, shift)), shift) for case in EULER_MACLAURIN_CASES]
    return claims


def _renamed(claim, shift):
    import dataclasses

    return dataclasses.replace(claim, name=f"{claim.name}_offset{1 + shift:g}")
