"""The float window mass near rho = 1 on the bounds route: Lemma 4.9 (proofs/ot_asymptotics.md).

References: Theorem 2's recurrence written in ``M = Phi Psi`` and ``log(Psi c)``, its root found in mpmath (a private
context; ``tests/_ot_reference.py::reference_masses_mx``), itself checked against the bisection of the recurrence in
``Phi`` (``reference_prior``); and the exact route (Lemma 4.6's certified prior, another theorem) where it runs.
"""

import math

import pytest
from _ot_reference import reference_masses_mx, reference_prior

import otprior


def test_the_mx_reference_agrees_with_the_bisection_in_phi():
    # the reference of this file against the one of the rest of the suite (both mpmath, private contexts)
    masses, a = reference_masses_mx(60, 0.99, (1, 5, 30), dps=30)
    prior, ctx, c = reference_prior(60, 0.99, 30)
    for W in (1, 5, 30):
        assert abs(masses[W] - ctx.fsum(prior[:W])) <= ctx.mpf(10) ** -25
    assert abs(a - c ** (-(1 - ctx.mpf(0.99)))) <= ctx.mpf(10) ** -25


@pytest.mark.parametrize("rho", [1 - 1e-4, 1 - 1e-6])
def test_no_jump_where_the_exact_route_ends(rho):
    # n = 8192 is the last length of the exact route (Lemma 4.6); at 8193 the bounds route's float was 1.5 % low at
    # 1 - rho = 1e-6 (1 - m off by a factor 7.1) and 0.29 % low at 1e-4; the true change is 5e-8 and 4e-7
    f0, r0 = otprior.ot_window_mass(1, 8192, rho, return_route=True)
    f1, r1 = otprior.ot_window_mass(1, 8193, rho, return_route=True)
    assert (r0, r1) == ("exact", "bounds")
    assert abs(f1 - f0) <= 2e-3 * (1 - f0)  # measured 1.7e-3 (1e-6) and 1.8e-4 (1e-4) of 1 - m
    for W in (2, 64, 4096):
        g0, g1 = otprior.ot_window_mass(W, 8192, rho), otprior.ot_window_mass(W, 8193, rho)
        assert abs(g1 - g0) <= 8e-3 * (1 - g0) + 2**-52  # 1 - m_n(2) ~ 2 (1 - m_n(1))^2: twice the relative error


@pytest.mark.parametrize(
    "n, rho, tol",
    [(513, 0.999, 5e-4), pytest.param(400, 0.995, 5e-4, marks=pytest.mark.slow), pytest.param(513, 0.99, 5e-4, marks=pytest.mark.slow)],
)
def test_short_prefixes_near_one_against_mpmath(n, rho, tol):
    # before: 1 - m_n(1) off by 8e-2 (rho = 0.999, n = 257) .. 4e-3 (0.99, 513) relative; now 1.4e-4 .. 3.8e-4
    ref, _ = reference_masses_mx(n, rho, (1, 8), dps=25)
    e = otprior.ot_window_mass([1, 8], n, rho, certified=True)
    for k, W in enumerate((1, 8)):
        f = otprior.ot_window_mass(W, n, rho)
        assert abs(f - ref[W]) <= tol * 8 ** (W > 1) * (1 - ref[W])
        assert e.lo[k] <= ref[W] <= e.hi[k]
        assert e.lo[k] <= f <= e.hi[k]


@pytest.mark.parametrize("rho", [1 - 1e-4, 1 - 1e-6, 0.999])
def test_near_one_float_inside_its_enclosure_and_monotone(rho):
    # every length up to 1e300: the float lies in the certified enclosure (or within its documented rounding), and it
    # increases in W and decreases in n
    eps = 2.0**-52
    for n in (10**4, 10**6, 10**12, 10**18, int(1e300)):
        ws = sorted({W for W in (1, 2, 64, 4096, 10**5, n // 2, n - 1000) if W < n})
        fs = [otprior.ot_window_mass(W, n, rho) for W in ws]
        e = otprior.ot_window_mass(ws, n, rho, certified=True)
        for k, W in enumerate(ws):
            slack = (min(W, 4096) + 512 + math.log(n) / (1 - rho)) * eps * fs[k]
            assert e.lo[k] - slack <= fs[k] <= e.hi[k] + slack
        assert all(a <= b for a, b in zip(fs, fs[1:], strict=False))
    prev = 2.0
    for n in (8193, 10**4, 10**5, 10**6, 10**9, 10**18, int(1e300)):
        f = otprior.ot_window_mass(1, n, rho)
        assert f <= prev
        prev = f


@pytest.mark.slow
def test_near_one_float_against_lemma_4_6_at_1e4():
    # the exact route (Lemma 4.6: the whole prior certified, another algorithm) at n = 1e4 > 8192, where the float
    # takes the bounds route: 1 - m_n(1) was 6.8 times too large at 1 - rho = 1e-6; now 9e-4 relative
    rho = 1 - 1e-6
    ex = otprior.ot_window_mass(1, 10**4, rho, certified=True, method="exact")
    f, route = otprior.ot_window_mass(1, 10**4, rho, return_route=True)
    assert route == "bounds"
    assert abs(f - ex.mid) <= 2e-3 * (1 - ex.mid)


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.99, 0.999, 1 - 1e-4, 1 - 1e-6])
def test_route_switch_against_mpmath(rho):
    # bench/bench_ot_crossover.py's points: the last exact length n0 and n0 + 1, W = 1 and 64, against the mpmath
    # reference (30 digits): the float within its documented bound (width + rounding), the enclosure holding the
    # reference, and 1 - m within 2e-3 relative on the bounds route at W = 1 (measured at most 1.7e-3, at 1 - rho = 1e-6)
    n0 = 256 if rho < 1 - 5e-4 else 8192
    eps = 2.0**-52
    for n in (n0, n0 + 1):
        ref, _ = reference_masses_mx(n, rho, (1, 64), dps=30)
        for W in (1, 64):
            f, route = otprior.ot_window_mass(W, n, rho, return_route=True)
            e = otprior.ot_window_mass(W, n, rho, certified=True)
            assert route == ("exact" if n == n0 else "bounds")
            assert e.lo <= ref[W] <= e.hi
            bound = (e.hi - e.lo) + (W + max(64, min(512, n // 8)) + math.log(n) / (1 - rho)) * eps * f
            assert abs(f - ref[W]) <= bound
            # 1 - m_n(64) carries up to 64 times the relative error of 1 - m_n(1) (measured 1.1e-2 at rho = 0.99,
            # n = 257; Lemma 4.3's estimate: 1.6e-1)
            assert abs(f - ref[W]) <= (2e-3 if W == 1 else 5e-2) * (1 - ref[W]) + 2 * eps


@pytest.mark.parametrize("n", [10**10, 10**12])
def test_windows_next_to_n_near_one_need_no_proved_bounds(monkeypatch, n):
    # W = n - 1e6 at rho = 0.999: the count from the query side runs past the lifetime there; the float fell through
    # to the proved bounds (20-30 ms) for the value 1.0, which Corollary 4.8(d) at the estimate gives at once
    import importlib

    ot = importlib.import_module("otprior.ot_prior")

    def boom(*args, **kwargs):
        raise AssertionError("the proved bounds were computed for a float")

    monkeypatch.setattr(ot, "_bounds_mass_arb", boom)
    assert otprior.ot_window_mass(n - 10**6, n, 0.999) == 1.0
