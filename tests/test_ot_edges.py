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
    # the exact routes asked for by name (beyond the crossover "auto" takes the proved bounds route)
    windows = np.array([1, 16, 1024])
    floats = otprior.ot_window_mass(windows, n, rho, method="exact")
    ball = otprior.ot_window_mass(windows, n, rho, certified=True, method="exact")
    err = otprior.ot_prior(n, rho).log_error_bound + 1e-14
    assert np.all(ball.lo * (1 - err) <= floats) and np.all(floats <= ball.hi * (1 + err))
    assert np.all(ball.hi - ball.lo <= 1e-8 * ball.mid)  # two-pass bracket: width ~ d Phi_n/Phi_{n-W}


# --- rho -> 1: the answer is vouched for by its stated error, or refused ---------------------


def _reference_prior_near_one(n, rho):
    """Independent reference near rho = 1: Theorem 2's recurrence in a private mpmath context,
    the root bisected in log c on the sign of Phi_k; the precision is doubled until the priors
    at both ends of the final bracket agree to 1e-20 relative (a check of the reference itself).
    Returns the logarithms of the prior (entries can lie below the double range) and log c."""
    dps = 40
    while True:
        ctx = mpmath.MPContext()
        ctx.dps = dps
        r = ctx.mpf(rho)

        def run(c, ctx=ctx, r=r):
            phi, psi, v = c, ctx.mpf(0), []
            for k in range(n, 0, -1):
                psi += 1 / phi
                vk = psi ** (-r)
                v.append(vk / c)
                phi -= vk
                if k > 1 and phi <= 0:
                    return False, v
            return phi > 0, v

        lo, hi = ctx.mpf(0), ctx.mpf(1)
        while not run(ctx.exp(hi))[0]:
            hi *= 2
        for _ in range(int(3.4 * dps) + 40):
            mid = (lo + hi) / 2
            if run(ctx.exp(mid))[0]:
                hi = mid
            else:
                lo = mid
        p_hi = run(ctx.exp(hi))[1]
        p_lo = run(ctx.exp(lo))[1]
        if len(p_lo) == n and all(abs(a - b) <= ctx.mpf(10) ** -20 * b for a, b in zip(p_lo, p_hi, strict=True)):
            return [float(ctx.log(x)) for x in p_hi], float(hi)
        dps *= 2
        assert dps <= 2000, "reference did not settle"


_NEAR_ONE = [(n, k) for n in (2, 10, 64) for k in range(6, 17)]


@pytest.mark.parametrize(
    "n, k", [pytest.param(n, k, marks=pytest.mark.slow) if n == 64 or k % 3 else (n, k) for n, k in _NEAR_ONE]
)
def test_prior_and_mass_near_rho_one_match_an_independent_bisection(n, k):
    rho = 1.0 - 10.0**-k
    try:
        res = otprior.ot_prior(n, rho)
    except DomainError as err:  # the documented alternative: a refusal naming rho
        assert err.parameter == "rho"
        assert n == 64 and k >= 13, f"refused an affordable case: {err}"
        return
    ref_log, log_c_ref = _reference_prior_near_one(n, rho)
    assert res.log_error_bound <= 1e-6
    assert abs(res.log_c - log_c_ref) <= 1e-9 * log_c_ref + res.log_error_bound
    worst = max(abs(p - q) for p, q in zip(res.log_prior, ref_log, strict=True))
    assert worst <= res.log_error_bound + 1e-12
    # m = pi(0) near one = 1 - (the rest): its error is the rest's relative error times the rest
    mass = otprior.ot_window_mass(1, n, rho)
    rest = -math.expm1(ref_log[0])
    assert abs(mass - math.exp(ref_log[0])) <= 4 * np.finfo(float).eps + 2 * res.log_error_bound * rest


def test_stated_error_is_small_or_refused_at_the_last_double_below_one():
    rho = math.nextafter(1.0, 0.0)
    for n in (2, 3, 10):
        res = otprior.ot_prior(n, rho)
        assert res.log_error_bound <= 1e-6 and res.certified
    ref_log, _ = _reference_prior_near_one(10, rho)
    assert abs(math.log(otprior.ot_prior(10, rho)[1]) - ref_log[1]) <= 1e-12


_BOUNDED_CALLS = {
    "mass_n100": "otprior.ot_window_mass(3, 100, 1 - 1e-16, certified=True)",
    "dilution_n8192": "otprior.ot_dilution_bound(64, 8192, 1 - 1e-9, 1.0)",
    "prior_n64": "otprior.ot_prior(64, 1 - 1e-16)",
    "prior_dps_n200": "otprior.ot_prior(200, 1 - 1e-15, dps=30)",
}


@pytest.mark.parametrize(
    "name", [n if n == "mass_n100" else pytest.param(n, marks=pytest.mark.slow) for n in sorted(_BOUNDED_CALLS)]
)
def test_certified_routes_return_or_refuse_within_their_work_cap(name):
    import os
    import subprocess
    import sys

    code = (
        "import otprior\n"
        "try:\n"
        f"    {_BOUNDED_CALLS[name]}\n"
        "    print('returned')\n"
        "except (otprior.DomainError, otprior.PrecisionError) as e:\n"
        "    print('refused', type(e).__name__, getattr(e, 'parameter', ''))\n"
    )
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    # the cap is a few seconds of work; 60 s of wall time leaves room for a loaded machine
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(("returned", "refused")), out.stdout


def test_resource_and_type_refusals_are_named():
    from otprior.limits import ResourceError

    # any length is answered (proofs/ot_asymptotics.md): W/n <= m0 <= 1, by the bounds route
    res = otprior.ot_dilution_bound(10**17 + 3, 10**17 + 4, 0.5, 1.0)
    assert res.route == "bounds" and res.m0.lo >= 1 - 2.3e-16 and res.m0.hi == 1.0 and res.bound == 1.0
    with pytest.raises(ResourceError) as info:
        otprior.ot_window_mass(10**17 + 3, 10**17 + 4, 0.5, method="exact")
    assert info.value.parameter == "n"
    with pytest.raises(DomainError) as info:
        otprior.ot_prior(10**300, 0.5)
    assert info.value.parameter == "n"
    for bad in ([["a", "b"], ["c", "d"]], np.zeros((3, 3)) + 1j, np.zeros((3, 3), dtype=complex), [[0.0], [1.0, 2.0]]):
        with pytest.raises(DomainError) as info:
            otprior.causal_ot_attention(bad, 0.5)
        assert info.value.parameter == "scores"
        with pytest.raises(DomainError) as info:
            otprior.causal_ot_fixed_point(bad, 0.5)
        assert info.value.parameter == "scores"
    for bad in ("no", 1, np.True_, None):
        with pytest.raises(DomainError) as info:
            otprior.ot_window_mass(1, 3, 0.5, certified=bad)
        assert info.value.parameter == "certified"


@pytest.mark.parametrize("n", [1, 2, 5, 17])
@pytest.mark.parametrize("rho", [0.0, 0.5, 0.99, 1 - 1e-9, 1 - 1e-16])
def test_certified_masses_lie_in_the_unit_interval(n, rho):
    e = otprior.ot_window_mass(np.arange(1, n + 1), n, rho, certified=True)
    assert np.all((0.0 <= e.lo) & (e.lo <= e.mid) & (e.mid <= e.hi) & (e.hi <= 1.0))
    assert e.hi[-1] == 1.0 and e.lo[-1] >= 1.0 - 1e-15  # the whole prefix: mass one


@pytest.mark.parametrize("n", [16, 20])
def test_conditioning_near_rho_one_is_measured_not_guessed(n):
    """At rho = 1 - 1e-6 the double sweep does not converge; the certified fallback starts from
    c >= n and reports log10(Phi_n/Phi_1) measured on its balls (it reported 976.6 for a true
    56.3 at n = 16, and refused n = 18, 20 for want of 17,000 bits)."""
    rho = 1.0 - 1e-6
    res = otprior.ot_prior(n, rho)
    ref_log, _ = _reference_prior_near_one(n, rho)
    true_cond = -ref_log[-1] / math.log(10.0)
    assert abs(res.log10_condition - true_cond) <= 1e-6 * true_cond
    assert abs(res.log_prior[-1] - ref_log[-1]) <= res.log_error_bound
