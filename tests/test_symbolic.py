"""Symbolic derivations: each step compares two routes, and a corrupted claim fails its step."""

import math

import mpmath
import pytest
import sympy as sp

import otprior
from otprior import symbolic
from otprior.symbolic import derive_scale_invariant_prior, dilution_limits

STEPS = (
    "continuum_scaling",
    "continuum_limit",
    "first_integral",
    "normalisation",
    "change_of_variables",
    "cdf",
    "density",
    "fixed_point_substituted_back",
    "uniform_at_rho_zero",
)


@pytest.fixture(scope="module")
def derivation():
    return derive_scale_invariant_prior()


def test_every_step_verified(derivation):
    assert [s.name for s in derivation.steps] == list(STEPS)
    assert derivation.verified


def test_the_checker_can_fail():
    x = sp.Symbol("x", positive=True)
    assert symbolic._is_zero(sp.exp(sp.log(x)) - x)
    assert not symbolic._is_zero(sp.exp(sp.log(x)) - x + sp.Rational(1, 10**12))


# One corruption per claim (and one of the source recurrence). Each must make the step
# that checks it fail; the derivation as a whole must then report itself unverified.
CORRUPTIONS = {
    "recurrence": (
        "_recurrence_increments",
        lambda Pi, Pp, Sj, Sn, rho: ((Pi - Pp) - Sj ** (-2 * rho), (Sj - Sn) - 1 / Pi),
        {"continuum_limit"},
    ),
    "ode": ("_claimed_ode", lambda phi, psi, rho: (psi ** (-rho), -2 / phi), {"continuum_limit"}),
    "first_integral": (
        "_claimed_first_integral",
        lambda phi, psi, q: sp.log(phi) + psi**q / (2 * q),
        {"first_integral"},
    ),
    "normaliser": (
        "_claimed_normaliser",
        lambda q: q ** (1 / q) * sp.gamma(1 / q),
        {"normalisation", "fixed_point_substituted_back"},
    ),
    "position": (
        "_claimed_position",
        lambda q, tau: sp.lowergamma(1 / q, 2 * tau) / sp.gamma(1 / q),
        {"change_of_variables"},
    ),
    "cdf": ("_claimed_cdf", lambda tau: 1 - sp.exp(-2 * tau), {"cdf"}),
    "density": ("_claimed_density", lambda q, tau: sp.gamma(1 / q) * tau ** (1 - 2 / q), {"density"}),
}


DEFAULT_CORRUPTIONS = {"recurrence", "density"}  # the others (about 2 s each) run under -m slow


@pytest.mark.parametrize(
    "which",
    [w if w in DEFAULT_CORRUPTIONS else pytest.param(w, marks=pytest.mark.slow) for w in sorted(CORRUPTIONS)],
)
def test_a_corrupted_step_fails(monkeypatch, which):
    name, wrong, failing = CORRUPTIONS[which]
    monkeypatch.setattr(symbolic, name, wrong)
    d = derive_scale_invariant_prior()
    failed = {s.name for s in d.steps if not s.verified}
    assert failing <= failed, (which, failed)
    assert not d.verified


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, wrong, step",
    [
        ("_claimed_cdf", lambda tau: 1 - sp.exp(-tau) / 2, "rho_to_zero"),
        # a constant factor or a power q^k of Z_q does not change the limit of Z_q^q: change the exponent
        ("_claimed_normaliser", lambda q: q ** (2 / q - 1) * sp.gamma(1 / q), "normaliser_power"),
    ],
)
def test_a_corrupted_limit_fails(monkeypatch, name, wrong, step):
    monkeypatch.setattr(symbolic, name, wrong)
    lim = dilution_limits()
    assert not lim[step].verified
    assert not lim.verified


@pytest.mark.parametrize("rho, delta", [(0.3, 0.5), (0.5, 0.1), (0.8, 0.9)])
def test_symbolic_expressions_evaluate_to_numeric_module(derivation, rho, delta):
    subs = {derivation.rho: rho, derivation.delta: delta}
    assert float(derivation.cdf.subs(subs).evalf(30)) == pytest.approx(otprior.scale_invariant_cdf(delta, rho), rel=1e-12)
    assert float(derivation.density.subs(subs).evalf(30)) == pytest.approx(
        otprior.scale_invariant_density(delta, rho), rel=1e-10
    )
    assert float(derivation.normaliser.subs(derivation.rho, rho)) == pytest.approx(
        otprior.scale_invariant_normaliser(rho), rel=1e-13
    )


def test_regularized_gamma_inverse_against_mpmath():
    # P(a, P^-1(a, y)) = y, with P from an independent mpmath context at 40 digits
    ctx = mpmath.MPContext()
    ctx.dps = 40
    for a, y in [(2, "3/10"), ("1/2", "9/10"), (5, "1/100")]:
        tau = symbolic.RegularizedGammaInverse(sp.Rational(a), sp.Rational(y)).evalf(35)
        back = ctx.gammainc(ctx.mpf(str(a)), 0, ctx.mpf(str(tau)), regularized=True)
        assert abs(back - ctx.mpf(sp.Rational(y).p) / sp.Rational(y).q) < ctx.mpf(10) ** -30


def test_dilution_limits():
    lim = dilution_limits()
    assert lim.verified
    assert sp.simplify(lim.exponent - (1 - lim.rho)) == 0
    assert lim["normaliser_power"].expression == sp.exp(-1)
    assert lim["balanced_limit_at_fixed_n"].method == "numeric"
    assert lim["balanced_limit_at_fixed_n"].error is not None
    # 1 - pi_4(0) against otprior.ot_prior at dps=30 (regula falsi on the same recurrence; its
    # rho = 0.9999 case is left out: the double-precision start of ot_prior does not converge there)
    for gap, r in zip(lim["balanced_limit_at_fixed_n"].expression, (0.99, 0.999), strict=False):
        assert gap == pytest.approx(1 - float(otprior.ot_prior(4, r, dps=30)[0]), rel=1e-9)
    # Z_q^q at q = 0.001 is 0.36949: Stirling gives log Z_q^q = -1 + (q / 2) log(2 pi / q) + O(q^2),
    # an independent route to the same digits
    q = 0.001
    ctx = mpmath.MPContext()
    ctx.dps = 30
    zq = ctx.power(q, 1 / q - 1) * ctx.gamma(1 / q)
    assert float(zq**q) == pytest.approx(math.exp(-1 + q / 2 * math.log(2 * math.pi / q)), rel=1e-5)
    zq_power = math.exp(q * otprior.scale_invariant_normaliser(1 - q, log=True))
    assert zq_power == pytest.approx(float(zq**q), rel=1e-12)
    assert zq_power == pytest.approx(0.36949, abs=1e-5)
    assert abs(math.exp(1e-6 * otprior.scale_invariant_normaliser(1 - 1e-6, log=True)) - math.exp(-1)) < 1e-4
    with pytest.raises(otprior.PrecisionError, match="log=True"):
        otprior.scale_invariant_normaliser(1 - q)


def test_exponent_matches_exact_masses():
    # the fitted slope of the exact window mass tends to the symbolic exponent -(1 - rho)
    rho = 0.5
    m1, m2 = otprior.ot_window_mass(8, 2**14, rho), otprior.ot_window_mass(8, 2**17, rho)
    slope = math.log(m2 / m1) / math.log(2**3)
    assert slope == pytest.approx(-(1 - rho), abs=0.01)
