"""``ot_prior`` near rho = 1: Lemma 4.6 (Newton in logarithms) and Lemma 4.7 (the recurrence's loss).

References are independent: the root of Theorem 2 bisected by Lemma 2.1's sign test in a private
mpmath context at more digits than the recurrence loses (``proofs/constant_score_recurrence.md``),
and the dense Jacobian of Lemma 4.6(d) built entry by entry in numpy.
"""

import importlib
import math

import mpmath
import numpy as np
import pytest
from _ot_reference import reference_prior

import otprior
from otprior import DomainError

_ot = importlib.import_module("otprior.ot_prior")


def _reference(n, rho, dps):
    return reference_prior(n, rho, dps)


def _check_contains(res, ref, ctx):
    for d, exact in enumerate(ref):
        assert ctx.mpf(res.lo[d]) <= exact <= ctx.mpf(res.hi[d]), (d, res.lo[d], exact, res.hi[d])
    err = max(abs(float(ctx.log(ctx.mpf(float(lp))) - ctx.log(q))) for lp, q in zip(res.prior, ref, strict=True))
    assert err <= res.log_error_bound, (err, res.log_error_bound)


@pytest.mark.parametrize(
    "n, q, dps",
    [(1, 1e-6, 30), (2, 1e-9, 40), (12, 1e-6, 80), (6, 1e-11, 110), (9, 9e-5, 60)],
)
def test_lemma_4_6_encloses_the_bisected_root(n, q, dps):
    """Every entry's enclosure contains the 60-110 digit reference (the recurrence loses up to 70 here);
    the route is Lemma 4.6's (the recurrence's bisection is never run)."""
    rho = 1.0 - q
    assert _ot._certified_first(n, rho)
    res = otprior.ot_prior(n, rho)
    ref, ctx, c = _reference(n, rho, dps)
    assert res.certified
    _check_contains(res, ref, ctx)
    assert abs(res.log_c - float(ctx.log(c))) <= 1e-9 * max(1.0, abs(res.log_c))
    if n > 1:
        assert abs(res.log10_condition - float(-ctx.log10(ref[-1]))) <= 1e-9 * res.log10_condition


def test_lemma_4_6_more_digits_than_a_double():
    """dps = 40 at rho = 1 - 1e-7: every ball within 1e-41 relative and around the 120-digit reference."""
    n, rho = 10, 1 - 1e-7
    res = otprior.ot_prior(n, rho, dps=40)
    ref, ctx, _ = _reference(n, rho, 130)
    for d, exact in enumerate(ref):
        assert abs(res.values[d] - exact) <= 1e-39 * exact
        assert res.rad[d] <= 1e-15 * res.mid[d]
    _check_contains(res, ref, ctx)


@pytest.mark.slow
def test_lemma_4_6_at_n_100_against_a_300_digit_bisection():
    """n = 100, rho = 1 - 1e-6: the recurrence loses 240 digits; the reference runs at 300."""
    n, rho = 100, 1 - 1e-6
    res = otprior.ot_prior(n, rho)
    ref, ctx, _ = _reference(n, rho, 300)
    _check_contains(res, ref, ctx)


def test_n_1000_near_one_is_answered_and_repeatable():
    """ot_prior(1000, 1 - 1e-6) was refused at the work cap after about 8 s; the recurrence would lose 944
    digits. A second call gives the same doubles. Reference: the dps = 40 answer's values, whose residual in
    Theorem 2's equations is evaluated here in mpmath at 70 digits; by Lemma 4.6(a) (contraction) they lie
    within osc(residual) / (1 - rho) of the exact prior, and the double answer's enclosures contain them."""
    n, rho = 1000, 1 - 1e-6
    a = otprior.ot_prior(n, rho)
    b = otprior.ot_prior(n, rho)
    assert a.certified and np.array_equal(a.prior, b.prior) and np.array_equal(a.lo, b.lo)
    assert abs(math.fsum(a.prior) - 1.0) <= 1e-13
    assert np.all(np.diff(a.prior) <= 0.0)
    assert 940 < a.log10_condition < 950
    hi_prec = otprior.ot_prior(n, rho, dps=40)
    ctx = mpmath.MPContext()
    ctx.dps = 70
    z = [ctx.log(ctx.mpf(str(x))) for x in hi_prec.values[::-1]]  # log v_j - log c, j = 1..n
    phi, inv = ctx.mpf(0), []
    for x in z:
        phi += ctx.exp(x)
        inv.append(1 / phi)
    psi, res = ctx.mpf(0), [None] * n
    for j in range(n - 1, -1, -1):
        psi += inv[j]
        res[j] = z[j] + ctx.mpf(rho) * ctx.log(psi)
    err = (max(res) - min(res)) / (1 - ctx.mpf(rho))  # bounds |log value - log pi| (Lemma 4.6(a), (b))
    assert err < ctx.mpf("1e-30"), err
    for d in range(n):
        exact = hi_prec.values[d]
        assert ctx.mpf(a.lo[d]) * (1 - err) <= exact <= ctx.mpf(a.hi[d]) * (1 + err), d


def test_banded_solve_matches_the_dense_jacobian():
    """Lemma 4.6(d): the O(n) banded solve against numpy's dense solve of I - rho K, K built entry by entry."""
    n, rho = 60, 1 - 1e-5
    z = _ot._newton_float(n, rho)
    lphi, lpsi = _ot._log_terms(z)
    lT = np.logaddexp.accumulate((-2.0 * lphi)[::-1])[::-1]
    K = np.empty((n, n))
    for j in range(n):
        for k in range(n):
            K[j, k] = math.exp(z[k] - lpsi[j] + lT[max(j, k)])
    assert np.allclose(K.sum(axis=1), 1.0, atol=1e-12)  # row sums one
    b = np.random.default_rng(3).normal(size=n)
    dense = np.linalg.solve(np.eye(n) - rho * K, b)
    banded = _ot._newton_correction(z, rho, lphi, lpsi, b)
    # the constant direction is amplified by 1/(1 - rho) = 1e5 in both: compare relative to the solution
    assert np.max(np.abs(banded - dense)) <= 1e-8 * np.max(np.abs(dense))


@pytest.mark.parametrize("n, q", [(16, 1e-6), (40, 1e-4), (40, 1e-2), (40, 0.5)])
def test_lemma_4_6_amplification_is_sharp(n, q):
    """The oscillation norm of (I - rho K)^-1 at the solution is at most 1/(1 - rho) (Lemma 4.6(a)) and
    within one digit of it (1.4e5 at n = 16, q = 1e-6; 1.7 at rho = 0.5)."""
    rho = 1.0 - q
    z = _ot._newton_float(n, rho)
    lphi, lpsi = _ot._log_terms(z)
    lT = np.logaddexp.accumulate((-2.0 * lphi)[::-1])[::-1]
    idx = np.maximum.outer(np.arange(n), np.arange(n))
    K = np.exp(z[None, :] - lpsi[:, None] + lT[idx])
    A = np.linalg.inv(np.eye(n) - rho * K)
    amp = max(float(np.max(np.sum(np.maximum(A[j][None, :] - A, 0.0), axis=1))) for j in range(n))
    assert amp <= (1.0 + 1e-6) / q
    assert amp >= 0.1 / q


@pytest.mark.parametrize("q", [0.9, 0.5, 0.1, 1e-2, 1e-4, 1e-6, 1e-9])
def test_lemma_4_7_bounds_the_measured_loss(q):
    """log10(Phi_n/Phi_1) (the returned log10_condition: certified near one, vouched by Theorem 1 elsewhere)
    never exceeds Lemma 4.7's bound, on n = 2..100 (and 1000 for q >= 0.01); within a factor 1.5 at n = 2 and
    rho <= 0.5 (elsewhere it is loose: 8150 for a true 944 digits at n = 1000, q = 1e-6)."""
    rho = 1.0 - q
    for n in (2, 3, 16, 100) + ((1000,) if q >= 1e-2 else ()):
        res = otprior.ot_prior(n, rho)
        bound = _ot._recurrence_condition_bound(n, rho) / math.log(10.0)
        slack = res.log_error_bound / math.log(10.0)
        assert res.log10_condition - slack <= bound, (n, res.log10_condition, bound)
        if n == 2 or q >= 0.5:
            assert bound <= 1.5 * res.log10_condition + 0.1, (n, res.log10_condition, bound)


def test_lemma_4_7_route_below_1e_11():
    """rho = 1 - 1e-15: n = 2 and n = 6 answered by the recurrence at Lemma 4.7's precision (against the
    bisection at 60 and 110 digits; the bound is 15.2 digits for a true 13.8 at n = 2)."""
    for n, dps in ((2, 60), (6, 110)):
        rho = 1 - 1e-15
        res = otprior.ot_prior(n, rho)
        ref, ctx, _ = _reference(n, rho, dps)
        _check_contains(res, ref, ctx)
        assert res.log10_condition <= _ot._recurrence_condition_bound(n, rho) / math.log(10.0)


def test_refusals_are_decided_before_any_work(monkeypatch):
    """Where the predicted work exceeds the cap the call is refused at once (no pass of either route
    runs), with a DomainError naming rho and giving n and the domain answered; the same inputs give the
    same refusal."""

    def fail(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(_ot, "_recurrence_arb", fail)
    monkeypatch.setattr(_ot, "_newton_float", fail)
    monkeypatch.setattr(_ot, "_float_prior", fail)
    for n, rho in ((30, 1 - 1e-15), (10**6, 1 - 1e-6), (np.int64(400_000), 1 - 1e-6), (5000, 1 - 1e-15)):
        with pytest.raises(DomainError) as first:
            otprior.ot_prior(n, rho)
        with pytest.raises(DomainError) as second:
            otprior.ot_prior(n, rho)
        msg = str(first.value)
        assert first.value.parameter == "rho" and f"n={int(n)}" in msg and "answered" in msg
        assert msg == str(second.value)


def test_inputs_near_one_and_at_the_edges():
    """numpy integers and rho given as numpy floats; rho = 1 and above refused; n = 1 exact."""
    a = otprior.ot_prior(np.int64(16), np.float64(1 - 1e-6))
    b = otprior.ot_prior(16, 1 - 1e-6)
    assert np.array_equal(a.prior, b.prior)
    one = otprior.ot_prior(1, 1 - 1e-9)
    assert one.prior.tolist() == [1.0] and one.lo[0] <= 1.0 <= one.hi[0]
    for bad in (1.0, 1.0 + 1e-12, float("nan")):
        with pytest.raises(DomainError):
            otprior.ot_prior(4, bad)


@pytest.mark.parametrize("n", [257, 1000, 5000])
def test_window_masses_near_one_take_lemma_4_6_up_to_8192(n):
    """For 1 - rho < 1e-4 and 256 < n <= 8192 the window mass takes the exact route (Lemma 4.6's certified
    prior): its enclosure meets the bounds route's (Lemma 4.3, another theorem; both hold the exact value)
    and is a few ulps wide, the float inside it; at n = 257, W = 1 the bounds route's float was 0.9725 for
    an exact 0.99948, and at n = 5000 (bounds route then) 0.98288 for 0.99812."""
    rho = 1 - 1e-6
    ws = np.array([1, 2, 64, n - 1, n])
    e, route = otprior.ot_window_mass(ws, n, rho, certified=True, return_route=True)
    f = otprior.ot_window_mass(ws, n, rho)
    b = otprior.ot_window_mass(ws, n, rho, certified=True, method="bounds")
    assert list(route) == ["exact"] * len(ws)
    assert np.all(np.maximum(b.lo, e.lo) <= np.minimum(b.hi, e.hi))
    assert np.all(e.lo <= f) and np.all(f <= e.hi)
    assert np.all(e.hi - e.lo <= 4e-16)
    assert otprior.ot_window_mass(1, 8193, rho, return_route=True)[1] == "bounds"


@pytest.mark.slow
def test_window_mass_on_the_lemma_4_6_route_against_mpmath():
    """n = 300, rho = 1 - 9e-5 (exact route by Lemma 4.6): W = 1, 10, 100 inside the bisected reference's sums."""
    n, rho = 300, 1 - 9e-5
    e = otprior.ot_window_mass(np.array([1, 10, 100]), n, rho, certified=True)
    ref, ctx, _ = _reference(n, rho, 170)
    for k, w in enumerate((1, 10, 100)):
        m = ctx.fsum(ref[:w])
        assert ctx.mpf(e.lo[k]) <= m <= ctx.mpf(e.hi[k]), (w, e.lo[k], m, e.hi[k])
