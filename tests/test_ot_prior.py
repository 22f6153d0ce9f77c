"""The constant-score prior (Theorem 2), the window law (Theorem 4), the bound (Theorem 5)."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otprior
from otprior import DomainError


@pytest.mark.parametrize("rho", [0.3, 0.5])
def test_prior_equals_sinkhorn_fixed_point(rho):
    n = 256
    A = otprior.causal_ot_attention(np.zeros((n, n)), rho, variant="full")  # last row = prefix n
    np.testing.assert_allclose(otprior.ot_prior(n, rho), A[-1, ::-1], rtol=1e-12, atol=0)


@pytest.mark.parametrize("rho", [0.5, 0.9, 0.99])
def test_double_sweep_agrees_with_high_precision_recurrence(rho):
    n = 200
    res = otprior.ot_prior(n, rho)
    exact = otprior.ot_prior(n, rho, dps=30)  # an independent route: Arb recurrence, bracketed root
    rel = np.max(np.abs(res.prior / exact.mid - 1))
    assert rel <= 1.01 * res.log_error_bound + 1e-14
    assert res.log_error_bound < 1e-10
    assert np.all((exact.lo <= res.prior * (1 + 2 * res.log_error_bound)) & (res.prior * (1 - 2 * res.log_error_bound) <= exact.hi))


def test_recurrence_digits_agree_at_two_precisions():
    low = otprior.ot_prior(64, 0.8, dps=20)
    high = otprior.ot_prior(64, 0.8, dps=40)
    ctx = mpmath.MPContext()
    ctx.dps = 40
    assert max(abs(ctx.mpf(a) / ctx.mpf(b) - 1) for a, b in zip(low.values, high.values, strict=True)) < ctx.mpf(10) ** -19
    assert np.all(low.rad <= 1e-20 * low.mid)
    assert mpmath.mp.dps == 15  # precision is local


def test_recurrence_is_ill_conditioned_as_documented():
    res = otprior.ot_prior(2048, 0.5)
    assert 3 < res.log10_condition < 6  # about 4 digits lost by the backward recurrence in double


def test_rho_zero_is_uniform():
    np.testing.assert_array_equal(otprior.ot_prior(7, 0.0).prior, np.full(7, 1 / 7))
    assert otprior.ot_window_mass(3, 12, 0.0) == pytest.approx(0.25, abs=1e-15)
    assert otprior.ot_window_law(3, 12, 0.0) == pytest.approx(0.25, abs=1e-15)


def test_published_reference_figures():
    # figures published with the theory (the constant-score prior, section 2; the window law,
    # section 4(a)): c ~ 2.7e3 at t = 256, rho = 0.8; law vs exact
    assert otprior.ot_prior(256, 0.8).c == pytest.approx(2.7e3, rel=0.01)
    assert otprior.ot_window_law(10, 1024, 0.5) == pytest.approx(0.1110, abs=1e-4)
    assert otprior.ot_window_mass(10, 1024, 0.5) == pytest.approx(0.1111, abs=1e-4)
    assert otprior.ot_window_mass(10, 1024, 0.8) == pytest.approx(0.469, abs=1e-3)


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.7])
def test_discrete_prior_approaches_continuum_at_rate_one_minus_rho(rho):
    ns = np.array([256, 1024, 4096, 16384])
    errors = []
    for n in ns:
        F_discrete = np.cumsum(otprior.ot_prior(int(n), rho))
        F_continuum = otprior.scale_invariant_cdf(np.arange(1, n + 1) / n, rho)
        errors.append(np.max(np.abs(F_discrete - F_continuum)))
    assert np.all(np.diff(errors) < 0)
    slope = np.polyfit(np.log(ns), np.log(errors), 1)[0]
    # measured slopes -0.64, -0.46, -0.26: sup error ~ n^-(1 - rho) (proofs/window_law.md)
    assert abs(slope + (1 - rho)) < 0.1


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.8])
def test_window_law_error_shrinks(rho):
    errs = [abs(otprior.ot_window_law(16, n, rho) / otprior.ot_window_mass(16, n, rho) - 1) for n in (512, 4096, 32768)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 0.01


def test_window_mass_certified_path_contains_the_float():
    ball = otprior.ot_window_mass(5, 100, 0.6, certified=True)
    m = otprior.ot_window_mass(5, 100, 0.6)
    err = otprior.ot_prior(100, 0.6).log_error_bound + 16 * np.finfo(float).eps
    assert ball.lo * (1 - err) <= m <= ball.hi * (1 + err)  # the float within its stated error
    assert ball.width < 1e-11 * ball.mid
    # an independent reference: the mpmath recurrence at 40 digits with the root by findroot
    assert ball.lo <= float(mp_window_mass(5, 100, 0.6)) <= ball.hi


def mp_window_mass(window, n, rho):
    """Reference: Theorem 2's recurrence in a private 40-digit mpmath context, root by
    bisection on the sign of Phi_0 (written independently of otprior)."""
    ctx = mpmath.MPContext()
    ctx.dps = 40
    r = ctx.mpf(rho)

    def phis(c):
        phi, psi, out = c, ctx.mpf(0), [c]
        for _ in range(n):
            psi += 1 / phi
            phi -= psi ** (-r)
            out.append(phi)
            if phi < 0 and len(out) < n + 1:
                return None
        return out

    lo, hi = ctx.mpf(1), ctx.mpf(2)
    while phis(hi) is None or phis(hi)[-1] < 0:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        p = phis(mid)
        if p is None or p[-1] < 0:
            lo = mid
        else:
            hi = mid
    p = phis(hi)
    return 1 - p[window] / hi


def test_large_n_finishes():
    res = otprior.ot_prior(200_000, 0.9)
    assert res.prior.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(np.diff(res.prior) < 0)  # nearer keys get more
    assert res.log_error_bound < 1e-9


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 30),
    rho=st.floats(0.0, 0.95),
    B=st.floats(0.0, 3.0),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_dilution_bound_holds_for_random_bounded_scores(n, rho, B, seed, data):
    window = data.draw(st.integers(1, n))
    rng = np.random.default_rng(seed)
    c = rng.normal(scale=10)
    if rng.random() < 0.5:
        S = c + rng.uniform(-B, B, size=(n, n))
    else:
        S = c + adversarial_scores(n, window, B)
    A = otprior.causal_ot_attention(S, rho)
    mass = A[-1, n - window : n].sum()
    # the bound is proved; the operator's row carries its certified error (2 dual_tol) and rounding
    assert mass <= otprior.ot_dilution_bound(window, n, rho, B).bound * (1 + 1e-10)


def adversarial_scores(n, window, B):
    """+B on the window in the last row, -B on it in earlier rows (and the reverse elsewhere):
    the window gets the largest score where it counts and the smallest column mass."""
    win = np.arange(n) >= n - window
    S = np.where(win[None, :], -B, B) * np.ones((n, 1))
    S[-1] = np.where(win, B, -B)
    return S


def test_dilution_bound_is_useful_and_vanishes():
    n, W, rho, B = 512, 8, 0.5, 0.2
    S = adversarial_scores(n, W, B)
    observed = otprior.causal_ot_attention(S, rho)[-1, n - W :].sum()
    m0 = otprior.ot_window_mass(W, n, rho)
    bound = otprior.ot_dilution_bound(W, n, rho, B).bound
    log_k = 2 * B * (1 + rho) / (1 - rho)
    ratio = math.log(observed / m0) / log_k  # share of the bound's log-factor actually used
    assert 0.2 < ratio <= 1.0  # measured 0.29 (0.52 at rho = 0.3, 0.06 at rho = 0.8)
    assert observed < bound < 2.0 * observed  # measured bound / observed = 1.77
    bounds = [otprior.ot_dilution_bound(W, 2**k, rho, B).bound for k in (6, 10, 14)]
    assert all(b2 < b1 for b1, b2 in zip(bounds, bounds[1:], strict=False))
    assert bounds[-1] < 0.1
    assert otprior.ot_dilution_bound(W, n, rho, 0.0).bound == pytest.approx(m0, rel=1e-12)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: otprior.ot_prior(0, 0.5), "n"),
        (lambda: otprior.ot_prior(2.5, 0.5), "n"),
        (lambda: otprior.ot_prior(10, 1.0), "rho"),
        (lambda: otprior.ot_prior(10, -0.2), "rho"),
        (lambda: otprior.ot_prior(10, 0.5, dps=0), "dps"),
        (lambda: otprior.ot_window_mass(0, 10, 0.5), "window"),
        (lambda: otprior.ot_window_mass(11, 10, 0.5), "window"),
        (lambda: otprior.ot_window_law(3, 0, 0.5), "n"),
        (lambda: otprior.ot_dilution_bound(3, 10, 0.5, -1.0), "score_bound"),
        (lambda: otprior.ot_dilution_bound(3, 10, 0.5, float("nan")), "score_bound"),
    ],
)
def test_refusals(call, name):
    with pytest.raises(DomainError) as info:
        call()
    assert info.value.parameter == name
    assert name in str(info.value) and "valid domain" in str(info.value)


@pytest.mark.parametrize("rho", [0.2, 0.5, 0.9])
@pytest.mark.parametrize("n", [16, 300, 5000])
def test_exact_window_bounds_of_theorem_4(rho, n):
    c = otprior.ot_prior(n, rho).c
    for W in sorted({1, 4, min(64, n)}):
        H = float(np.sum(np.arange(1, W + 1) ** -rho))
        upper = H * c ** (rho - 1)
        lower = upper * max(0.0, 1 - (W - 1) * c ** (rho - 1)) ** rho
        m = otprior.ot_window_mass(W, n, rho, method="exact")  # Theorem 4(i) at the exact root
        assert lower * (1 - 1e-10) <= m <= upper * (1 + 1e-10)


@pytest.mark.parametrize("args", [(10**6, 10**18, 0.9, 0.3), (10**5, 10**18, 0.99, 0.0), (10**200, int(1e300), 0.5, 0.0)])
def test_dilution_bound_with_a_wide_mass_enclosure_is_a_bound(args):
    # m0's enclosure spans many decades here (bounds route): the bound is the share K m/(1+(K-1)m)
    # at m0's upper end, and contains the B = 0 mass
    window, n, rho, B = args
    res = otprior.ot_dilution_bound(window, n, rho, B)
    m0 = otprior.ot_window_mass(window, n, rho, certified=True)
    assert 0.0 <= res.enclosure.lo <= res.enclosure.hi and res.bound <= 1.0
    assert res.bound >= m0.hi * (1 - 1e-15) or res.bound == 1.0
    if B == 0.0:
        assert res.enclosure.lo <= m0.lo * (1 + 1e-15) and res.bound >= m0.hi * (1 - 1e-15)
