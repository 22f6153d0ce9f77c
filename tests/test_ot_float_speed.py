"""The float bounds route made faster (proofs/ot_asymptotics.md, Lemma 4.10 and "The float route's work"):
the frozen steps against the one-step loop bit for bit, the seeded solve against the root of the same count
found in mpmath (private context), Lemma 4.10's seed to second order, the clip's shortcut against the full clip,
and the near-one float and the double steps bit for bit against the code before the change."""

import importlib
import math

import mpmath
import numpy as np
import pytest

import otprior

ot = importlib.import_module("otprior.ot_prior")

_BEFORE = "cdeccc2"  # the commit before the float route was made faster


def _one_step(P, Q, tot, kappa, mr, count, nsum):
    """Theorem 2's scaled recurrence one step and one check at a time (the loop the kernels replace)."""
    for k in range(count):
        Q += 1.0 / P
        v = kappa * Q**mr
        if k < nsum:
            tot += v
        P -= v
        if not P > 0.0:
            return None
    return P, Q, tot


@pytest.mark.parametrize(
    ("rho", "n"), [(0.5, int(1e300)), (0.9, int(1e300)), (1e-300, int(1e300)), (0.1, 10**18), (0.3, 10**40)]
)
def test_frozen_steps_are_the_one_step_loop(rho, n, monkeypatch):
    """Where no step moves P the vectorised steps give the loop's doubles (P, Q and the sum), and are used."""
    used = []
    frozen = ot._frozen_steps_float

    def spy(*args):
        out = frozen(*args)
        used.append(out is not None)
        return out

    monkeypatch.setattr(ot, "_frozen_steps_float", spy)
    x = ot._bulk_solve_float(n, rho, 512, 0, fast=True)
    for log_c in (x, x + 1e-9, x + 5.0):
        kappa = math.exp(-(1.0 - rho) * log_c)
        for count, nsum in ((4096, 4096), (4096, 64), (512, 512), (700, 0)):
            ref = _one_step(1.0, 0.0, 0.0, kappa, -rho, count, nsum)
            if nsum:
                got = ot._steps_float(1.0, 0.0, 0.0, kappa, -rho, min(nsum, count), True)
                if count > nsum:
                    got = ot._steps_float(*got, kappa, -rho, count - nsum, False)
            else:
                got = ot._steps_float(1.0, 0.0, 0.0, kappa, -rho, count, False)
            assert got[:2] == ref[:2], (rho, n, log_c, count, nsum)
            assert got[2] == ref[2], (rho, n, log_c, count, nsum)  # these sums stay below 1/2: summed to the end
    assert any(used)


def test_frozen_steps_refuse_where_a_step_moves_p():
    """The vectorised kernel answers None (the loop runs) as soon as one step changes P, whatever the guess said."""
    assert ot._frozen_steps_float(1.0, 0.0, 0.0, 1e-3, -0.5, 100, True) is None
    # P moves only at the first step (v_1 = 2^-52 = ulp(1)): refused, though every later step leaves P alone
    assert ot._frozen_steps_float(1.0, 0.0, 0.0, 2.0**-52, -30.0, 100, False) is None
    assert ot._frozen_steps_float(1.0, 0.0, 0.0, 2.0**-60, -0.5, 100, False)[0] == 1.0


def _mp_count_root(n, rho, D, x0, ctx):
    """The root in log c of Lemma 4.3's count ``D + e^{J_D} F(Psi_D) = n`` with the D steps and the incomplete gamma
    in mpmath (secant from x0, 30 digits): the same estimate as the float route, evaluated independently."""
    r = ctx.mpf(rho)
    q = 1 - r
    lz = (1 / q - 1) * ctx.log(q) + ctx.loggamma(1 / q)
    target = ctx.log(n - D)

    def g(x):
        P, S = ctx.exp(x), ctx.mpf(0)
        for _ in range(D):
            S += 1 / P
            P -= S ** (-r)
        u = S**q / q
        return ctx.log(P) + u + lz + ctx.log(ctx.gammainc(1 / q, u, regularized=True)) - target

    a, b = ctx.mpf(x0) - ctx.mpf("1e-6"), ctx.mpf(x0) + ctx.mpf("1e-6")
    ga, gb = g(a), g(b)
    for _ in range(30):
        a, ga, b = b, gb, b - gb * (b - a) / (gb - ga)
        gb = g(b)
        if abs(gb) < ctx.mpf(10) ** (-25):
            break
    return b


@pytest.mark.parametrize(
    ("rho", "n"),
    [(0.5, 10**9), (0.9, 10**18), (0.1, 10**12), (0.1, 10**14), (0.5, 10**13), (0.9, 10**6), (0.99, 10**18),
     (0.5, int(1e300))],
)
def test_seeded_solve_is_the_root_of_the_same_count(rho, n):
    """Lemma 4.10's seed and the stopping rule on either side: log c within the stopping distance (8 tau) of the
    count's root computed in mpmath, and the float window mass within the rounding part of its documented bound,
    (W + D + ln c) eps m, of f_W at that root run in mpmath (it fails if the solve stops early or on a wrong root)."""
    D = ot._bulk_steps(n)
    x = ot._bulk_solve_float(n, rho, D, 64, fast=True)
    ctx = mpmath.MPContext()
    ctx.dps = 30
    root = _mp_count_root(n, rho, D, x, ctx)
    assert abs(x - root) <= 10 * 4e-16 * abs(x), (rho, n, x, float(root))  # the rule's 8 tau, and slack
    W = 64
    c = ctx.exp(root)
    P, S, tot = c, ctx.mpf(0), ctx.mpf(0)
    for _ in range(W):
        S += 1 / P
        v = S ** (-ctx.mpf(rho))
        tot += v
        P -= v
    m_ref = tot / c
    got = otprior.ot_window_mass(W, n, rho)
    budget = (W + D + float(root)) * 2.0**-52 * float(m_ref)
    assert abs(got - float(m_ref)) <= budget, (rho, n, got, float(m_ref), budget)


@pytest.mark.parametrize("rho", [0.5, 0.7, 0.9])
def test_lemma_4_10_seed_is_second_order(rho):
    """The seed of Lemma 4.10 is within kappa^2 of the count's root (kappa = c^-(1-rho)); Theorem 4(ii)'s guess
    n / Z_q is off by A_D kappa, first order (the seed without A_D would fail the first assertion)."""
    q = 1.0 - rho
    for n in (10**6, 10**9, 10**12):
        D = ot._bulk_steps(n)
        x = ot._bulk_solve_float(n, rho, D, 0)  # the solve as before the change: an independent route to the root
        kappa = math.exp(-q * x)
        seed, slope = ot._bulk_seed(n, rho, D)
        assert abs(seed - x) <= kappa**2 + 64 * 2.0**-52 * abs(x), (rho, n, seed - x, kappa)
        plain = math.log(n) - ot.log_normaliser(q)
        assert abs(plain - x) >= 0.5 * ot._drift_coefficient(rho, D) * kappa, (rho, n)
        # A_D against the power sum it stands for (Euler-Maclaurin remainder below D^(-rho-3))
        assert abs(ot._drift_coefficient(rho, D) - (D**q / q - ot.power_sum(1, D, rho))) <= 1e-9
        assert abs(slope - 1.0) <= 2 * q * ot._drift_coefficient(rho, D) * kappa


def test_clip_shortcut_is_the_full_clip():
    """The clip skips the power sum only where it cannot bind: the same double as the full formula everywhere."""
    def full(v, W, n, rho):
        return max(min(v, 1.0, ot.power_sum(1, W, rho) * ot._n_to_minus_q(n, rho)), ot._mass_lower(W, n))

    for rho in (1e-300, 1e-8, 0.1, 0.5, 0.99, 1 - 1e-9):
        for n in (300, 10**6, 10**18, int(1e300)):
            for W in (1, 2, 64, 4096, n // 2, n - 1):
                top = ot.power_sum(1, W, rho) * ot._n_to_minus_q(n, rho)
                low = ot._mass_lower(W, n)
                for v in (low * 0.5, low, 0.5 * (low + top), top * (1 - 1e-8), top * (1 - 1e-12), top, top * 1.1,
                          math.nextafter(top, 0.0), 0.999999, 1.0, 1.5):
                    assert ot._clip_mass(v, W, n, rho) == full(v, W, n, rho), (v, W, n, rho)


def _before():
    from tests._git_module import module_at

    return module_at(_BEFORE, "otprior/ot_prior.py", "otprior._ot_prior_before_float_speed", "otprior")


def test_near_one_float_and_steps_bit_for_bit_as_before():
    """The near-one float (its secant keeps (M_K, L_K) and runs the best point's steps again only for W < 64) and
    the double steps (frozen tail) give the same doubles as before the change. Windows above 2048 continue the steps
    by Lemma 4.11's count since (tests/test_ot_continued_count.py), so they are left out here."""
    old = _before()
    for rho in (0.999, 1 - 1e-6, 1 - 1e-9):
        for n in (5000, 10**6, 10**18, int(1e300)):
            for W in (1, 63, 64, 100, 4096, 10**5, n // 2):
                if W < n and W <= ot._CONTINUED_W:
                    assert ot._near_one_mass_float(W, n, rho) == old._near_one_mass_float(W, n, rho), (W, n, rho)
    for rho, n in ((0.5, int(1e300)), (0.1, 10**18), (0.9, 10**6)):
        x = ot._bulk_solve_float(n, rho, 512, 0)
        assert x == old._bulk_solve_float(n, rho, 512, 0)  # the certified route's estimate is unchanged
        for W in (64, 512):
            assert ot._bulk_steps_float(x, rho, 4096, W)[:4] == old._bulk_steps_float(x, rho, 4096, W)[:4]


def test_frozen_route_is_the_loop_on_hostile_states():
    """Hostile states of the step loop (an independent review's finds): a sum entering at or above 1/2 with ``P > 1``
    (the vectorised sum added every step where the loop stops summing at the first block's end: 64.5 against 8.5),
    and ``P`` below ``2^-1020`` (a quarter ulp rounds to zero: ``math.log(0)`` raised ``ValueError`` where the loop
    answers); then random states, frozen route against the one-step loop, bit for bit."""
    steps = ot._steps_float
    cases = [(4.309103330548428e+214, 4.651707e-318, 0.4999999999999999, 1.0, -1e-300, 64, True),
             (1e-310, 1.0, 0.0, 1e-300, -0.5, 64, False), (1e-310, 1.0, 0.0, 1e-300, -0.5, 64, True)]
    rng = np.random.default_rng(5)
    for _ in range(300):
        P = float(10.0 ** rng.uniform(-320, 300))
        Q = float(10.0 ** rng.uniform(-320, 300))
        tot = float(rng.choice([0.0, 0.25, 0.4999999999999999, 0.5, 3.0]))
        kappa = float(10.0 ** rng.uniform(-300, 5))
        mr = -float(rng.choice([1e-300, 1e-8, 0.1, 0.5, 0.9, 0.999999]))
        cases.append((P, Q, tot, kappa, mr, int(rng.integers(ot._FROZEN_MIN, 400)), bool(rng.integers(2))))
    for case in cases:
        assert steps(*case) == steps(*case, frozen=False), case
    assert ot._bulk_steps_float(741.1906521646135, 0.9999999999999979, 4096, 448) is not None
