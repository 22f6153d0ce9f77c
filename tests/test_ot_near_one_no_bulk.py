"""The float window mass at 1 - rho <= 1e-8 where Lemma 4.9's trajectory has little or no bulk (proofs/ot_asymptotics.md).

There ``M = Phi Psi`` stays near or below 1 over the whole lifetime (``n (1 - rho)^(1/2)`` below about 5) and the
count's bulk form ``log(1 + 1/M) ~ 1/(M + 1/2)`` fails; the float used Lemma 4.3's estimate instead, 1.7 % low at
``n = 8193, 1 - rho = 1e-9``. Reference: Theorem 2's recurrence in ``M`` and ``L = log(Psi c)`` run in mpmath (a private
context, no otprior code), whose sign test brackets the root: at ``a`` above ``m_n(1)`` the trajectory dies before
step ``n``, below it lives (Lemma 2.1); the float's ``1 - m_n(1)`` scaled by ``1 -+ tol`` must straddle it.
"""

import math

import mpmath
import pytest
from _ot_reference import reference_masses_mx

import otprior


def _lives(n, q, one_minus_a, dps=20):
    """Whether Theorem 2's trajectory from ``a = 1 - one_minus_a`` keeps ``M_1 .. M_{n-1} > 0`` (mpmath, private)."""
    ctx = mpmath.MPContext()
    ctx.dps = dps
    q = ctx.mpf(q)
    la = ctx.log1p(-ctx.mpf(one_minus_a))
    M, L = ctx.mpf(one_minus_a), ctx.mpf(0)
    for _ in range(1, n - 1):
        L += ctx.log1p(1 / M)
        M -= ctx.expm1(la + q * L)
        if M <= 0:
            return False
    return True


def _assert_brackets(n, q, tol):
    q = 1.0 - (1.0 - q)  # the 1 - rho of the double rho (1 - 1e-14 rounds 8e-4 relative off in 1 - rho)
    f = otprior.ot_window_mass(1, n, 1 - q)
    g = 1.0 - f  # exact in doubles (Sterbenz)
    assert _lives(n, q, g * (1 + tol)), (n, q, f)  # a below the root: lives
    assert not _lives(n, q, g * (1 - tol)), (n, q, f)  # a above the root: dies before n


@pytest.mark.parametrize("n, q", [(8193, 1e-9), pytest.param(8193, 2.0**-53, marks=pytest.mark.slow)])
def test_no_bulk_float_brackets_the_root(n, q):
    # before: 0.98296 at (8193, 1e-9), 0.98945 at (8193, 2^-53); 1 - m_n(1) is 1.67e-5 and 4.5e-12 there
    # measured now: 3.8e-5 and 5.4e-5 relative (against the doubles' recurrence, 1e-14)
    _assert_brackets(n, q, 1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("n, q", [(4096, 1e-12), (20000, 1e-12), (20000, 1e-14), (100000, 1e-9), (100000, 1e-10)])
def test_no_bulk_float_brackets_the_root_more(n, q):
    _assert_brackets(n, q, 1e-3)


@pytest.mark.parametrize("n, q", [(145628, 1e-9), (4607986, 1e-12), (436658374, 2.0**-53)])
def test_no_jump_where_the_bulk_form_took_over(n, q):
    # the old switch from Lemma 4.3's estimate to Lemma 4.9's: the float jumped by 1.70e-2, 1.05e-2, 1.05e-2 there,
    # for 1 - m of 5.9e-5, 1.9e-6, 1.9e-8; each n's float moves by less than 1e-4 of 1 - m (the true change is below
    # (1 - m) / n), and W = 2 by less than 1e-3 of its own
    for W, tol in ((1, 1e-4), (2, 1e-3)):
        f0, f1 = otprior.ot_window_mass(W, n, 1 - q), otprior.ot_window_mass(W, n + 1, 1 - q)
        assert abs(f1 - f0) <= tol * (1 - f0) + 2.0**-53


@pytest.mark.slow  # 0.9 s (default-run budget)
def test_float_takes_lemma_4_9_at_4096_the_certified_route_stays_exact():
    # 1 - rho <= 1e-8, 4096 <= n <= 8192: the float from Lemma 4.9 (it took Lemma 4.6's certified prior, 1-2 s at
    # 1 - rho = 1e-12); certified=True keeps the exact route (route names only: no certified work here)
    import importlib

    ot = importlib.import_module("otprior.ot_prior")
    assert not ot._exact_affordable(8192, 1 - 1e-12, False)
    assert ot._exact_affordable(8192, 1 - 1e-12, True)
    assert ot._exact_affordable(8192, 1 - 1e-6, False)  # 1 - rho above 1e-8: the exact route as before
    assert ot._exact_affordable(4095, 1 - 1e-12, False)
    f, route = otprior.ot_window_mass(1, 8192, 1 - 1e-12, return_route=True)
    assert route == "bounds"
    g, q = 1.0 - f, 1.0 - (1 - 1e-12)
    assert _lives(8192, q, g * (1 + 1e-3)) and not _lives(8192, q, g * (1 - 1e-3))


@pytest.mark.slow
def test_no_bulk_against_the_mx_reference():
    # windows 1 and 2 against tests/_ot_reference.py's root (30 digits): 1 - m_n(2) ~ 2 (1 - m_n(1))^2
    n, q = 8193, 1e-9
    ref, _ = reference_masses_mx(n, 1 - q, (1, 2), dps=20)
    for W, tol in ((1, 1e-3), (2, 3e-3)):
        f = otprior.ot_window_mass(W, n, 1 - q)
        assert abs((1 - f) - float(1 - ref[W])) <= tol * float(1 - ref[W])


def test_no_bulk_values_are_monotone_and_finite():
    # m_n(1) decreases in n and increases in rho over the no-bulk range and through the bulk form's start (lc = 6)
    for q in (1e-9, 1e-12, 2.0**-53):
        prev = 1.0
        for n in (4096, 10**4, 10**5, 10**6, 10**7, 10**8, 10**9, 10**12, 10**30):
            f = otprior.ot_window_mass(1, n, 1 - q)
            assert math.isfinite(f) and 0.0 < f <= prev
            prev = f
