"""``ot_prior`` and ``ot_window_mass`` near rho = 1: the route rule of Lemma 4.6 by predicted work.

References are independent of the code under test: the root ``c`` of Theorem 2
(``proofs/constant_score_recurrence.md``) by Newton's method on ``s = log c`` through the backward
recurrence in a private mpmath context, safeguarded by Lemma 2.1's sign test (``c`` is above the root
exactly when every ``Phi_k`` it produces is positive), at more digits than the recurrence loses.
"""

import importlib

import mpmath
import numpy as np
import pytest

import otprior
from otprior import DomainError

_ot = importlib.import_module("otprior.ot_prior")


def _reference(n, rho, dps, guess=None):
    """pi_n(d), d = 0..n-1, and c: Newton on log c (bracketed by the sign test), private mpmath context.

    ``guess`` (a double log c) only seeds the bracket: it is used where the sign test proves a point
    below and a point above the root within 1e-9 of it, else the bracket starts from c >= n.
    """
    ctx = mpmath.MPContext()
    ctx.dps = dps
    r = ctx.mpf(rho)

    def run(s):
        c = ctx.exp(s)
        phi, dphi, psi, dpsi, vs = c, c, ctx.zero, ctx.zero, []
        for k in range(n, 0, -1):
            psi += 1 / phi
            dpsi -= dphi / phi**2
            v = psi ** (-r)
            vs.append(v)
            phi -= v
            dphi += r * v / psi * dpsi
            if k > 1 and phi <= 0:
                return False, phi, dphi, vs, c
        return phi > 0, phi, dphi, vs, c

    lo = ctx.log(n) - 1  # c >= n (Theorem 4(iii)): below the root
    hi = ctx.log(n) + 1
    if guess is not None:
        a, b = ctx.mpf(guess) * (1 - ctx.mpf("1e-9")), ctx.mpf(guess) * (1 + ctx.mpf("1e-9"))
        if not run(a)[0] and run(b)[0]:  # proved below / above by the sign test (Lemma 2.1)
            lo, hi = a, b
    while not run(hi)[0]:
        lo, hi = hi, 2 * hi
    _, phi, dphi, _, _ = run(hi)
    tol = ctx.mpf(10) ** (-dps + 8)
    for _ in range(10 * dps):  # Newton from the lowest point above the root, bisection where it leaves the bracket
        t = hi - phi / dphi if dphi > 0 else lo
        if hi - t < tol * abs(hi):
            break
        if not lo < t < hi:
            t = (lo + hi) / 2
        above, p, dp, _, _ = run(t)
        if above:
            hi, phi, dphi = t, p, dp
        else:
            lo = t
    _, _, _, vs, c = run(hi)
    return [v / c for v in vs], ctx, c


def _check_contains(res, ref, ctx):
    for d, exact in enumerate(ref):
        assert ctx.mpf(res.lo[d]) <= exact <= ctx.mpf(res.hi[d]), (d, res.lo[d], exact, res.hi[d])


def test_small_q_prior_and_window_mass_are_exact(monkeypatch):
    """1 - rho = 1e-12, n = 30: the prior was refused at once (Lemma 4.7's bound sized the recurrence and
    Lemma 4.6 was barred below 1e-11), and ot_window_mass(1, 30, .) fell back to Theorem 4(ii)'s estimate
    (0.3679 at n = 100 for an exact 0.9999999991); Lemma 4.6 is tried wherever its predicted work is small."""
    n, rho = 30, 1 - 1e-12
    res = otprior.ot_prior(n, rho)
    ref, ctx, c = _reference(n, rho, 330, res.log_c)  # the recurrence loses 257 digits here
    assert res.certified
    _check_contains(res, ref, ctx)
    assert abs(res.log_c - float(ctx.log(c))) <= 1e-12 * abs(res.log_c)
    f, route = otprior.ot_window_mass(1, n, rho, return_route=True)
    e = otprior.ot_window_mass(1, n, rho, certified=True)
    assert route == "exact"
    assert abs(f - float(ref[0])) <= 2e-16
    assert ctx.mpf(e.lo) <= ref[0] <= ctx.mpf(e.hi) and e.hi - e.lo <= 4e-16
    # where the exact route is not taken, the bounds route's float is its proved upper end f_W(n) for
    # n < e^(1/(1 - rho)), not Theorem 4(ii)'s estimate far outside its regime (e^-1 here)
    monkeypatch.setattr(_ot, "_exact_affordable", lambda *args: False)
    fb, route = otprior.ot_window_mass(1, n, rho, return_route=True)
    assert route == "bounds" and abs(fb - float(ref[0])) <= 1e-9


def test_high_dps_certifies():
    """dps = 330 at n = 3, rho = 1 - 1e-9: the target 10**-(dps + 1) / 4 was a double (zero from 308 digits)
    and every dps >= 320 failed after all its passes; now every value within 1e-330 of a 400-digit reference."""
    n, rho = 3, 1 - 1e-9
    res = otprior.ot_prior(n, rho, dps=330)
    ref, ctx, _ = _reference(n, rho, 400)
    for d, exact in enumerate(ref):
        assert abs(res.values[d] - exact) <= ctx.mpf(10) ** -330 * exact, d
    _check_contains(res, ref, ctx)


def test_window_mass_just_above_1e_4():
    """ot_window_mass(1, 257, 1 - 1.0001e-4) was 0.9546 (bounds route) for an exact 0.98473: Lemma 4.6's
    route now serves 1 - rho < 5e-4 (measured crossover with the double sweep)."""
    n, rho = 257, 1 - 1.0001e-4
    f, route = otprior.ot_window_mass(1, n, rho, return_route=True)
    # the recurrence loses 133 digits here; the double log c only seeds the sign-tested bracket
    ref, ctx, _ = _reference(n, rho, 190, otprior.ot_prior(n, rho).log_c)
    assert route == "exact"
    assert abs(f - float(ref[0])) <= 1e-15
    assert _ot._certified_first(n, rho) and not _ot._certified_first(n, 1 - 1e-3)


def test_n_1_is_exact():
    """n = 1: c = 1, so log c = 0 exactly (it was 2.1e-22 at rho = 1 - 1e-12)."""
    for q in (1e-12, 1e-6, 1e-15):
        res = otprior.ot_prior(1, 1 - q)
        assert res.log_c == 0.0 and res.prior.tolist() == [1.0]


def test_refusal_names_the_domain_answered():
    """The refusal at 1 - rho = 1e-11 gave 'n <= about 3e5'; it now gives the largest n at which a route is
    started (predicted before any work), and a route is started there and not one step beyond."""
    rho = 1 - 1e-11
    with pytest.raises(DomainError) as err:
        otprior.ot_prior(10**6, rho)
    n_max = _ot._near_one_domain(rho, 17)
    assert f"n <= {n_max} " in str(err.value) and "3e5" not in str(err.value)
    assert 1000 < n_max < 10**5
    assert _ot._newton_plan(n_max, rho, 17) is not None or _ot._recurrence_plan(n_max, rho, 17) is not None
    assert _ot._newton_plan(n_max + 1, rho, 17) is None and _ot._recurrence_plan(n_max + 1, rho, 17) is None


def test_near_one_prior_is_cached_and_copied(monkeypatch):
    """A second call with the same (n, rho, dps) does no work, and its arrays are the caller's own."""
    n, rho = 40, 1 - 2.5e-7
    a = otprior.ot_prior(n, rho)

    def fail(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(_ot, "_newton_float", fail)
    b = otprior.ot_prior(n, rho)
    assert np.array_equal(a.prior, b.prior) and a.prior is not b.prior
    b.prior[0] = -1.0
    assert otprior.ot_prior(n, rho).prior[0] == a.prior[0]
