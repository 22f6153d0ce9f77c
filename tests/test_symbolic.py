"""Symbolic derivations: each step is checked by sympy; results match the numeric modules."""

import math

import mpmath
import pytest
import sympy as sp

import otprior
from otprior.symbolic import _is_zero, derive_scale_invariant_prior, dilution_limits


@pytest.fixture(scope="module")
def derivation():
    return derive_scale_invariant_prior()


def test_every_step_verified(derivation):
    names = [s.name for s in derivation.steps]
    for needed in ("first_integral", "change_of_variables", "normalisation", "cdf", "density"):
        assert needed in names
    assert derivation.verified


def test_the_checker_can_fail():
    x = sp.Symbol("x", positive=True)
    assert _is_zero(sp.exp(sp.log(x)) - x)
    assert not _is_zero(sp.exp(sp.log(x)) - x + sp.Rational(1, 10**12))


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


def test_dilution_limits():
    lim = dilution_limits()
    assert lim.verified
    assert sp.simplify(lim.exponent - (1 - lim.rho)) == 0
    assert lim["normaliser_power"].expression == sp.exp(-1)
    assert lim["balanced_limit_at_fixed_n"].method == "numeric"
    assert lim["balanced_limit_at_fixed_n"].error is not None
    # Z_q^q at q = 0.001 is 0.36949 (THEORY.md 4(c) prints 0.3699; see README): Stirling gives
    # log Z_q^q = -1 + (q / 2) log(2 pi / q) + O(q^2), an independent route to the same digits
    q = 0.001
    with mpmath.workdps(30):
        zq = mpmath.power(q, 1 / q - 1) * mpmath.gamma(1 / q)
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
