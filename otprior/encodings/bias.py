"""Any relative bias: an expression (parsed by ``otprior.expression``) or a Python callable."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mpmath
import numpy as np

from .._registry import param
from .._validation import DomainError, PrecisionError, check_real
from ..expression import (
    DEFAULT_MEMORY_BUDGET,
    DEFAULT_TIME_BUDGET,
    BudgetExceeded,
    check_bias_values,
    import_sympy,
    parse_bias,
    run_budgeted,
)
from ._base import Encoding, Verdict, nonneg, register

__all__ = ["Bias"]


def _decide(b, d):
    """(kind, reason) for sum_d e^b(d): log-distance and Bertrand comparisons, then sympy's tests."""
    sp = import_sympy()

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
    symbol : str or sympy.Symbol, optional
        The distance symbol (``"d"`` for text; a sympy expression's only free symbol by default).
    asymptotic : str or sympy expression, optional
        For a callable: an expression with the same behaviour as ``d -> oo``.
    time_budget, memory_budget : float, int
        The verdict (sympy's limits and tests) and ``D_oo`` each run under these, in a child
        process. When one runs out during the verdict, the verdict is "undecided" with that
        reason; during ``Verdict.limit_distant_mass(W)``, that call raises
        :class:`~otprior.PrecisionError` naming the budget.

    Notes
    -----
    The verdict decides :math:`\\sum e^{b(d)} < \\infty` by comparison with the log-distance
    and Bertrand series: :math:`L_1 = \\lim b(d)/\\log d` (:math:`< -1` summable,
    :math:`> -1` not); at :math:`L_1 = -1`, :math:`L_2 = \\lim (b(d) + \\log d)/\\log\\log d`
    likewise. When sympy cannot take the limits or both are borderline, sympy's
    ``is_convergent`` is asked. If that fails too, or the budget ends, the verdict is
    "undecided", never a guess.
    """

    name = "bias"

    expr: object = param(doc="the bias b(d) in d: numbers, d, + - * / **, log exp sqrt sin cos abs min max")
    symbol: object = param(None, doc="the distance symbol (default d)")
    asymptotic: object = param(None, doc="for a callable: an expression with its behaviour as d -> oo", kw_only=True)
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)
    time_budget: float = param(DEFAULT_TIME_BUDGET, doc="seconds the verdict may take (then: undecided)", kw_only=True)
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
                raise DomainError("expr", str(expr), "an expression in the distance symbol alone")
        if self._callable is None:
            check_bias_values(expr, sym)  # real and finite at d = 0..64 (parsed text: a second, cheap check)
        d = sp.Symbol(str(sym), positive=True)
        s(self, "_sym", (d, expr.subs(sym, d)))
        if self._callable is None:
            s(self, "expr", expr)

    @property
    def expression(self):
        """The sympy expression in a positive distance symbol."""
        return self._sym[1]

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        with np.errstate(all="ignore"):
            if self._callable is not None:
                return np.asarray(self._callable(d), dtype=float) * np.ones_like(d)
            sp = import_sympy()

            fn = sp.lambdify(self._sym[0], self._sym[1], "numpy")
            values = np.asarray(fn(d))
            if np.iscomplexobj(values):
                raise DomainError("expr", str(self.expression), "an expression real at every distance (this one is complex)")
            return values.astype(float) * np.ones_like(d)

    def _verdict(self):
        d, b = self._sym
        try:
            kind, reason = run_budgeted(_decide, b, d, time_budget=self.time_budget, memory_budget=self.memory_budget)
        except BudgetExceeded as exc:
            return Verdict(self, None, "undecided", f"the summability of e^b(d) was not decided: {exc.reason}.")
        if kind == "bounded":
            return self._bounded(reason)
        if kind == "diluting":
            return Verdict(self, False, "diluting", reason, None)
        return Verdict(self, None, "undecided", reason)

    def _bounded(self, reason):
        d, b = self._sym

        def limit(W):
            try:
                values = run_budgeted(_tail_limit, self.bias, b, d, W, time_budget=self.time_budget, memory_budget=self.memory_budget)
            except BudgetExceeded as exc:
                raise PrecisionError(f"D_oo(W) for exp({self.expression}) was not computed: {exc.reason}") from None
            if abs(values[0] - values[1]) > 1e-6 * abs(values[1]):
                raise PrecisionError(
                    f"D_oo(W) for exp({self.expression}) cannot be certified: cut-offs 2^14 and 2^17 give "
                    f"{values[0]:.8g} and {values[1]:.8g}"
                )
            return values[1]

        return Verdict(self, True, "bounded", reason, None, limit_fn=limit)

    def __repr__(self):
        return f"Bias({str(self.expression)!r})"
