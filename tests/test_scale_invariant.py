"""The scale-invariant prior (Theorem 3) against mpmath at 30 digits."""

import mpmath
import numpy as np
import pytest
from scipy.integrate import quad

import otprior
from otprior import DomainError


def mp_cdf(delta, rho):
    """Reference: tau by bisection on mpmath's regularised lower incomplete gamma, 30 digits."""
    with mpmath.workdps(30):
        a, y = 1 / (1 - mpmath.mpf(rho)), mpmath.mpf(delta)
        lo, hi = mpmath.mpf(0), mpmath.mpf(1)
        while mpmath.gammainc(a, 0, hi, regularized=True) < y:
            hi *= 2
        for _ in range(120):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if mpmath.gammainc(a, 0, mid, regularized=True) < y else (lo, mid)
        tau = (lo + hi) / 2
        return 1 - mpmath.exp(-tau), mpmath.gamma(a) * tau ** (1 - a)


@pytest.mark.parametrize("rho", [0.1, 0.3, 0.5, 0.8, 0.95])
@pytest.mark.parametrize("delta", [1e-6, 0.01, 0.3, 0.5, 0.9, 0.999])
def test_cdf_and_density_match_mpmath(delta, rho):
    F, f = mp_cdf(delta, rho)
    assert otprior.scale_invariant_cdf(delta, rho) == pytest.approx(float(F), rel=1e-11)
    assert otprior.scale_invariant_density(delta, rho) == pytest.approx(float(f), rel=1e-10)


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.7])
def test_density_integrates_to_cdf(rho):
    for delta in (0.2, 0.6, 1.0):
        val, err = quad(lambda x: otprior.scale_invariant_density(x, rho), 0, delta, limit=200)
        assert val == pytest.approx(otprior.scale_invariant_cdf(delta, rho), abs=1e-8)


@pytest.mark.parametrize("rho", [0.0, 0.2, 0.5, 0.9, 0.99])
def test_normaliser_is_the_integral(rho):
    q = 1 - rho
    with mpmath.workdps(30):
        Z = mpmath.quad(lambda s: mpmath.exp(-(s**q) / q), [0, 1, 10, mpmath.inf])
    assert otprior.scale_invariant_normaliser(rho) == pytest.approx(float(Z), rel=1e-12)


def test_rho_zero_uniform_and_endpoints():
    d = np.linspace(0, 1, 11)
    np.testing.assert_allclose(otprior.scale_invariant_cdf(d, 0.0), d, atol=1e-15)
    np.testing.assert_allclose(otprior.scale_invariant_density(d, 0.0), 1.0)
    assert otprior.scale_invariant_cdf(0.0, 0.7) == 0.0
    assert otprior.scale_invariant_cdf(1.0, 0.7) == 1.0
    assert otprior.scale_invariant_density(0.0, 0.7) == np.inf
    assert otprior.scale_invariant_density(1.0, 0.7) == 0.0


def test_vectorised_shape():
    d = np.linspace(0, 1, 12).reshape(3, 4)
    assert otprior.scale_invariant_cdf(d, 0.4).shape == (3, 4)
    assert isinstance(otprior.scale_invariant_cdf(0.5, 0.4), float)


@pytest.mark.parametrize("delta", [-0.1, 1.5, float("nan"), [0.2, 2.0]])
def test_refuses_delta_outside_unit_interval(delta):
    with pytest.raises(DomainError, match="delta"):
        otprior.scale_invariant_cdf(delta, 0.5)
    with pytest.raises(DomainError, match="delta"):
        otprior.scale_invariant_density(delta, 0.5)


def test_refuses_bad_rho():
    with pytest.raises(DomainError, match="rho"):
        otprior.scale_invariant_cdf(0.5, 1.0)
    with pytest.raises(DomainError, match="rho"):
        otprior.scale_invariant_normaliser(-0.5)
