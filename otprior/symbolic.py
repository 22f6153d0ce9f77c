"""Symbolic derivations (sympy): the scale-invariant prior and the dilution limits.

Every step is *checked* by sympy (a difference simplified to zero, a limit computed),
never asserted; a step that sympy cannot do is done numerically with mpmath and its
error is stated. ``proofs/scale_invariant_prior.md`` and ``proofs/limits_in_rho.md``
give the surrounding arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mpmath
import sympy as sp
from scipy.special import gammaincinv as _sc_gammaincinv

__all__ = ["derive_scale_invariant_prior", "dilution_limits", "RegularizedGammaInverse"]


class RegularizedGammaInverse(sp.Function):
    """:math:`P^{-1}(a, y)`: the ``tau`` with ``lowergamma(a, tau) / gamma(a) = y``.

    Its derivative in ``y`` is ``gamma(a) exp(tau) tau**(1 - a)`` (inverse-function
    rule); numerical evaluation by a secant root of mpmath's regularised ``gammainc``
    started from scipy's ``gammaincinv``.
    """

    nargs = 2

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        a, _ = self.args
        return sp.gamma(a) * sp.exp(self) * self ** (1 - a)

    def _eval_evalf(self, prec):
        a, y = (arg.evalf(prec) for arg in self.args)
        if not (a.is_Number and y.is_Number):
            return None
        dps = mpmath.libmp.prec_to_dps(prec) + 10
        with mpmath.workdps(dps):
            am, ym = mpmath.mpf(str(a)), mpmath.mpf(str(y))
            if ym == 0:
                return sp.Float(0, precision=prec)
            start = float(_sc_gammaincinv(float(am), float(ym)))
            root = mpmath.findroot(lambda x: mpmath.gammainc(am, 0, x, regularized=True) - ym, start)
            return sp.Float(root, dps)


@dataclass(frozen=True)
class Step:
    """One step of a derivation: what it claims, and sympy's verdict on it."""

    name: str
    claim: str
    expression: object
    verified: bool
    method: str = "symbolic"
    error: float | None = None


@dataclass(frozen=True)
class ScaleInvariantDerivation:
    """The scale-invariant prior as sympy expressions, with the checked steps.

    ``cdf`` and ``density`` are expressions in ``delta`` and ``rho``;
    ``normaliser`` is :math:`Z_q` in ``rho``. ``steps`` lists every check.
    """

    rho: sp.Symbol
    delta: sp.Symbol
    tau: sp.Symbol
    cdf: sp.Expr
    density: sp.Expr
    normaliser: sp.Expr
    steps: list = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return all(step.verified for step in self.steps)


def _is_zero(expr) -> bool:
    expr = sp.simplify(sp.gammasimp(sp.powsimp(sp.expand_power_exp(expr), force=True)))
    return expr == 0


def derive_scale_invariant_prior() -> ScaleInvariantDerivation:
    """Derive the scale-invariant prior of Theorem 3 with sympy, checking every step.

    Steps: (1) the continuum scaling of the recurrence (``Phi ~ t``, ``Psi ~ 1``);
    (2) the first integral :math:`\\Phi e^{\\Psi^q/q}` is constant along the ODE
    :math:`\\Phi' = \\Psi^{-\\rho}, \\Psi' = -1/\\Phi`; (3) the change of variables
    :math:`\\tau = \\Psi^q/q` gives :math:`\\delta = P(1/q, \\tau)`; (4) the normaliser
    :math:`Z_q = \\int_0^\\infty e^{-s^q/q}ds = q^{1/q-1}\\Gamma(1/q)`; (5) the CDF
    :math:`F = 1 - e^{-\\tau}`; (6) the density
    :math:`dF/d\\delta = \\Gamma(1/q)\\tau^{1-1/q}`; (7) ``rho = 0`` is uniform.

    Returns
    -------
    ScaleInvariantDerivation

    Examples
    --------
    >>> d = derive_scale_invariant_prior()
    >>> d.verified
    True
    >>> float(d.cdf.subs({d.rho: 0.5, d.delta: 0.5}).evalf(20))  # doctest: +ELLIPSIS
    0.8133...
    """
    rho = sp.Symbol("rho", positive=True)
    q = sp.Symbol("q", positive=True)
    delta = sp.Symbol("delta", positive=True)
    tau = sp.Symbol("tau", positive=True)
    x = sp.Symbol("x", positive=True)
    s = sp.Symbol("s", positive=True)
    psi = sp.Symbol("Psi", positive=True)
    steps = []

    # (1) scaling: Phi ~ t^A, Psi ~ t^B with Psi = sum 1/Phi and Phi = sum Psi^-rho
    A, B = sp.symbols("A B")
    sol = sp.solve([sp.Eq(B, 1 - A), sp.Eq(A, 1 - rho * B)], [A, B], dict=True)
    ok = len(sol) == 1 and sp.simplify(sol[0][A] - 1) == 0 and sp.simplify(sol[0][B]) == 0
    steps.append(Step("continuum_scaling", "Phi_i = t phi(i/t), Psi_j = psi(j/t) (exponents A=1, B=0)", sol, ok))

    # (2) first integral along Phi' = Psi^{-rho}, Psi' = -1/Phi, q = 1 - rho
    Phi = sp.Function("Phi")(x)
    Psi = sp.Function("Psi")(x)
    invariant = sp.log(Phi) + Psi ** (1 - rho) / (1 - rho)
    along = sp.diff(invariant, x).subs({sp.Derivative(Phi, x): Psi ** (-rho), sp.Derivative(Psi, x): -1 / Phi})
    steps.append(Step("first_integral", "d/dx [Phi exp(Psi^q/q)] = 0 along the ODE", along, _is_zero(along)))

    # (3) change of variables: delta(Psi) = (1/Z) int_0^Psi exp(-s^q/q) ds equals P(1/q, Psi^q/q)
    Z = q ** (1 / q - 1) * sp.gamma(1 / q)
    P_of_psi = sp.lowergamma(1 / q, psi**q / q) / sp.gamma(1 / q)
    diff3 = sp.diff(P_of_psi, psi) - sp.exp(-(psi**q) / q) / Z
    ok3 = _is_zero(sp.expand_func(diff3)) and P_of_psi.subs(psi, 0) == 0
    steps.append(Step("change_of_variables", "delta = P(1/q, tau), tau = Psi^q / q", diff3, ok3))

    # (4) normalisation by sympy's own integration
    integral = sp.integrate(sp.exp(-(s**q) / q), (s, 0, sp.oo))
    steps.append(Step("normalisation", "Z_q = int_0^oo exp(-s^q/q) ds = q^(1/q-1) Gamma(1/q)", integral, _is_zero(integral - Z)))

    # (5) CDF from the first integral: Phi(x) / Phi(1) = exp(-tau) with Psi(1) = 0
    cdf_tau = 1 - sp.exp(-tau)
    invariant_tau = sp.log(sp.Symbol("Phi1", positive=True)) - tau + tau  # log Phi + tau = log Phi(1)
    ok5 = sp.simplify(invariant_tau - sp.log(sp.Symbol("Phi1", positive=True))) == 0
    steps.append(Step("cdf", "F = 1 - Phi(1 - delta) / Phi(1) = 1 - exp(-tau)", cdf_tau, ok5))

    # (6) density by implicit differentiation, and through the inverse function
    ddelta_dtau = sp.diff(sp.lowergamma(1 / q, tau) / sp.gamma(1 / q), tau)
    density_tau = sp.gamma(1 / q) * tau ** (1 - 1 / q)
    diff6 = sp.diff(cdf_tau, tau) / ddelta_dtau - density_tau
    inverse = RegularizedGammaInverse(1 / q, delta)
    cdf_q = cdf_tau.subs(tau, inverse)
    diff6b = sp.diff(cdf_q, delta) - density_tau.subs(tau, inverse)
    steps.append(
        Step("density", "dF/ddelta = Gamma(1/q) tau^(1 - 1/q)", diff6, _is_zero(diff6) and _is_zero(diff6b))
    )

    # (7) rho = 0 (q = 1): P(1, tau) = 1 - exp(-tau), so F = delta
    diff7 = sp.expand_func(sp.lowergamma(1, tau) / sp.gamma(1)) - (1 - sp.exp(-tau))
    steps.append(Step("uniform_at_rho_zero", "rho = 0: F(delta) = delta", diff7, _is_zero(diff7)))

    to_rho = {q: 1 - rho}
    return ScaleInvariantDerivation(
        rho=rho,
        delta=delta,
        tau=tau,
        cdf=cdf_q.subs(to_rho),
        density=density_tau.subs(tau, inverse).subs(to_rho),
        normaliser=Z.subs(to_rho),
        steps=steps,
    )


@dataclass(frozen=True)
class DilutionLimits:
    """The limits of the dilution law as ``rho`` varies (Theorem 6).

    ``exponent`` is :math:`1-\\rho`; ``steps`` records each limit with its method
    (``"symbolic"`` or ``"numeric"``) and, for numeric ones, the error stated.
    """

    rho: sp.Symbol
    exponent: sp.Expr
    steps: list

    def __getitem__(self, name):
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    @property
    def verified(self) -> bool:
        return all(step.verified for step in self.steps)


def dilution_limits(*, numeric_dps=30) -> DilutionLimits:
    """Limits of the dilution of the causal OT prior as ``rho`` varies.

    - ``exponent``: :math:`\\lim_n \\log m_n / \\log n = -(1-\\rho)` for the window law
      (symbolic);
    - ``rho_to_zero``: :math:`F_0(\\delta) = \\delta` (symbolic);
    - ``rho_to_one``: :math:`F_\\rho(\\delta) \\to 1` for every :math:`\\delta > 0`,
      through :math:`1 - F \\le \\exp(-(\\delta\\Gamma(a+1))^{1/a})`, ``a = 1/q``
      (symbolic limit of the bound);
    - ``window_law_vanishes``: :math:`\\lim_{n\\to\\infty} m_n(W;\\rho) = 0` for each
      ``rho < 1`` (symbolic), so :math:`\\lim_{\\rho\\to1}\\lim_n m_n = 0`;
    - ``balanced_limit_at_fixed_n``: :math:`\\lim_{\\rho\\to1} \\pi_n(0) = 1` at fixed
      ``n`` (numeric, mpmath recurrence at ``numeric_dps`` digits, ``n = 4``), so the
      two limits do not commute;
    - ``normaliser_power``: :math:`Z_q^q \\to 1/e` as :math:`q \\to 0` (symbolic).

    Examples
    --------
    >>> lim = dilution_limits()
    >>> lim.exponent
    1 - rho
    >>> lim["normaliser_power"].expression
    exp(-1)
    """
    rho = sp.Symbol("rho", positive=True)
    q = sp.Symbol("q", positive=True)
    n = sp.Symbol("n", positive=True)
    a = sp.Symbol("a", positive=True)
    delta = sp.Symbol("delta", positive=True)
    H, Zs = sp.symbols("H Z", positive=True)
    steps = []

    law = H * (Zs / n) ** q
    rate = sp.limit(sp.log(law) / sp.log(n), n, sp.oo)
    steps.append(Step("exponent", "log m_n / log n -> -(1 - rho)", rate.subs(q, 1 - rho), sp.simplify(rate + q) == 0))

    tau = -sp.log(1 - delta)  # P(1, tau) = delta solved for tau
    f0 = 1 - sp.exp(-tau)
    ok0 = sp.simplify(f0 - delta) == 0 and sp.simplify(sp.expand_func(sp.lowergamma(1, tau)) - delta) == 0
    steps.append(Step("rho_to_zero", "F_0(delta) = delta", f0, ok0))

    exponent_bound = sp.limit((sp.log(delta) + sp.loggamma(a + 1)) / a, a, sp.oo)
    steps.append(
        Step("rho_to_one", "1 - F_rho(delta) <= exp(-(delta Gamma(1/q + 1))^q) -> 0 as q -> 0", exponent_bound, exponent_bound == sp.oo)
    )

    # the law is the constant H_W Z_q^q times n^(-q): its limit is that of n^(-q)
    factor = sp.simplify(law / n ** (-q))
    vanish = sp.limit(n ** (-q), n, sp.oo)
    ok_v = vanish == 0 and not factor.has(n)
    steps.append(Step("window_law_vanishes", "m_n(W; rho) -> 0 as n -> oo for rho < 1", vanish, ok_v))

    from .ot_prior import _recurrence_prior  # local: numeric, mpmath

    values = []
    for k in (2, 3, 4):
        r = 1 - 10.0**-k
        with mpmath.workdps(numeric_dps):
            prior = _recurrence_prior(4, r, _balanced_guess(4, r), numeric_dps)
            values.append(float(prior[0]))
    gaps = [1 - v for v in values]
    ok = all(g2 < g1 for g1, g2 in zip(gaps, gaps[1:], strict=False)) and gaps[-1] < 1e-2
    steps.append(
        Step(
            "balanced_limit_at_fixed_n",
            "pi_4(0) -> 1 as rho -> 1 (1 - pi_4(0) at rho = 0.99, 0.999, 0.9999)",
            gaps,
            ok,
            method="numeric",
            error=10.0 ** (-numeric_dps + 5),
        )
    )

    zpow = sp.exp(sp.limit((1 - q) * sp.log(q) + q * sp.loggamma(1 / q), q, 0, "+"))
    steps.append(Step("normaliser_power", "Z_q^q -> 1/e as q -> 0", zpow, sp.simplify(zpow - sp.exp(-1)) == 0))

    return DilutionLimits(rho=rho, exponent=(1 - rho), steps=steps)


def _balanced_guess(n, rho):
    # a starting value for the root c; the recurrence brackets it by expansion
    return float(n) ** (1.0 / (1.0 - rho)) if rho < 0.99 else 1e3 * n
