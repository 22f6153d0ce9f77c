"""The OT prior at any length (proofs/ot_asymptotics.md): proved bounds on the root
(Lemma 4.1), the window mass from them (Lemma 4.2), lengths up to 1e300 of every integer
type, and refusals decided before the work."""

import math
import time

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otprior
from otprior import DomainError


def _hurwitz_power_sum(n, rho, dps=40):
    """H_n^(rho) by mpmath (private context): direct sum or zeta difference."""
    ctx = mpmath.MPContext()
    ctx.dps = dps + 20
    if n <= 2000:
        return ctx.fsum(ctx.power(k, -rho) for k in range(1, n + 1))
    return ctx.zeta(rho) - ctx.zeta(rho, n + 1)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_lemma_4_1_brackets_the_exact_root(rho):
    """t <= c_t <= (H_t^(rho))^(1/(1-rho)) against the solved root (Theorem 2, exact route)."""
    for t in (1, 2, 7, 300, 1500):
        log_c = otprior.ot_prior(t, rho).log_c
        log_hi = float(mpmath.log(_hurwitz_power_sum(t, rho))) / (1 - rho)
        assert math.log(t) - 1e-9 <= log_c <= log_hi + 1e-9, (t, rho, log_c, log_hi)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_bounds_route_contains_the_exact_route(rho):
    """The proved enclosure of the bounds route contains the exact route's certified value
    wherever both run, for windows from 1 to n - 1 (large windows through Theorem 4(i))."""
    for n in (50, 1500):
        windows = np.array([1, 3, min(64, n - 2), n // 2, n - 1])
        exact = otprior.ot_window_mass(windows, n, rho, certified=True, method="exact")
        bounds, route = otprior.ot_window_mass(windows, n, rho, certified=True, method="bounds", return_route=True)
        assert set(route.tolist()) == {"bounds"}
        assert np.all(bounds.lo <= exact.lo) and np.all(exact.hi <= bounds.hi), (n, rho, bounds, exact)
        f = otprior.ot_window_mass(windows, n, rho, method="bounds")
        assert np.all((bounds.lo <= f) & (f <= bounds.hi))


def test_large_windows_use_theorem_4_closed_forms():
    W, n, rho = 10_000, 20_000, 0.5  # W above the recurrence cap: Theorem 4(i) at both ends of c
    exact = otprior.ot_window_mass(W, n, rho, method="exact")
    e = otprior.ot_window_mass(W, n, rho, certified=True, method="bounds")
    assert e.lo <= exact <= e.hi and e.lo >= W / n * (1 - 1e-15)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-6])
def test_any_length_is_answered_with_a_proved_enclosure(rho):
    for n in (10**6, 10**18, int(1e300), np.int64(10**18), np.uint64(2**63)):
        _check_any_length(n, rho)


def _check_any_length(n, rho):
    e, route = otprior.ot_window_mass(64, n, rho, certified=True, return_route=True)
    m = otprior.ot_window_mass(64, n, rho)
    assert route == "bounds"
    assert 0.0 <= e.lo <= m <= e.hi <= 1.0
    # the closed-form ends of Lemma 4.2(c), computed here by mpmath
    ctx = mpmath.MPContext()
    ctx.dps = 40
    H = ctx.mpf(_hurwitz_power_sum(64, rho))
    assert e.hi <= min(1.0, float(H * ctx.mpf(int(n)) ** (ctx.mpf(rho) - 1))) * (1 + 1e-14)
    assert e.lo >= 64 / int(n) * (1 - 1e-14)


def test_object_arrays_numpy_ints_and_1e300():
    n = np.array([10**6, int(1e300)], dtype=object)
    b = otprior.ot_window_mass_bound(4, n, 0.5)
    ctx = mpmath.MPContext()
    ctx.dps = 40
    ref = ctx.mpf(_hurwitz_power_sum(4, 0.5)) / ctx.sqrt(ctx.mpf(int(1e300)))
    assert b.shape == (2,) and abs(b[1] - float(ref)) <= 1e-14 * float(ref)
    law = otprior.ot_window_law(4, int(1e300), 0.5)
    assert 0 < law < b[1]  # Z_q^q < 1: the law lies below the bound
    assert otprior.ot_window_mass_bound(np.int64(4), np.int64(10**18), 0.5) > 0
    for bad_n in (int(1e300) * 10, 0, "7", 2.5):
        with pytest.raises(DomainError) as info:
            otprior.ot_window_mass_bound(1, bad_n, 0.5)
        assert info.value.parameter == "n"


def test_dilution_bound_at_any_length():
    """Theorem 5 on the upper end of the bounds route's enclosure: at most K H_W n^-(1-rho)."""
    r = otprior.ot_dilution_bound(4, 10**7, 0.5, 0.3)
    K = math.exp(2 * 0.3 * 1.5 / 0.5)
    H = float(_hurwitz_power_sum(4, 0.5))
    assert r.route == "bounds"
    assert r.bound <= K * H * 10**-3.5 * (1 + 1e-12)
    big = otprior.ot_dilution_bound(64, [10**9, 10**18, int(1e300)], 0.9, 0.1)
    assert np.all(np.diff(big.bound) < 0) and big.bound[-1] < 1e-20


def test_refusal_before_the_work_and_same_answer_twice():
    start = time.perf_counter()
    with pytest.raises(DomainError) as info:
        otprior.ot_prior(10**6, 0.999999999999)
    assert info.value.parameter == "rho" and time.perf_counter() - start < 5.0
    a = otprior.ot_window_mass(64, 10**6, 1 - 1e-6, certified=True, return_route=True)
    b = otprior.ot_window_mass(64, 10**6, 1 - 1e-6, certified=True, return_route=True)
    assert a == b
    with pytest.raises(DomainError) as info:
        otprior.ot_window_mass(1, 5, 0.5, method="fast")
    assert info.value.parameter == "method"


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 3000), frac=st.floats(0.0, 1.0), rho=st.floats(0.01, 0.995))
def test_bounds_route_contains_the_exact_route_property(n, frac, rho):
    W = 1 + int(frac * (n - 2))
    exact = otprior.ot_window_mass(W, n, rho, certified=True, method="exact")
    bounds = otprior.ot_window_mass(W, n, rho, certified=True, method="bounds")
    assert bounds.lo <= exact.lo and exact.hi <= bounds.hi, (W, n, rho, bounds, exact)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_lemma_4_3_enclosure_contains_the_exact_route(rho):
    """Lemma 4.3's bracket of c_n (route "bounds", n > 4D) against the exact certified route
    (bisection of Theorem 2's root in Arb: an independent algorithm) at lengths where both run;
    and it is far narrower than Lemmas 4.1-4.2 alone."""
    n = 4500
    windows = np.array([1, 64, 600])
    exact = otprior.ot_window_mass(windows, n, rho, certified=True, method="exact")
    bounds = otprior.ot_window_mass(windows, n, rho, certified=True, method="bounds")
    assert np.all(bounds.lo <= exact.lo) and np.all(exact.hi <= bounds.hi), (rho, bounds, exact)
    assert np.all((bounds.hi - bounds.lo) <= 0.05 * bounds.hi)  # Lemma 4.1 alone: 0.1 .. 0.9


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.3, 0.7, 0.95, 0.995])
@pytest.mark.parametrize("n", [2049 * 2, 16384])
def test_lemma_4_3_enclosure_contains_the_exact_route_slow(rho, n):
    windows = np.array([1, 5, 64, 512, 1024])
    exact = otprior.ot_window_mass(windows, n, rho, certified=True, method="exact")
    bounds = otprior.ot_window_mass(windows, n, rho, certified=True, method="bounds")
    assert np.all(bounds.lo <= exact.lo) and np.all(exact.hi <= bounds.hi), (rho, n, bounds, exact)


def _lifetime_mp(c, rho, steps, ctx):
    """Number of positive Phi's of Theorem 2's recurrence from c (mpmath, private context)."""
    P, S, r = ctx.mpf(c), ctx.mpf(0), ctx.mpf(rho)
    for i in range(1, steps + 1):
        S += 1 / P
        P -= S ** (-r)
        if P <= 0:
            return i
    return steps + 1


@pytest.mark.parametrize("rho", [pytest.param(0.5, marks=pytest.mark.slow), 0.9])
def test_lemma_4_3_ends_are_above_and_below_the_root_by_direct_recurrence(rho):
    """The two ends c_lo <= c_n < c_hi of Lemma 4.3, checked by running the whole recurrence
    from each at 60 digits (mpmath, private context): from c_hi it stays positive n steps,
    from c_lo it does not (Lemma 2.1)."""
    import importlib

    mod = importlib.import_module("otprior.ot_prior")
    n = 6000
    c_lo, c_hi, _, _ = mod._bulk_enclosure(n, rho, (8,))
    ctx = mpmath.MPContext()
    ctx.dps = 60
    hi = ctx.mpf(c_hi.mid().str(70, radius=False))
    lo = ctx.mpf(c_lo.mid().str(70, radius=False))
    assert _lifetime_mp(hi, rho, n, ctx) > n
    assert _lifetime_mp(lo, rho, n, ctx) <= n
    # Lemma 4.1 alone: c_hi / c_lo = H_n^(1/(1-rho)) / n, about 4 (rho = 0.5) and 1e9 (rho = 0.9)
    assert float((hi - lo) / hi) < 0.1


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99, 0.999])
def test_float_value_lies_in_the_lemma_4_3_enclosure(rho):
    """The documented error bound of the float value on the bounds route: it lies in the
    certified enclosure, so its error is at most the enclosure's width."""
    n = np.array([10**6, 10**12, int(1e300)], dtype=object)
    e = otprior.ot_window_mass(64, n, rho, certified=True)
    m = otprior.ot_window_mass(64, n, rho)
    assert np.all((e.lo <= m) & (m <= e.hi)), (rho, e, m)
    assert np.all(e.hi - e.lo <= 1e-3 * e.hi)


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.5, 0.9, 0.99])
def test_corollary_4_4_large_windows_contain_the_exact_route(rho):
    """Windows above the exact steps (W > 4096): Corollary 4.4's enclosure against the exact
    certified route, and narrower than Theorem 4(i)'s closed forms on Lemma 4.1's bracket."""
    n = 24000
    windows = np.array([4500, 6000])
    exact = otprior.ot_window_mass(windows, n, rho, certified=True, method="exact")
    bounds = otprior.ot_window_mass(windows, n, rho, certified=True, method="bounds")
    assert np.all(bounds.lo <= exact.lo) and np.all(exact.hi <= bounds.hi), (rho, bounds, exact)
    assert np.all(bounds.hi - bounds.lo <= 0.1 * bounds.hi)


def test_corollary_4_4_large_windows_are_narrow_at_any_length():
    e = otprior.ot_window_mass(np.array([64, 10**4, 10**7]), 10**12, 0.9, certified=True)
    f = otprior.ot_window_mass(np.array([64, 10**4, 10**7]), 10**12, 0.9)
    assert np.all(np.diff(e.lo) > 0) and np.all(e.hi - e.lo <= 0.05 * e.hi)  # Theorem 4(i) alone: [0, 1]
    assert np.all((e.lo <= f) & (f <= e.hi))


@pytest.mark.parametrize("n, rho", [(257, 0.99), (1500, 0.95)])
def test_windows_beyond_the_exact_steps_use_the_lemma_4_3_bracket(n, rho):
    """Windows with n/4 <= W <= 4096 (beyond Lemma 4.3's exact steps): f_W at the two proved
    ends of Lemma 4.3's bracket (Lemma 4.2(b)), not Lemma 4.1's bracket alone (relative
    width up to 0.9) nor Theorem 4(ii)'s formal limit as the float (which fell from 0.99999
    at W = n/8 to 0.949 at W = n/2: not increasing in W). Against the exact certified route."""
    windows = np.array([n // 8, n // 2, n - 1])
    exact = otprior.ot_window_mass(windows, n, rho, certified=True, method="exact")
    e = otprior.ot_window_mass(windows, n, rho, certified=True, method="bounds")
    f = otprior.ot_window_mass(windows, n, rho, method="bounds")
    assert np.all(e.lo <= exact.lo) and np.all(exact.hi <= e.hi), (e, exact)
    assert np.all(np.diff(f) >= 0), f  # m_n(W) increases in W
    assert np.all(np.abs(f - exact.mid) <= 1e-3), (f, exact.mid)
    # 1 - m: the W/2 and n-1 windows are within 1e-3 of one, an enclosure of width 1e-3 says so
    assert np.all(e.hi[1:] - e.lo[1:] <= 1e-3), e


def test_lower_end_beyond_the_exact_steps_is_at_least_that_of_the_steps():
    """Near rho = 1 the W-step run from Lemma 4.3's c_hi is not decided on balls for W > n/4
    (1 - m below 2**-512); the lower end is then m_n(W) >= m_n(D) >= f_D(c_hi), not Lemma 4.1's
    (before: 0.64 at W = 150 against 0.99977 at W = 37; the true masses are 1 - O(1e-16))."""
    e = otprior.ot_window_mass(np.array([37, 150]), 300, 0.9999, certified=True)
    assert e.lo[1] >= e.lo[0] >= 0.999, e


def test_a_windows_enclosure_does_not_depend_on_the_other_windows():
    """D (Lemma 4.3's exact steps) depends on n alone: the answer for (64, n, rho) is the same
    alone or next to a window of 4096 (before, D = max window: the enclosure of W = 64 moved
    to one that excluded the float value by 3e-12 relative)."""
    n, rho = 10**18, 0.5
    alone = otprior.ot_window_mass(64, n, rho, certified=True)
    both = otprior.ot_window_mass(np.array([64, 4096]), n, rho, certified=True)
    assert (both.lo[0], both.hi[0]) == (alone.lo, alone.hi)
    f = otprior.ot_window_mass(np.array([64, 4096]), n, rho)
    assert np.all((both.lo <= f) & (f <= both.hi)), (both, f)


@pytest.mark.parametrize("W, n, rho", [(1, int(1e300), 1e-300), (4094, 4096, 0.99)])
def test_float_value_within_its_rounding_of_the_enclosure(W, n, rho):
    """Where the enclosure is a few ulps wide, the float (an estimate from double steps) lies
    within (W + D + ln c) eps m of it, ln c <= ln n / (1 - rho) (the documented bound)."""
    e = otprior.ot_window_mass(W, n, rho, certified=True)
    m = otprior.ot_window_mass(W, n, rho)
    D = max(64, min(512, n // 8))
    slack = (W + D + math.log(n) / (1 - rho)) * 2.0**-52 * m
    assert e.lo - slack <= m <= e.hi + slack, (e, m, slack)


@pytest.mark.slow
@pytest.mark.parametrize("n", [257, 513, 4097])
@pytest.mark.parametrize("rho", [1e-300, 0.95, 0.99, 0.999])
def test_crossover_lengths_contain_the_exact_route(n, rho):
    """Around the crossovers (n = 256, 512 = 4D, 4096): the auto route's enclosure meets the
    exact certified route's (an independent algorithm), and the float lies within its
    documented distance of the enclosure, for windows from 1 to n - 1."""
    windows = np.array([1, 2, n // 8, n // 2, n - 2, n - 1])
    exact = otprior.ot_window_mass(windows, n, rho, certified=True, method="exact")
    e = otprior.ot_window_mass(windows, n, rho, certified=True)
    f = otprior.ot_window_mass(windows, n, rho)
    assert np.all(e.lo <= exact.hi) and np.all(exact.lo <= e.hi), (n, rho, e, exact)
    D = max(64, min(512, n // 8))
    slack = (windows + D + math.log(n) / (1 - rho)) * 2.0**-52 * f
    assert np.all((e.lo - slack <= f) & (f <= e.hi + slack)), (n, rho, e, f)
    assert np.all(np.diff(f) >= 0) and np.all(np.diff(e.lo) >= 0) and np.all(np.diff(e.hi) >= 0)


def _window_mass_mp(t, rho, windows, dps):
    """Theorem 2's root bisected by Lemma 2.1's sign test, then 1 - Phi_{t-W}/c (mpmath, private context)."""
    ctx = mpmath.MPContext()
    ctx.dps = dps
    r = ctx.mpf(rho)

    def run(c):
        phi, psi, phis = c, 1 / c, {t: c}
        for k in range(t, 0, -1):
            phi -= psi ** (-r)
            if k > 1 and phi <= 0:
                return None
            phis[k - 1] = phi
            if k > 1:
                psi += 1 / phi
        return phis if phi > 0 else None

    lo = ctx.log(t)
    hi = ctx.log(ctx.fsum(ctx.power(k, -r) for k in range(1, t + 1))) / (1 - r) + ctx.mpf(10) ** -10
    for _ in range(int(3.4 * dps) + 10):
        mid = (lo + hi) / 2
        if run(ctx.exp(mid)) is None:
            lo = mid
        else:
            hi = mid
    c = ctx.exp(hi)
    phis = run(c)
    return [1 - phis[t - W] / c for W in windows]


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.9999, 1 - 1e-6, 1 - 2**-40])
def test_near_one_enclosure_contains_a_direct_60_digit_recurrence(rho):
    """Where the exact route refuses (rho near one, n > 256): the bounds route's enclosure
    contains the window mass from Theorem 2's recurrence at 60 and 100 digits (they agree)."""
    n, windows = 260, [1, 2, 32, 130]
    a = _window_mass_mp(n, rho, windows, 60)
    b = _window_mass_mp(n, rho, windows, 100)
    assert all(abs(x - y) <= 1e-25 * y for x, y in zip(a, b, strict=True))
    e = otprior.ot_window_mass(np.array(windows), n, rho, certified=True)
    assert np.all((e.lo <= np.array([float(y) for y in b])) & (np.array([float(y) for y in b]) <= e.hi)), (e, b)


@pytest.mark.parametrize("n, rho", [(5000, 0.5), (20000, 0.9), (65536, 0.5)])
def test_float_value_is_exact_where_the_exact_route_is_cheap(n, rho):
    """Between 4096 and 65536 the double value takes the exact route while n <= 2^18 (1 - rho):
    it lies in the certified enclosure and agrees with the bounds route's estimate only to that
    enclosure's width, which is far wider than rounding."""
    import numpy as np

    m, route = otprior.ot_window_mass(64, n, rho, return_route=True)
    assert route == "exact"
    e = otprior.ot_window_mass(64, n, rho, certified=True)
    assert e.lo <= m <= e.hi
    est = otprior.ot_window_mass(64, n, rho, method="bounds")
    eb = otprior.ot_window_mass(64, n, rho, certified=True, method="bounds")  # the exact route's from 1e4 down
    assert abs(est - m) <= eb.hi - eb.lo
    with pytest.raises(otprior.DomainError, match="masked"):
        otprior.ot_window_mass(np.ma.masked_array([4, 5], mask=[0, 1]), n, rho)


def test_no_cliff_where_the_exact_steps_end():
    """Corollary 4.5 (proofs/ot_asymptotics.md): beyond W = 4096 the lower end is at least
    f_4096(c_hi) (m_n increases in W) and the drift bounds are those up to Psi_W, not over the
    whole bulk. Before: the lower end fell from 0.025034 (W = 4096) to 0.024620 (W = 4097) and
    the enclosure at 4097 was 2 % wide."""
    e = otprior.ot_window_mass(np.array([4096, 4097, 5000]), 10**6, 0.3, certified=True)
    assert np.all(np.diff(e.lo) >= 0), e
    assert np.all(e.hi - e.lo <= 1e-3 * e.hi), e
    # beyond the count's reach (W close to n) the lower end is that of the largest window it
    # reaches, not W/n (before: 0.999 at W = 999000 after 0.9999977 at W = 900000)
    e = otprior.ot_window_mass(np.array([900000, 999000]), 10**6, 0.9, certified=True)
    assert e.lo[1] >= e.lo[0] >= 0.99999, e


def test_float_beyond_the_exact_steps_against_the_exact_route():
    """The float value for W > 4096 continues the 4096 double steps by the continuum count
    (Corollary 4.5's estimate), not the upper end of the enclosure (before: 1.5 % off at
    W = 4097, n = 70000, rho = 0.5, against 2.6e-5 at W = 4096). Reference: the exact double
    route (Theorem 2's fixed point solved by sweeps, another algorithm)."""
    n, rho = 70000, 0.5
    windows = np.array([4096, 4097, 5000, 30000])
    exact = otprior.ot_window_mass(windows, n, rho, method="exact")
    f = otprior.ot_window_mass(windows, n, rho)
    assert np.all(np.abs(f - exact) <= 1e-4 * exact), (f, exact)
    assert np.all(np.diff(f) > 0), f


def test_float_beyond_the_exact_steps_at_1e300_against_the_power_sums():
    """At n = 1e300 every Phi_k of the first 1e5 steps is c (1 - O(1e-148)), so Psi_k = k/c and
    m_n(W) = c^(rho-1) H_W^(rho) to 1e-148: m(W)/m(64) = H_W/H_64 (mpmath, private context).
    The continued estimate (Corollary 4.5's count with the Euler-Maclaurin drift of J) meets it to
    1e-12; before it was 20 % off at W = 1e5 (log(Phi_K/c) rounded to 0), then 1.4e-5 (no drift)."""
    ctx = mpmath.MPContext()
    ctx.dps = 30
    windows = np.array([64, 4097, 10**4, 10**5])
    f = otprior.ot_window_mass(windows, int(1e300), 0.5)
    H = [ctx.zeta(0.5) - ctx.zeta(0.5, int(W) + 1) for W in windows]  # H_W^(1/2), Hurwitz zeta
    for W, fw, hw in zip(windows[1:], f[1:], H[1:], strict=True):
        assert abs(float(ctx.mpf(fw) / f[0] / (hw / H[0])) - 1) <= 1e-12, (W, fw)
