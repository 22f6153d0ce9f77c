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
    """Lemma 9a(ii) as ``margin_for`` uses it: the factor ``up = A = H/(T1 + H/k)`` increases in alpha and
    ``down`` (``P/T0``, times ``T0/(T0 + kH)`` for absolute growth) decreases: ``_record``'s ``log_up`` and
    ``log_down``, differentiated through the library's code."""
    rel = kind == "relative"

    def sides(ops, alpha):
        _, record, _ = margin_growth(W, L0, L1, rel, B, _offset(offset))
        rec = record(_alpha_jet(alpha))
        return [(0, rec.log_up.d[0]), (rec.log_down.d[0], 0)]

    # up -> k as alpha -> oo, and for relative growth with B > 0 down = P/T0 -> k - 1/k: those slopes vanish there
    tight = (({"alpha": 2**20}, 0, 0, 2.0**-100),) + ((({"alpha": 2**20}, 1, 0, 2.0**-100),) if rel and B > 0 else ())
    return Claim(
        f"growth_factors_monotone_{kind}_W{W}_L{L0}_{L1}_B{B:g}",
        "proofs/margin_selection.md (Lemma 9a(ii))",
        f"d log(up)/d alpha >= 0 >= d log(down)/d alpha for margin's factors ({kind}, W={W}, L0={L0}, L1={L1}, B={B:g})",
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


def stick_breaking_every_constant(B=1.0, biases=(0, -1, -2), c_range=(-8.0, 8.0), budget=3000):
    """Theorem N4(iii) on a row of three keys (``W = 1``): for every constant ``c`` in ``c_range`` and every
    content ``e_d`` in ``[-B, B]``, stick-breaking's distant share ``P_1 - P_3`` is at most
    ``T_3/(T_3 + e^(-2B) H)`` with ``H = e^(b_0)``, ``T_3 = e^(b_1) + e^(b_2)`` (softmax's bound). The bound
    is approached as the constant varies but not attained (the proof's two steps are tight at different
    constants), so the check has no tight point: a constant loosened in the bound would pass."""
    b0, b1, b2 = biases

    def sides(ops, c, e0, e1, e2):
        s0, s1, s2 = (_sigmoid(ops, b + c + e) for b, e in ((b0, e0), (b1, e1), (b2, e2)))
        distant = (1 - s0) * (s1 + s2 - s1 * s2)  # P_1 - P_3 = P_1 (1 - (1 - s1)(1 - s2))
        H, T = iv.iv_exp(b0), iv.iv_exp(b1) + iv.iv_exp(b2)  # constants of the row
        return [(distant, T / (T + iv.iv_exp(-2 * iv._exact(B)) * H))]

    return Claim(
        "stick_breaking_every_constant",
        "proofs/normalisers.md (Theorem N4(iii))",
        f"P_1 - P_3 <= T/(T + e^(-2B) H) for z_d = b_d + c + e_d, b = {biases}, |e_d| <= B = {B:g}, c in {c_range}",
        {"c": c_range, "e0": (-B, B), "e1": (-B, B), "e2": (-B, B)},
        sides,
        centered=True,
        budget=budget,
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
    claims += [stick_breaking_every_constant(), forgetting_gates_worst_case()]
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
