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
    """Window mass at 60 digits: mpmath summation (nsum-free) for small n, Hurwitz zeta /
    digamma differences otherwise, each at a working precision far above the cancellation."""
    with mpmath.workdps(dps):
        a, o = mpmath.mpf(alpha), mpmath.mpf(offset)

        def S(lo, hi):  # sum_{d=lo}^{hi} (d + o)^-a
            if hi < lo:
                return mpmath.mpf(0)
            if hi - lo < 5000:
                return mpmath.fsum((d + o) ** (-a) for d in range(lo, hi + 1))
            if a == 1:
                return mpmath.digamma(hi + 1 + o) - mpmath.digamma(lo + o)
            return mpmath.zeta(a, lo + o) - mpmath.zeta(a, hi + 1 + o)

        head, tail = S(0, window - 1), S(window, n - 1)
        return head / (head + tail), tail / (head + tail)


ULPS4 = 4 * np.finfo(float).eps  # the ratio of two sums, each within 2 ulps
ALPHAS = [0.3, 0.9, 1 - 1e-12, 1.0, 1 + 1e-12, 1.001, 1.05, 1.5, 2.0, 4.0]
SIZES = [(1, 1), (1, 10), (16, 100), (64, 8192), (64, 10**6), (10, 10**15), (128, 10**18)]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("window, n", SIZES)
def test_masses_match_60_digit_reference(window, n, alpha):
    m_ref, D_ref = reference(window, n, alpha)
    assert otprior.window_mass(window, n, alpha) == pytest.approx(float(m_ref), rel=ULPS4, abs=0)
    D = otprior.distant_mass(window, n, alpha)
    if D_ref == 0:
        assert D == 0.0
    else:
        assert D == pytest.approx(float(D_ref), rel=ULPS4)


def test_direct_summation_with_nsum_at_alpha_one_neighbourhood():
    # an independent route for the pole region: mpmath.nsum of the tail
    for alpha in (1 - 1e-12, 1.0, 1 + 1e-12):
        with mpmath.workdps(50):
            head = mpmath.fsum((k + 1) ** (-mpmath.mpf(alpha)) for k in range(32))
            tail = mpmath.nsum(lambda k, a=alpha: (k + 1) ** (-mpmath.mpf(a)), [32, 10**5 - 1])
            ref = head / (head + tail)
        assert otprior.window_mass(32, 10**5, alpha) == pytest.approx(float(ref), rel=1e-15)


@pytest.mark.parametrize("offset", [0.25, 1.0, 3.0])
def test_offset(offset):
    m_ref, _ = reference(8, 5000, 1.2, offset)
    assert otprior.window_mass(8, 5000, 1.2, offset=offset) == pytest.approx(float(m_ref), rel=1e-15)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1 + 1e-12, 1.3])
def test_high_precision_path_two_precisions(alpha):
    a = otprior.window_mass(64, 10**15, alpha, dps=30)
    b = otprior.window_mass(64, 10**15, alpha, dps=45)
    ref, _ = reference(64, 10**15, alpha, dps=80)
    with mpmath.workdps(50):
        assert abs(a / ref - 1) < mpmath.mpf(10) ** -29
        assert abs(b / ref - 1) < mpmath.mpf(10) ** -44
    assert mpmath.mp.dps == 15


def test_near_one_behaves_like_exponent_one():
    # THEORY 5: near alpha = 1 + delta the window mass is about H_W delta / (1 - n^-delta)
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
    if window >= 16:
        assert (hi - lo) / lo <= 1e-4
        assert (dhi - dlo) / max(dlo, 1e-300) <= 1e-4


@pytest.mark.parametrize("order", [0, 1, 2, 4])
def test_bounds_tighten_with_order(order):
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
    assert otprior.window_mass(window, n, alpha, offset=offset) == pytest.approx(float(m_ref), rel=1e-14)


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
    ],
)
def test_refusals(call, name):
    with pytest.raises(DomainError) as info:
        call()
    assert info.value.parameter == name
