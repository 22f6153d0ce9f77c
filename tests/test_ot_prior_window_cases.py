"""Window-mass regressions: windows next to ``n``, the floor at ``W = 4096`` near ``rho = 1``,
monotone lower ends beyond the count's reach, list-independent enclosures, small masses on the
exact route (Lemma 4.3 and Corollaries 4.4-4.5, proofs/ot_asymptotics.md)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otprior import ot_window_mass


@pytest.mark.parametrize(("n", "rho"), [(10**9, 0.1), (10**12, 0.5)])
def test_float_mass_near_n_answers_inside_the_enclosure(n, rho):
    # the six-term series of the continued count turned negative for windows near n and
    # math.log raised "math domain error"; a list holding such a window lost every value
    ws = [4097, n // 2, n - 1000, n - 10, n - 2, n - 1]
    m = np.asarray(ot_window_mass(ws, n, rho))
    e = ot_window_mass(ws, n, rho, certified=True)
    slack = 1e-12
    assert np.all(np.isfinite(m))
    assert np.all(m >= np.asarray(e.lo) - slack) and np.all(m <= np.asarray(e.hi) + slack)


@pytest.mark.parametrize(("n", "rho"), [(10**6, 1 - 1e-9), (70000, 0.99)])
def test_certified_lower_end_increases_in_the_window(n, rho):
    # near rho = 1 Lemma 4.3's bracket is unavailable and the floor m(W) >= m(4096) was not
    # applied (lower end 0.483 at W = 4096, 0.004 at 4097); beyond the count's reach the lower
    # end fell back to the floor at 4096 instead of the largest reached window
    ws = sorted({w for w in (4096, 4097, 10566, 12765, 10**5, n // 2, n - 1) if w < n})
    lo = np.asarray(ot_window_mass(ws, n, rho, certified=True).lo)
    assert np.all(np.diff(lo) >= 0.0), dict(zip(ws, lo.tolist(), strict=True))


def test_certified_enclosure_does_not_depend_on_the_other_windows():
    n, rho = 10**6, 0.5
    ws = [4097, 5000, 10**5, n // 2]
    both = ot_window_mass(ws, n, rho, certified=True)
    for i, w in enumerate(ws):
        alone = ot_window_mass(w, n, rho, certified=True)
        assert (alone.lo, alone.hi) == (both.lo[i], both.hi[i]), w


def test_exact_route_small_mass_relative_accuracy():
    # at rho = 1e-300 the prior is uniform to within 1e-295: m(W) = W / n; 1 - Phi_{n-W}/Phi_n
    # gave 1/65536 with a relative error of -8.7e-13
    n = 65536
    m, route = ot_window_mass([1, 2, 64], n, 1e-300, return_route=True)
    assert np.all(route == "exact")
    for w, v in zip([1, 2, 64], m, strict=True):
        assert math.isclose(v, w / n, rel_tol=1e-14), (w, v)


# --- windows next to n (Corollary 4.8) and the old-end estimate, proofs/ot_asymptotics.md ---


def _no_work(*args, **kwargs):
    raise AssertionError("the bracket of c_n was computed for a window pinned by Corollary 4.8")


@pytest.mark.parametrize("n", [2**60, 10**18, int(1e300)])
def test_windows_next_to_n_are_answered_without_work(n, monkeypatch):
    # at n = 1e300 these windows took the Arb bounds route (15-22 ms) for the float 1.0
    import importlib
    from fractions import Fraction

    op = importlib.import_module("otprior.ot_prior")  # the module (the package's ot_prior is the function)
    monkeypatch.setattr(op, "_bulk_enclosure", _no_work)
    monkeypatch.setattr(op, "_bulk_solve_float", _no_work)
    gaps = [g for g in (1, 10, 1000, 10**6) if g << 53 <= n]
    for rho in (0.1, 0.5, 0.999):
        for gap in gaps:
            W = n - gap
            # Lemma 4.2(c) in exact rationals: W/n <= m < 1, so m is at least this far up
            assert Fraction(W, n) >= 1 - Fraction(1, 2**53)
            e, route = ot_window_mass(W, n, rho, certified=True, return_route=True)
            assert route == "bounds" and (e.lo, e.hi) == (1.0 - 2.0**-53, 1.0)
            if gap << 54 <= n:
                assert Fraction(W, n) >= 1 - Fraction(1, 2**54)  # m rounds to nearest to 1.0
                assert ot_window_mass(W, n, rho) == 1.0
                assert otprior_dilution(W, n, rho) == 1.0


def otprior_dilution(W, n, rho):
    from otprior import ot_dilution_bound

    return ot_dilution_bound(W, n, rho, 0.5).bound


def test_pinned_thresholds_are_exact():
    # n = 2^60: the float is pinned up to n - W = 64 (64 * 2^54 = n), the enclosure up to 128
    from otprior.ot_prior import _pinned_next_to_n

    n = 2**60
    assert _pinned_next_to_n(n - 64, n, False) == 1.0
    assert _pinned_next_to_n(n - 65, n, False) is None
    assert _pinned_next_to_n(n - 128, n, True) == (1.0 - 2.0**-53, 1.0)
    assert _pinned_next_to_n(n - 129, n, True) is None
    assert _pinned_next_to_n(n, n, True) is None and _pinned_next_to_n(n, n, False) is None
    # the float of a window just beyond the float's threshold stays inside the pinned enclosure
    for gap in (65, 100, 128):
        v = ot_window_mass(n - gap, n, 0.5)
        assert 1.0 - 2.0**-53 <= v <= 1.0


@pytest.mark.parametrize("rho", [0.3, 0.8])
def test_old_end_float_against_the_exact_certified_route(rho):
    # the mass T = 1 - m of the k oldest keys on the bounds route's float, against the exact route in Arb
    # (Theorem 2's root by two certified passes, another algorithm); before the old-end estimate the
    # float's T was off by 280x at rho = 0.9, k = 1 (n = 1e5) and by 10x at rho = 0.5
    n = 10_000
    ks = [1, 10, 64, 65, 1000, n // 2]
    ws = [n - k for k in ks]
    ref = ot_window_mass(ws, n, rho, certified=True, method="exact")
    m = np.asarray(ot_window_mass(ws, n, rho, method="bounds"))
    for i, k in enumerate(ks):
        t_lo, t_hi = 1.0 - ref.hi[i], 1.0 - ref.lo[i]
        t = 1.0 - m[i]
        # measured 7e-5 (rho = 0.3) and 1.3e-3 (0.8) relative: about the error of the double estimate of c_n
        assert abs(t - 0.5 * (t_lo + t_hi)) <= 5e-3 * t_hi + 0.5 * (t_hi - t_lo) + 2.0**-52, (k, t, t_lo, t_hi)


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9])
def test_old_end_float_at_1e5_against_the_exact_certified_route(rho):
    n = 10**5
    ks = [1, 10, 64, 65, 1000, 10**4, n // 2]
    ref = ot_window_mass([n - k for k in ks], n, rho, certified=True, method="exact")
    m = np.asarray(ot_window_mass([n - k for k in ks], n, rho, method="bounds"))
    for i, k in enumerate(ks):
        t_lo, t_hi = 1.0 - ref.hi[i], 1.0 - ref.lo[i]
        t = 1.0 - m[i]
        # measured at most 5.8e-5, 7.6e-5, 2.2e-3 relative (rho = 0.1, 0.5, 0.9)
        assert abs(t - 0.5 * (t_lo + t_hi)) <= 5e-3 * t_hi + 0.5 * (t_hi - t_lo) + 2.0**-52, (k, t, t_lo, t_hi)


@pytest.mark.parametrize(("n", "rho"), [(10**9, 0.5), (10**18, 0.9), (int(1e300), 0.5)])
def test_windows_next_to_n_float_inside_enclosure_and_monotone(n, rho):
    # the float of the complement decreases in W (m increases) and lies in the certified enclosure
    ws = sorted({w for w in (n // 2, n - 10**6, n - 1024, n - 1000, n - 65, n - 64, n - 10, n - 1) if w >= 1})
    m = np.asarray(ot_window_mass(ws, n, rho))
    assert np.all(np.diff(m) >= 0.0), dict(zip(ws, m.tolist(), strict=True))
    for w, v in zip(ws, m, strict=True):
        e = ot_window_mass(w, n, rho, certified=True)
        assert e.lo <= v <= e.hi, (w, v, e)


@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_corollary_4_8d_narrows_and_contains_the_exact_route(rho):
    # (d) 1 - m(W) <= (n - W)/(n - W') (1 - m(W')) with W' = 4096 or the largest reached window: the certified
    # bounds route's lower end beyond the count's reach was W/n, and (e) its upper end was 1; the exact route in
    # Arb is the reference
    n = 20_000
    ws = [n - 1, n - 10, n - 1000, n // 2]
    ref = ot_window_mass(ws, n, rho, certified=True, method="exact")
    e, route = ot_window_mass(ws, n, rho, certified=True, return_route=True)
    assert list(route) == ["bounds"] * len(ws)
    for i, w in enumerate(ws):
        assert e.lo[i] <= ref.lo[i] and ref.hi[i] <= e.hi[i], (w, e.lo[i], e.hi[i], ref.lo[i], ref.hi[i])
    # next to n the lower end is well above Lemma 4.2(c)'s W/n (measured 1 - lo: 0.55 (n - W)/n at rho = 0.5)
    for i in (0, 1):
        assert 1.0 - e.lo[i] <= 0.6 * (n - ws[i]) / n, (ws[i], e.lo[i])
    if rho == 0.5:
        # (e): the upper end is below 1 next to n, 1 - hi >= (n - W) H_n^(-rho/(1-rho)) / c_hi (measured 0.62 of 1 - m)
        for i in (0, 1):
            assert 1.0 - e.hi[i] >= 0.5 * (1.0 - ref.hi[i]), (ws[i], e.hi[i], ref.hi[i])


def test_old_end_float_at_small_n_near_rho_one():
    # rho = 0.95, n = 513 (the float takes the bounds route above n = 256 for rho > 0.9): the continuum's first
    # guess of Psi_1 diverged (rho / (1 - rho) = 19), the old-end estimate was skipped and 1 - m(n - 1) was
    # 48 times too large; measured now 6 % (the error of the estimate of c_n at this length)
    n, rho = 513, 0.95
    ws = [n - 1, n - 10, n // 2]
    ref = ot_window_mass(ws, n, rho, certified=True, method="exact")
    m = np.asarray(ot_window_mass(ws, n, rho))
    for i, w in enumerate(ws):
        t_ref = 1.0 - 0.5 * (ref.lo[i] + ref.hi[i])
        assert abs((1.0 - m[i]) - t_ref) <= 0.2 * t_ref, (w, 1.0 - m[i], t_ref)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    digits=st.floats(min_value=6.0, max_value=300.0),
    frac=st.floats(min_value=0.0, max_value=1.0),
    rho=st.sampled_from([0.05, 0.3, 0.7, 0.9, 0.95, 0.99, 0.995]),
)
def test_windows_next_to_n_float_inside_the_enclosure_by_hypothesis(digits, frac, rho):
    # k = n - W log-uniform in [1, n/2]: the pinned windows, the old-end estimate and the count all in play
    n = int(10 ** (digits % 1) * 10**6) * 10 ** (int(digits) - 6)
    k = max(1, int(10 ** (frac * math.log10(n // 2))))
    v = ot_window_mass(n - k, n, rho)
    e = ot_window_mass(n - k, n, rho, certified=True)
    assert e.lo <= v <= e.hi, (n, k, rho, v, e)
    assert (n - k) / n - 2.0**-52 <= v <= 1.0


@pytest.mark.parametrize(
    "W, n, rho",
    [
        (2**54 - 2, 2**54 - 1, 1e-300),  # the double H_W n^(rho-1) rounded two ulps below the rounded W/n
        (3 * 2**53 - 3, 3 * 2**53, 1e-300),  # exactly at (n - W) 2^53 = n
        (999_998, 10**6, 1e-300),
        (98, 100, 1e-300),  # the exact route's clip
        (2**40 + 2, 2**40 + 5, 1e-16),
        (8192, 10**5, 1e-8),  # the count's estimate clipped at W/n, 1.2e-9 below the proved enclosure
    ],
)
def test_float_at_tiny_rho_is_at_least_w_over_n_and_inside_its_enclosure(W, n, rho):
    # Lemma 4.2(c): m >= W/n is proved, and the reference is exact rational arithmetic (W/n correctly
    # rounded by Python's int / int) and the certified enclosure (Arb)
    v = ot_window_mass(W, n, rho)
    assert v >= W / n
    e = ot_window_mass(W, n, rho, certified=True)
    assert e.lo <= v <= e.hi
