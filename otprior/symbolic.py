"""Symbolic derivations (sympy): the scale-invariant prior and the dilution limits.

Every step compares two expressions that sympy obtained by *different routes* (one
derived from the recurrence of Theorem 2, one claimed in ``proofs/``), and is marked
verified only when their difference simplifies to zero. A corrupted claim therefore
fails its step (``tests/test_symbolic.py`` corrupts each one). A step that sympy cannot
do is done numerically, in a private mpmath context, and its error is stated.
``proofs/scale_invariant_prior.md`` (Theorem 3) and ``proofs/limits_in_rho.md``
(Theorem 6) give the surrounding arguments.
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
    rule, checked against the derivative of ``P`` in step ``density`` of
    :func:`derive_scale_invariant_prior`); numerical evaluation by a root of mpmath's
    regularised ``gammainc`` started from scipy's ``gammaincinv``, in a private mpmath
    context (the global one is neither read nor written).
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
        ctx = mpmath.MPContext()
        ctx.prec = prec + 40
        am, ym = ctx.mpf(str(a)), ctx.mpf(str(y))
        if ym == 0:
            return sp.Float(0, precision=prec)
        start = ctx.mpf(float(_sc_gammaincinv(float(am), float(ym))))
        root = ctx.findroot(lambda x: ctx.gammainc(am, 0, x, regularized=True) - ym, start)
        return sp.Float(str(root), precision=prec + 40)


@dataclass(frozen=True)
class Step:
    """One step of a derivation: what it claims, and sympy's verdict on it.

    ``expression`` is the difference of the two routes (zero when the step holds) or
    the computed object; ``verified`` is sympy's verdict, never assumed.
    """

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

    def __getitem__(self, name):
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)


def _is_zero(expr) -> bool:
    """sympy's verdict that ``expr`` is identically zero (``False`` when it cannot tell)."""
    expr = sp.simplify(sp.gammasimp(sp.powsimp(sp.expand_power_exp(expr), force=True)))
    return expr == 0


# --- The recurrence of Theorem 2 (the source) and the claims of Theorem 3 (what is checked).
# Each claim is one function so that a test can corrupt exactly one of them.


def _recurrence_increments(Phi_i, Phi_prev, Psi_j, Psi_next, rho):
    """Theorem 2 as increments: ``Phi_i - Phi_{i-1} = v_i = Psi_i^-rho`` and
    ``Psi_j - Psi_{j+1} = u_j = 1/Phi_j`` (each returned as ``lhs - rhs``)."""
    return (Phi_i - Phi_prev) - Psi_j ** (-rho), (Psi_j - Psi_next) - 1 / Phi_i


def _claimed_ode(phi, psi, rho):
    """Theorem 3: ``phi' = psi^-rho``, ``psi' = -1/phi``."""
    return psi ** (-rho), -1 / phi


def _claimed_first_integral(phi, psi, q):
    """Theorem 3, step 2: ``log phi + psi^q / q`` is constant along the ODE."""
    return sp.log(phi) + psi**q / q


def _claimed_normaliser(q):
    """Theorem 3, step 4: ``Z_q = q^(1/q - 1) Gamma(1/q)``."""
    return q ** (1 / q - 1) * sp.gamma(1 / q)


def _claimed_position(q, tau):
    """Theorem 3, step 3: the distance fraction ``delta = P(1/q, tau)``."""
    return sp.lowergamma(1 / q, tau) / sp.gamma(1 / q)


def _claimed_cdf(tau):
    """Theorem 3, step 5: ``F = 1 - exp(-tau)``."""
    return 1 - sp.exp(-tau)


def _claimed_density(q, tau):
    """Theorem 3, step 6: ``dF/ddelta = Gamma(1/q) tau^(1 - 1/q)``."""
    return sp.gamma(1 / q) * tau ** (1 - 1 / q)


def derive_scale_invariant_prior() -> ScaleInvariantDerivation:
    """Derive the scale-invariant prior of Theorem 3 with sympy, checking every step.

    Each step sets an expression derived from the recurrence of Theorem 2 against the
    expression claimed in ``proofs/scale_invariant_prior.md``:

    1. ``continuum_scaling``: with :math:`\\Phi\\sim t^A`, :math:`\\Psi\\sim t^B` the sums
       give :math:`B=1-A`, :math:`A=1-\\rho B`; sympy's solution is compared with the
       ansatz :math:`\\Phi_i=t\\phi(i/t)`, :math:`\\Psi_j=\\psi(j/t)` (``A=1``, ``B=0``).
    2. ``continuum_limit``: the increments of the recurrence under that ansatz, expanded
       by sympy in :math:`h=1/t`, give at leading order the ODE, compared with the
       claimed :math:`\\phi'=\\psi^{-\\rho}`, :math:`\\psi'=-1/\\phi`.
    3. ``first_integral``: the claimed invariant :math:`\\log\\phi+\\psi^q/q`
       (:math:`q=1-\\rho`) differentiated along the *derived* ODE is zero.
    4. ``normalisation``: solving the invariant for :math:`\\phi(\\psi)` with
       :math:`\\psi(1)=0`, integrating :math:`dx/d\\psi=-\\phi` (derived ODE) with
       :math:`\\psi(0)=\\infty`, sympy's integral :math:`1/\\phi(1)=\\int_0^\\infty` is compared
       with the claimed :math:`Z_q=q^{1/q-1}\\Gamma(1/q)`.
    5. ``change_of_variables``: sympy's :math:`\\delta=1-x=\\int_0^\\psi/\\int_0^\\infty` is
       compared with the claimed :math:`P(1/q,\\tau)`, :math:`\\tau=\\psi^q/q`.
    6. ``cdf``: :math:`F=1-\\phi(1-\\delta)/\\phi(1)` from the solved invariant, against the
       claimed :math:`1-e^{-\\tau}`.
    7. ``density``: the derivative of the claimed CDF in :math:`\\delta` (chain rule
       through the claimed position, and through :class:`RegularizedGammaInverse`)
       against the claimed :math:`\\Gamma(1/q)\\tau^{1-1/q}`.
    8. ``fixed_point_substituted_back``: the claimed parametric solution
       :math:`\\phi=e^{-\\tau}/Z_q`, :math:`x=1-P(1/q,\\tau)` substituted into the claimed
       ODE and its boundary conditions (:math:`x=1` at :math:`\\psi=0`; :math:`x\\to0`,
       :math:`\\phi\\to0` as :math:`\\psi\\to\\infty`).
    9. ``uniform_at_rho_zero``: at :math:`q=1` the claimed CDF equals the claimed
       position, i.e. :math:`F(\\delta)=\\delta`.

    Step 2 is a formal continuum limit (the leading order of a Taylor expansion), not
    a proof that the discrete solution converges; the status is stated in
    ``proofs/scale_invariant_prior.md``.

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
    h = sp.Symbol("h", positive=True)
    s = sp.Symbol("s", positive=True)
    psi = sp.Symbol("Psi", positive=True)
    phi_s = sp.Symbol("phi", positive=True)
    phi1 = sp.Symbol("phi1", positive=True)
    steps = []

    # (1) scaling exponents: Psi_j = sum_{i>=j} 1/Phi_i ~ t * t^-A and Phi_i = sum_{j<=i} Psi_j^-rho ~ t * t^(-rho B)
    A, B = sp.symbols("A B")
    sol = sp.solve([sp.Eq(B, 1 - A), sp.Eq(A, 1 - rho * B)], [A, B], dict=True)
    ok = len(sol) == 1 and _is_zero(sol[0][A] - 1) and _is_zero(sol[0][B])
    steps.append(Step("continuum_scaling", "Phi ~ t^A, Psi ~ t^B solved: A = 1, B = 0 (the ansatz)", sol, ok))

    # (2) continuum limit: Phi_i = phi(x)/h, Phi_{i-1} = phi(x - h)/h, Psi_j = psi(x), Psi_{j+1} = psi(x + h)
    phi_f, psi_f = sp.Function("phi")(x), sp.Function("psi")(x)
    inc_phi, inc_psi = _recurrence_increments(
        phi_f / h, phi_f.subs(x, x - h) / h, psi_f, psi_f.subs(x, x + h), rho
    )
    # the Phi equation is O(1) in h; the Psi equation is O(h): divide by h
    lead_phi = sp.series(inc_phi, h, 0, 1).removeO().doit()
    lead_psi = sp.series(sp.expand(inc_psi / h), h, 0, 1).removeO().doit()
    dphi, dpsi = sp.Derivative(phi_f, x), sp.Derivative(psi_f, x)
    derived_dphi = sp.solve(lead_phi, dphi)
    derived_dpsi = sp.solve(lead_psi, dpsi)
    claimed = _claimed_ode(phi_f, psi_f, rho)
    diff2 = None
    ok2 = len(derived_dphi) == 1 and len(derived_dpsi) == 1
    if ok2:
        diff2 = (derived_dphi[0] - claimed[0], derived_dpsi[0] - claimed[1])
        ok2 = _is_zero(diff2[0]) and _is_zero(diff2[1])
    steps.append(
        Step("continuum_limit", "leading order in h = 1/t of the recurrence: phi' = psi^-rho, psi' = -1/phi", diff2, ok2)
    )
    if not ok2:  # later steps need the derived ODE; fall back on the claimed one, the failure is recorded
        derived_dphi, derived_dpsi = [claimed[0]], [claimed[1]]
    ode = {dphi: derived_dphi[0], dpsi: derived_dpsi[0]}

    # (3) first integral along the derived ODE
    invariant = _claimed_first_integral(phi_f, psi_f, 1 - rho)
    along = sp.diff(invariant, x).subs(ode)
    steps.append(Step("first_integral", "d/dx [log phi + psi^q/q] = 0 along the derived ODE", along, _is_zero(along)))

    # (4) phi(psi) from the invariant with psi(1) = 0; x(psi) from dx/dpsi = 1/psi' (derived ODE)
    inv_q = _claimed_first_integral(phi_s, psi, q)
    phi_of_psi = sp.solve(sp.Eq(inv_q, inv_q.subs({phi_s: phi1, psi: 0})), phi_s)
    ok_solve = len(phi_of_psi) == 1
    phi_of_psi = phi_of_psi[0] if ok_solve else phi1 * sp.exp(-(psi**q) / q)
    dx_dpsi = (1 / derived_dpsi[0]).subs({phi_f: phi_of_psi, psi_f: psi, rho: 1 - q})  # = -phi(psi)
    # 1 - x(psi) = -int_0^psi dx/dpsi; x(psi -> oo) = 0 fixes phi1
    head = sp.integrate(-dx_dpsi.subs(psi, s), (s, 0, psi))
    total = sp.integrate(-dx_dpsi.subs(psi, s), (s, 0, sp.oo))
    Z_derived = total / phi1  # 1/phi(1) = int_0^oo e^{-s^q/q} ds
    Z = _claimed_normaliser(q)
    diff4 = Z_derived - Z
    steps.append(
        Step("normalisation", "1/phi(1) = int_0^oo exp(-s^q/q) ds = q^(1/q-1) Gamma(1/q)", diff4, ok_solve and _is_zero(diff4))
    )

    # (5) distance fraction delta = 1 - x = head / total against P(1/q, tau)
    position = _claimed_position(q, tau)
    diff5 = head / total - position.subs(tau, psi**q / q)
    steps.append(Step("change_of_variables", "delta = P(1/q, tau), tau = Psi^q / q", diff5, _is_zero(diff5)))

    # (6) F = 1 - phi(psi)/phi(1) (the mass within delta) against the claimed CDF in tau
    cdf_tau = _claimed_cdf(tau)
    F_derived = (1 - phi_of_psi / phi_of_psi.subs(psi, 0)).subs(psi, (q * tau) ** (1 / q))
    diff6 = F_derived - cdf_tau
    steps.append(Step("cdf", "F = 1 - phi(1 - delta)/phi(1) = 1 - exp(-tau)", diff6, _is_zero(diff6)))

    # (7) density: dF/ddelta by the chain rule in tau, and through the inverse function
    density_tau = _claimed_density(q, tau)
    diff7 = sp.diff(cdf_tau, tau) / sp.diff(position, tau) - density_tau
    inverse = RegularizedGammaInverse(1 / q, delta)
    cdf_q = cdf_tau.subs(tau, inverse)
    diff7b = sp.diff(cdf_q, delta) - density_tau.subs(tau, inverse)
    # the inverse-function rule of RegularizedGammaInverse against d P / d tau
    diff7c = RegularizedGammaInverse(1 / q, delta).fdiff(2).subs(inverse, tau) * sp.diff(
        sp.lowergamma(1 / q, tau) / sp.gamma(1 / q), tau
    ) - 1
    ok7 = _is_zero(diff7) and _is_zero(diff7b) and _is_zero(diff7c)
    steps.append(Step("density", "dF/ddelta = Gamma(1/q) tau^(1 - 1/q)", (diff7, diff7b, diff7c), ok7))

    # (8) the claimed solution substituted back into the claimed ODE and boundary conditions
    tau_psi = psi**q / q
    phi_sol = sp.exp(-tau_psi) / Z
    x_sol = 1 - position.subs(tau, tau_psi)
    ode_claim = _claimed_ode(phi_s, psi, 1 - q)
    res_phi = sp.diff(phi_sol, psi) / sp.diff(x_sol, psi) - ode_claim[0].subs(phi_s, phi_sol)
    res_psi = 1 / sp.diff(x_sol, psi) - ode_claim[1].subs(phi_s, phi_sol)
    at_zero = x_sol.subs(psi, 0)
    x_inf = sp.limit(x_sol.subs(q, sp.Rational(1, 2)), psi, sp.oo)  # sympy's limit needs a numeric q
    x_inf_1 = sp.limit(x_sol.subs(q, 1), psi, sp.oo)
    phi_inf = sp.limit(phi_sol.subs(q, sp.Rational(1, 2)), psi, sp.oo)
    ok8 = _is_zero(res_phi) and _is_zero(res_psi) and _is_zero(at_zero - 1) and x_inf == 0 and x_inf_1 == 0 and phi_inf == 0
    steps.append(
        Step(
            "fixed_point_substituted_back",
            "phi = exp(-tau)/Z_q, x = 1 - P(1/q, tau) solve the ODE with x(psi=0) = 1, x, phi -> 0 as psi -> oo",
            (res_phi, res_psi),
            ok8,
        )
    )

    # (9) rho = 0 (q = 1): F = delta
    diff9 = sp.expand_func(cdf_tau - position.subs(q, 1))
    steps.append(Step("uniform_at_rho_zero", "rho = 0: F(delta) = P(1, tau) = delta", diff9, _is_zero(diff9)))

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
    """Limits of the dilution of the causal OT prior as ``rho`` varies (Theorem 6).

    Each step compares what sympy computes with what ``proofs/limits_in_rho.md`` claims:

    - ``exponent``: :math:`\\lim_n \\log m_n / \\log n`, computed by sympy from the law
      :math:`H(Z/n)^q`, against the claimed :math:`-(1-\\rho)`;
    - ``rho_to_zero``: the claimed position :math:`P(1,\\tau)=\\delta` solved for
      :math:`\\tau` and put into the claimed CDF gives :math:`F_0(\\delta)=\\delta`;
    - ``rho_to_one``: :math:`F_\\rho(\\delta) \\to 1` for every :math:`\\delta > 0`,
      through :math:`1 - F \\le \\exp(-(\\delta\\Gamma(a+1))^{1/a})`, ``a = 1/q``
      (sympy's limit of the exponent is :math:`+\\infty`);
    - ``window_law_vanishes``: :math:`\\lim_{n\\to\\infty} m_n(W;\\rho) = 0` for each
      ``rho < 1`` (symbolic), so :math:`\\lim_{\\rho\\to1}\\lim_n m_n = 0`;
    - ``balanced_limit_at_fixed_n``: :math:`\\lim_{\\rho\\to1} \\pi_n(0) = 1` at fixed
      ``n`` (numeric: the backward recurrence of Theorem 2 with its root found by
      bisection in :math:`\\log c`, in a private mpmath context at ``numeric_dps``
      digits, ``n = 4``), so the two limits do not commute;
    - ``normaliser_power``: :math:`Z_q^q \\to 1/e` as :math:`q \\to 0`, sympy's limit of
      :math:`q\\log Z_q` for the claimed normaliser.

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
    tau = sp.Symbol("tau", positive=True)
    H, Zs = sp.symbols("H Z", positive=True)
    steps = []

    law = H * (Zs / n) ** q
    rate = sp.limit(sp.log(law) / sp.log(n), n, sp.oo)
    steps.append(Step("exponent", "log m_n / log n -> -(1 - rho)", rate.subs(q, 1 - rho), _is_zero(rate + q)))

    taus = sp.solve(sp.Eq(sp.expand_func(_claimed_position(1, tau)), delta), tau)
    f0 = _claimed_cdf(taus[0]) if len(taus) == 1 else sp.nan
    ok0 = len(taus) == 1 and _is_zero(f0 - delta)
    steps.append(Step("rho_to_zero", "F_0(delta) = delta", f0, ok0))

    exponent_bound = sp.limit((sp.log(delta) + sp.loggamma(a + 1)) / a, a, sp.oo)
    steps.append(
        Step(
            "rho_to_one",
            "1 - F_rho(delta) <= exp(-(delta Gamma(1/q + 1))^q) -> 0 as q -> 0",
            exponent_bound,
            exponent_bound == sp.oo,
        )
    )

    # the law is the constant H_W Z_q^q times n^(-q): its limit is that of n^(-q)
    factor = sp.simplify(law / n ** (-q))
    vanish = sp.limit(n ** (-q), n, sp.oo)
    ok_v = vanish == 0 and not factor.has(n)
    steps.append(Step("window_law_vanishes", "m_n(W; rho) -> 0 as n -> oo for rho < 1", vanish, ok_v))

    gaps = [1 - _balanced_first_entry(4, 10**-k, numeric_dps) for k in (2, 3, 4)]
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

    q_log_z = sp.expand_log(q * sp.log(_claimed_normaliser(q)), force=True)
    q_log_z = q_log_z.replace(sp.log(sp.gamma(1 / q)), sp.loggamma(1 / q))
    zpow = sp.exp(sp.limit(q_log_z, q, 0, "+"))
    steps.append(Step("normaliser_power", "Z_q^q -> 1/e as q -> 0", zpow, _is_zero(zpow - sp.exp(-1))))

    return DilutionLimits(rho=rho, exponent=(1 - rho), steps=steps)


def _balanced_first_entry(n, one_minus_rho, dps):
    """:math:`\\pi_n(0)=c^{\\rho-1}` for constant scores (Theorem 2), ``rho = 1 - one_minus_rho``.

    The root ``c`` of :math:`\\Phi_0(c)=0` is found by bisection in :math:`\\log c`
    (Theorem 2: below the root some :math:`\\Phi_k\\le0`, :math:`k\\ge0`; above it
    :math:`\\Phi_0>0`), in a private mpmath context at ``dps + 10`` digits.
    """
    ctx = mpmath.MPContext()
    ctx.dps = dps + 10
    rho = 1 - ctx.mpf(one_minus_rho)

    def above_root(log_c):
        c = ctx.exp(log_c)
        phi, psi = c, ctx.zero
        for _ in range(n):
            psi += 1 / phi
            phi -= psi ** (-rho)
            if phi <= 0:
                return False
        return True

    lo, hi = ctx.zero, ctx.mpf(1)
    while not above_root(hi):
        lo, hi = hi, 2 * hi
    for _ in range(int(3.4 * ctx.dps) + 20):  # 2^-(3.4 dps) ~ 10^-dps in log c
        mid = (lo + hi) / 2
        if above_root(mid):
            hi = mid
        else:
            lo = mid
    return float(ctx.exp((rho - 1) * (lo + hi) / 2))
