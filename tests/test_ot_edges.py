"""Edges of the OT prior and operator: rho -> 1, huge scores, certified balls, property tests."""

import math

import mpmath
import numpy as np
import pytest
from conftest import plain_prefix_row
from hypothesis import given, settings
from hypothesis import strategies as st

import otprior
from otprior import ConvergenceError, DomainError
from otprior.ot_prior import ot_window_mass_bound


def mp_prior(n, rho, dps=60):
    """Reference: Theorem 2's recurrence in a private mpmath context, the root by bisection
    in log c on the sign of Phi_0 (independent of otprior's Arb route)."""
    ctx = mpmath.MPContext()
    ctx.dps = dps
    r = ctx.mpf(rho)

    def run(c):
        phi, psi, v = c, ctx.mpf(0), []
        for k in range(n, 0, -1):
            psi += 1 / phi
            vk = psi ** (-r)
            v.append(vk)
            phi -= vk
            if phi < 0 and k > 1:
                return None, None
        return phi, v

    lo, hi = ctx.mpf(0), ctx.mpf(1)
    while run(ctx.exp(hi))[0] is None or run(ctx.exp(hi))[0] < 0:
        hi *= 2
    for _ in range(4 * dps):
        mid = (lo + hi) / 2
        phi0, _ = run(ctx.exp(mid))
        if phi0 is None or phi0 < 0:
            lo = mid
        else:
            hi = mid
    c = ctx.exp(hi)
    _, v = run(c)
    return [x / c for x in v]


@pytest.mark.parametrize("n, rho", [(16, 0.9995), (64, 0.9999), (4, 1 - 1e-9), (32, 1 - 1e-6)])
def test_prior_near_rho_one_is_right(n, rho):
    res = otprior.ot_prior(n, rho)
    ref = np.array([float(x) for x in mp_prior(n, rho)])
    big = ref > 1e-300
    # within the certificate the result reports (at most 1e-7 here), or taken from the Arb route
    assert res.log_error_bound <= 1e-7
    np.testing.assert_allclose(res.prior[big], ref[big], rtol=1.01 * res.log_error_bound + 1e-13)
    assert np.all(np.isfinite(res.log_prior))


@pytest.mark.slow
def test_mass_falls_with_n_and_bound_is_above_the_mass():
    m1 = otprior.ot_window_mass(1, 16384, 0.999)
    m2 = otprior.ot_window_mass(1, 32768, 0.999)
    assert m2 < m1 < 1
    exact = float(mp_prior(16, 0.9995, dps=40)[0])
    assert otprior.ot_prior(16, 0.9995)[0] == pytest.approx(exact, rel=1e-10)
    b = otprior.ot_dilution_bound(1, 512, 0.9993, 0.0)
    assert b.m0.lo <= b.bound and b.bound >= otprior.ot_window_mass(1, 512, 0.9993) * (1 - 1e-12)


def test_certified_prior_at_rho_near_one_has_balls_and_values():
    res = otprior.ot_prior(64, 0.9999, dps=20)
    assert res.certified and res.dps == 20
    ref = mp_prior(64, 0.9999, dps=80)
    for d in (0, 1, 10, 63):
        assert res.lo[d] <= float(ref[d]) <= res.hi[d]
        assert abs(res.values[d] / ref[d] - 1) < 1e-19
    assert np.all(res.rad <= 1e-20 * res.mid)
    assert mpmath.mp.dps == 15


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 300), rho=st.one_of(st.floats(0.0, 0.999), st.sampled_from([1 - 1e-6, 1 - 1e-9])))
def test_every_float_entry_lies_in_its_ball_within_its_error(n, rho):
    check_float_in_ball(n, rho)


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 60), rho=st.floats(0.0, 0.99))
def test_float_entries_lie_in_their_balls_quick(n, rho):
    check_float_in_ball(n, rho)


def check_float_in_ball(n, rho):
    if rho > 0.999 and n > 40:
        n = 40  # the recurrence loses -log10 pi(n-1) digits: keep the reference affordable
    res = otprior.ot_prior(n, rho)
    ball = otprior.ot_prior(n, rho, dps=16)
    e = res.log_error_bound + 64 * np.finfo(float).eps
    tiny = ball.lo < 1e-290
    assert np.all(tiny | ((ball.lo * (1 - e) <= res.prior) & (res.prior <= ball.hi * (1 + e))))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 3000), rho=st.floats(0.0, 0.99), data=st.data())
def test_non_asymptotic_window_bound(n, rho, data):
    # Theorem 4(iii): c_n >= n, hence m_n(W) <= H_W c^(rho-1) <= H_W n^-(1-rho), at every n
    window = data.draw(st.integers(1, n))
    res = otprior.ot_prior(n, rho)
    assert res.log_c >= math.log(n) * (1 - 1e-12)
    m = otprior.ot_window_mass(window, n, rho)
    assert m <= ot_window_mass_bound(window, n, rho) * (1 + 1e-12)


def test_masses_broadcast_and_results_are_named():
    m = otprior.ot_window_mass([1, 4, 16], [64, 256, 1024], 0.5)
    assert m.shape == (3,)
    for k, (w, n) in enumerate([(1, 64), (4, 256), (16, 1024)]):
        assert m[k] == pytest.approx(otprior.ot_window_mass(w, n, 0.5), rel=1e-14)
    grid = otprior.ot_window_mass(np.array([[1], [2]]), np.array([8, 16, 32]), 0.3)
    assert grid.shape == (2, 3)
    law = otprior.ot_window_law([1, 2], 100, 0.5)
    assert law.shape == (2,)
    b = otprior.ot_dilution_bound([1, 2], 64, 0.5, 0.1)
    assert b.bound.shape == (2,) and np.all(b.enclosure.lo <= b.enclosure.hi)
    d = otprior.ot_prior(8, 0.5).as_dict()
    assert set(d) >= {"prior", "log_prior", "log_c", "log_error_bound"} and isinstance(d["prior"], list)
    with pytest.raises(DomainError) as info:
        otprior.ot_window_mass([1, 9], 8, 0.5)
    assert info.value.parameter == "window"


@pytest.mark.parametrize("scale", [1e16, 1e300])
def test_rows_sum_to_one_for_huge_scores(scale):
    rng = np.random.default_rng(0)
    S = rng.choice([-1.0, 1.0], size=(10, 10)) * scale * rng.uniform(0.5, 1.0, size=(10, 10))
    for variant in ("prefix", "full"):
        A = otprior.causal_ot_attention(S, 0.7, variant=variant)
        assert np.all(np.isfinite(A))
        np.testing.assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12, atol=0)


def test_log_domain_path_full_variant_and_agreement():
    rng = np.random.default_rng(1)
    S = rng.normal(scale=150.0, size=(20, 20))  # spread > 200: the log-domain path
    A = otprior.causal_ot_attention(S, 0.6)
    full = otprior.causal_ot_attention(S, 0.6, variant="full")
    np.testing.assert_allclose(full[-1], A[-1], rtol=1e-9, atol=1e-300)
    for t in (5, 13, 20):
        ref = plain_prefix_row(S, 0.6, t, tol=1e-13)
        np.testing.assert_allclose(A[t - 1, :t], ref, rtol=1e-8, atol=1e-250)


@pytest.mark.parametrize("rho", [0.98, pytest.param(0.995, marks=pytest.mark.slow)])
def test_default_settings_converge_near_rho_one(rho):
    for seed in range(20):
        S = np.random.default_rng(seed).normal(size=(2, 2))
        A = otprior.causal_ot_attention(S, rho)
        np.testing.assert_allclose(A[-1], plain_prefix_row(S, rho, 2, tol=1e-9), rtol=1e-6)


def test_operator_at_rho_one_minus_1e_9_refuses_rather_than_answers_wrongly():
    # every mode contracts at a rate close to one; the solver says so instead of returning
    S = np.random.default_rng(0).normal(size=(6, 6))
    with pytest.raises(ConvergenceError) as info:
        otprior.causal_ot_attention(S, 1 - 1e-9, max_iter=2000)
    assert info.value.partial is not None


def test_accuracy_is_as_documented_at_rho_099():
    rng = np.random.default_rng(3)
    S = rng.normal(size=(24, 24))
    A = otprior.causal_ot_attention(S, 0.99, dual_tol=1e-10)
    ref = plain_prefix_row(S, 0.99, 24, tol=1e-13)
    assert np.max(np.abs(A[-1] / ref - 1)) <= 2e-10


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 40), k=st.integers(1, 40), rho=st.floats(0.0, 0.97), scale=st.floats(0.0, 300.0),
       seed=st.integers(0, 2**32 - 1))
def test_prefix_consistency_property(n, k, rho, scale, seed):
    k = min(k, n)
    S = np.random.default_rng(seed).normal(scale=scale, size=(n, n))
    A = otprior.causal_ot_attention(S, rho)
    B = otprior.causal_ot_attention(S[:k, :k], rho)
    np.testing.assert_allclose(A[:k, :k], B, rtol=1e-8, atol=1e-280)


def adversarial(n, window, B, kind, rng):
    win = np.arange(n) >= n - window
    if kind == 0:  # +B on the window in the last row, -B on it earlier
        S = np.where(win[None, :], -B, B) * np.ones((n, 1))
        S[-1] = np.where(win, B, -B)
    elif kind == 1:  # window favoured everywhere
        S = np.where(win[None, :], B, -B) * np.ones((n, 1))
    elif kind == 2:  # random signs at the extremes
        S = B * rng.choice([-1.0, 1.0], size=(n, n))
        S[-1] = np.where(win, B, -B)
    else:  # the last row alone biased
        S = np.zeros((n, n))
        S[-1] = np.where(win, B, -B)
    return S


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 48), rho=st.floats(0.0, 0.97), B=st.floats(0.0, 4.0), kind=st.integers(0, 3),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_theorem_5_on_adversarial_patterns(n, rho, B, kind, seed, data):
    window = data.draw(st.integers(1, n))
    rng = np.random.default_rng(seed)
    S = rng.normal(scale=5.0) + adversarial(n, window, B, kind, rng)
    A = otprior.causal_ot_attention(S, rho)
    mass = A[-1, n - window :].sum()
    assert mass <= otprior.ot_dilution_bound(window, n, rho, B).bound * (1 + 1e-9)


def test_refusals_and_errors_are_named():
    with pytest.raises(DomainError) as info:
        otprior.ot_prior(8, 0.5, dual_tol=-1.0)
    assert info.value.parameter == "dual_tol"
    with pytest.raises(DomainError) as info:
        otprior.ot_prior(300_000, 0.99, max_iter=3)  # no convergence, recurrence unaffordable
    assert info.value.parameter == "rho" and "max_iter=3" in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("n, rho", [(10**6, 0.9), (10**5, 0.999)])
def test_float_mass_in_its_ball_at_large_n(n, rho):
    windows = np.array([1, 16, 1024])
    floats = otprior.ot_window_mass(windows, n, rho)
    ball = otprior.ot_window_mass(windows, n, rho, certified=True)
    err = otprior.ot_prior(n, rho).log_error_bound + 1e-14
    assert np.all(ball.lo * (1 - err) <= floats) and np.all(floats <= ball.hi * (1 + err))
    assert np.all(ball.hi - ball.lo <= 1e-8 * ball.mid)  # two-pass bracket: width ~ d Phi_n/Phi_{n-W}
