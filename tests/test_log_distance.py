"""Log-distance priors (Theorem 7) and the certified window-mass bounds (Theorem 8)."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otprior
from otprior import DomainError


def reference(window, n, alpha, offset=1.0, dps=60):
    """Window and distant mass at ``dps`` digits in a private mpmath context: direct
    summation for small n, Hurwitz zeta / digamma differences otherwise, at a working
    precision far above the cancellation."""
    ctx = mpmath.MPContext()
    ctx.dps = dps + 40
    a, o = ctx.mpf(alpha), ctx.mpf(offset)

    def S(lo, hi):  # sum_{d=lo}^{hi} (d + o)^-a
        if hi < lo:
            return ctx.mpf(0)
        if hi - lo < 5000:
            return ctx.fsum((d + o) ** (-a) for d in range(lo, hi + 1))
        if a == 1:
            return ctx.digamma(hi + 1 + o) - ctx.digamma(lo + o)
        return ctx.zeta(a, lo + o) - ctx.zeta(a, hi + 1 + o)

    head, tail = S(0, window - 1), S(window, n - 1)
    return head / (head + tail), tail / (head + tail)


EPS = np.finfo(float).eps


def stated(value):
    """The float route's stated relative error: 8 eps (1 + |ln value|)."""
    return 8 * EPS * (1 + abs(math.log(float(value))))
ALPHAS = [0.3, 0.9, 1 - 1e-12, 1.0, 1 + 1e-12, 1.001, 1.05, 1.5, 2.0, 4.0]
SIZES = [(1, 1), (1, 10), (16, 100), (64, 8192), (64, 10**6), (10, 10**15), (128, 10**18)]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("window, n", SIZES)
def test_masses_match_60_digit_reference(window, n, alpha):
    m_ref, D_ref = reference(window, n, alpha)
    assert otprior.window_mass(window, n, alpha) == pytest.approx(float(m_ref), rel=stated(m_ref), abs=0)
    D = otprior.distant_mass(window, n, alpha)
    if D_ref == 0:
        assert D == 0.0
    else:
        assert D == pytest.approx(float(D_ref), rel=stated(D_ref))


def test_direct_summation_at_alpha_one_neighbourhood():
    # an independent route for the pole region: every term of the sum, at 30 digits
    ctx = mpmath.MPContext()
    ctx.dps = 30
    for alpha in (1 - 1e-12, 1.0, 1 + 1e-12):
        a = ctx.mpf(alpha)
        head = ctx.fsum(ctx.power(k, -a) for k in range(1, 33))
        tail = ctx.fsum(ctx.power(k, -a) for k in range(33, 10**4 + 1))
        ref = head / (head + tail)
        assert otprior.window_mass(32, 10**4, alpha) == pytest.approx(float(ref), rel=1e-15)


@pytest.mark.parametrize("offset", [0.25, 1.0, 3.0])
def test_offset(offset):
    m_ref, _ = reference(8, 5000, 1.2, offset)
    assert otprior.window_mass(8, 5000, 1.2, offset=offset) == pytest.approx(float(m_ref), rel=1e-15)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1 + 1e-12, 1.3])
def test_high_precision_path_two_precisions(alpha):
    a = otprior.window_mass(64, 10**15, alpha, dps=30)
    b = otprior.window_mass(64, 10**15, alpha, dps=45)
    ref, _ = reference(64, 10**15, alpha, dps=80)
    assert abs(a / ref - 1) < mpmath.mpf(10) ** -29
    assert abs(b / ref - 1) < mpmath.mpf(10) ** -44
    assert mpmath.mp.dps == 15


def test_near_one_behaves_like_exponent_one():
    # Theorem 7(3), proofs/log_distance_prior.md: near alpha = 1 + delta the window mass is
    # H_W delta / (1 - n^-delta + gamma delta + O(delta^2)); the gamma delta term is within rel=0.15 here
    W, delta = 64, 1e-3
    H = float(sum((k + 1) ** -(1 + delta) for k in range(W)))
    for n in (10**3, 10**6, 10**12):
        approx = H * delta / (1 - n**-delta)
        assert otprior.window_mass(W, n, 1 + delta) == pytest.approx(approx, rel=0.15)


@pytest.mark.parametrize("alpha", [0.3, 0.99, 1.0, 1 + 1e-9, 1.05, 1.7, 3.0, 8.0])
@pytest.mark.parametrize("window, n", [(1, 50), (16, 100), (16, 10**6), (64, 10**15), (200, 10**18)])
def test_bounds_hold_and_are_tight(window, n, alpha):
    m_ref, D_ref = reference(window, n, alpha)
    lo, hi = otprior.window_mass_bounds(window, n, alpha)
    assert lo <= m_ref <= hi
    dlo, dhi = otprior.distant_mass_bounds(window, n, alpha)
    assert dlo <= D_ref <= dhi
    # tight: a few ulps (the ball is refined to 2^-62 relative, rounded outward, and widened
    # at most to the float route's value, within its stated error)
    assert hi - lo <= 4 * EPS * hi + stated(hi) * hi
    assert dhi - dlo <= 4 * EPS * dhi + stated(dhi) * dhi


@pytest.mark.parametrize("order", [0, 1, 2, 4])
def test_bounds_tighten_with_order(order):
    # Theorem 8's closed-form Euler-Maclaurin bracket, evaluated in balls: it contains the
    # reference, and its width (the truncation's) shrinks with the order
    lo, hi = otprior.window_mass_bounds(16, 10**9, 1.1, order=order)
    m_ref, _ = reference(16, 10**9, 1.1)
    assert lo <= m_ref <= hi
    if order:
        lo0, hi0 = otprior.window_mass_bounds(16, 10**9, 1.1, order=order - 1)
        assert hi - lo < hi0 - lo0


@settings(max_examples=60, deadline=None)
@given(
    window=st.integers(1, 300),
    extra=st.integers(0, 10**9),
    alpha=st.floats(0.05, 6.0),
    offset=st.floats(0.1, 5.0),
)
def test_bounds_hold_by_hypothesis(window, extra, alpha, offset):
    n = window + extra
    m_ref, D_ref = reference(window, n, alpha, offset, dps=40)
    lo, hi = otprior.window_mass_bounds(window, n, alpha, offset=offset)
    assert lo <= m_ref <= hi
    assert otprior.window_mass(window, n, alpha, offset=offset) == pytest.approx(float(m_ref), rel=stated(m_ref))


def test_content_bound_range():
    lo, hi = otprior.distant_mass_bounds(16, 4096, 1.2, score_bound=0.5)
    D = otprior.distant_mass(16, 4096, 1.2)
    T_over_H = D / (1 - D)
    assert lo == pytest.approx(T_over_H / (T_over_H + math.e), rel=1e-6)
    assert hi == pytest.approx(T_over_H / (T_over_H + 1 / math.e), rel=1e-6)


def test_bounded_iff_alpha_above_one():
    limit = float(mpmath.zeta(1.5, 17) / mpmath.zeta(1.5))
    assert otprior.distant_mass(16, 10**18, 1.5) == pytest.approx(limit, rel=1e-6)
    assert otprior.distant_mass(16, 10**18, 1.0) > 0.6  # ~ 1 - H_16 / log n, -> 1
    assert otprior.distant_mass(16, 10**18, 0.8) > 1 - 1e-2


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: otprior.window_mass(0, 10, 1.1), "window"),
        (lambda: otprior.window_mass(11, 10, 1.1), "n"),
        (lambda: otprior.window_mass(2, 10, 0.0), "alpha"),
        (lambda: otprior.window_mass(2, 10, -1.0), "alpha"),
        (lambda: otprior.window_mass(2, 10, float("nan")), "alpha"),
        (lambda: otprior.window_mass(2, 10, float("inf")), "alpha"),
        (lambda: otprior.distant_mass(2, 10, 1.1, offset=0.0), "offset"),
        (lambda: otprior.window_mass_bounds(2, 10, 1.1, order=-1), "order"),
        (lambda: otprior.distant_mass_bounds(2, 10, 1.1, score_bound=-0.1), "score_bound"),
        (lambda: otprior.window_mass(2, 10, 1.1, dps=0), "dps"),
        (lambda: otprior.window_mass(2, 10, 1.1, offset=1e-301), "offset"),
        (lambda: otprior.window_mass(2, 10, 1.1, offset=10**400), "offset"),
        (lambda: otprior.window_mass(2, 10**400, 1.1), "n"),
        (lambda: otprior.window_mass(10**400, 10**401, 1.1), "n"),
        (lambda: otprior.window_mass(2, 10, 10**400), "alpha"),
        (lambda: otprior.window_mass(2, 10, 1e16), "alpha"),
        (lambda: otprior.window_mass(2, 10, np.True_), "alpha"),
        (lambda: otprior.window_mass(2, 10, 1 + 1j), "alpha"),
        (lambda: otprior.window_mass(2, 10, "1.1"), "alpha"),
        (lambda: otprior.window_mass(True, 10, 1.1), "window"),
        (lambda: otprior.window_mass([1, 2], [3, 4, 5], 1.1), "window"),
        (lambda: otprior.window_mass([[1, 2], [3]], 10, 1.1), "window"),
        (lambda: otprior.distant_mass_bounds(2, 10, 1.1, score_bound=400.0), "score_bound"),
    ],
)
def test_refusals(call, name):
    with pytest.raises(DomainError) as info:
        call()
    assert info.value.parameter == name


def test_vectorised_route_equals_the_scalar_route():
    """Arrays of machine integers take one numpy pass per (window, alpha, offset); every element
    equals the scalar route's value to 2 ulps (the same sums, term for term), including lengths
    that end inside the exact head, n == W, integral floats and uint64."""
    from otprior.log_distance import _float_masses

    rng = np.random.default_rng(7)
    W = (10 ** rng.uniform(0, 6, size=300)).astype(np.int64)
    gaps = np.where(rng.random(300) < 0.3, rng.integers(0, 40, size=300), (10 ** rng.uniform(0, 12, size=300)).astype(np.int64))
    N = W + gaps
    A = 10 ** rng.uniform(-3, 3, size=300)
    Off = 10 ** rng.uniform(-300, 300, size=300)
    for k, f in enumerate((otprior.window_mass, otprior.distant_mass)):
        v = f(W, N, A, offset=Off)
        ref = np.array([_float_masses(int(w), int(x), a, o)[k] for w, x, a, o in zip(W, N, A, Off, strict=True)])
        assert np.all(np.abs(v - ref) <= 4.5e-16 * np.abs(ref) + 1e-320)
    n = np.arange(64, 64 + 3000)
    ref = np.array([_float_masses(64, int(x), 1.3, 1.0)[0] for x in n[::37]])
    for arr in (n, n.astype(float), n.astype(np.uint64)):
        assert np.all(np.abs(otprior.window_mass(64, arr, 1.3)[::37] - ref) <= 4.5e-16 * ref)
    with pytest.raises(DomainError) as info:  # an invalid element still names its parameter
        otprior.window_mass(64, np.array([100, 10]), 1.3)
    assert info.value.parameter == "n"
