"""The bounds route's stepping kernels (proofs/ot_asymptotics.md, Lemmas 4.2-4.3) against the one-step
loops they replace, and the float value against the certified enclosure where the mass is near 1 or
``rho`` is tiny."""

import importlib
import math

import flint
import mpmath
import numpy as np
import pytest

import otprior
from otprior._balls import arb_from_float, arb_precision

ot = importlib.import_module("otprior.ot_prior")


def _one_step_float(log_c, rho, D, W):
    """The scaled recurrence of Theorem 2, one step and one positivity check at a time."""
    kappa = math.exp(-(1.0 - rho) * log_c)
    P, Q, tot, mr = 1.0, 0.0, 0.0, -rho
    P_W = None
    for k in range(D):
        Q += 1.0 / P
        v = kappa * Q**mr
        if k < W:
            tot += v
        P -= v
        if k + 1 == min(W, D):
            P_W = P
        if not P > 0.0:
            return None
    return P, Q, tot, P_W


@pytest.mark.parametrize("rho", [1e-300, 0.5, 0.99, 1 - 2**-52])
def test_block_steps_in_doubles_are_the_one_step_loop(rho):
    """Same doubles as the checked one-step loop, and None exactly where it dies (c below the root)."""
    n = 10**6
    D = ot._bulk_steps(n)
    x = ot._bulk_solve_float(n, rho, D, D)
    for log_c in (x, x - 0.5, x - 3.0, 0.3 * x, math.log(3.0), 2.0):
        for Dk, W in ((D, 64), (D, D), (37, 5), (1000, 1000), (203, 0)):
            ref = _one_step_float(log_c, rho, Dk, W)
            got = ot._bulk_steps_float(log_c, rho, Dk, W)
            assert (got is None) == (ref is None), (log_c, Dk, W, ref, got)
            if ref is None:
                continue
            P, Q, tot, P_W = ref
            assert got[4][:2] == (P, Q)
            # the sum is dropped once it reaches 1/2 (then f_W is 1 - P_W): a partial sum of at least 1/2
            assert got[4][2] == tot if tot < 0.5 else 0.5 <= got[4][2] <= tot
            assert got[2] == (tot if tot < 0.5 else 1.0 - P_W)
            if W >= Dk > 100:  # continuing a state of k summed steps gives the same doubles
                part = ot._bulk_steps_float(log_c, rho, 100, 100)
                cont = ot._bulk_steps_float(log_c, rho, Dk, W, start=part[4])
                assert cont[4][:2] == got[4][:2] and cont[2] == got[2]


def _checked_arb(phi, psi, tot, mr, count):
    """Theorem 2's recurrence in Arb with the checks after every step (dead: proved <= 0)."""
    for _ in range(count):
        psi += 1 / phi
        v = psi**mr
        tot += v
        phi = phi - v
        if phi <= 0:
            return phi, psi, tot, False
        if not phi > 0:
            return phi, psi, tot, None
    return phi, psi, tot, True


def _same_ball(a, b):
    return a.mid() == b.mid() and a.rad() == b.rad()


@pytest.mark.parametrize("prec", [24, 128])
def test_block_steps_in_arb_are_the_checked_loop(prec):
    """Same balls and the same verdict (alive / proved dead / undecided) as the checked loop."""
    rho = 0.9
    n = 10**5
    x = ot._bulk_solve_float(n, rho, ot._bulk_steps(n), 0)
    with arb_precision(prec):
        mr = -arb_from_float(rho)
        for c in (flint.arb(x).exp().mid(), flint.arb(40.0), flint.arb(2.5), flint.arb(x - 9).exp().mid()):
            for count in (1, 31, 32, 33, 200, 700):
                zero = flint.arb(0)
                ref = _checked_arb(c, zero, zero, mr, count)
                got = ot._steps_arb(c, zero, zero, mr, count)
                assert got[3] is ref[3], (c, count, got[3], ref[3])
                assert all(_same_ball(a, b) for a, b in zip(got[:3], ref[:3], strict=True)), (c, count)
    # the three verdicts are all met above
    with arb_precision(24):
        verdicts = {ot._steps_arb(c, flint.arb(0), flint.arb(0), -arb_from_float(rho), 700)[3] for c in
                    (flint.arb(x).exp().mid(), flint.arb(2.5), flint.arb(x - 9).exp().mid())}
    assert verdicts == {True, False, None}


def test_outer_windows_continue_the_exact_steps():
    """f_W at a bracket end from Lemma 4.3's D-step state: the balls of a run from scratch."""
    n, rho = 10**12, 0.99
    res = ot._bulk_enclosure(n, rho, (3000,))
    c_lo, c_hi, fw_hi, fw_lo = res
    assert "state" in fw_hi and 3000 in fw_hi and 3000 in fw_lo
    with arb_precision(fw_hi["state"][4]):
        fresh = {}
        ot._outer_windows((3000,), c_hi, fresh, arb_from_float(rho))
    assert _same_ball(fresh[3000], fw_hi[3000])


@pytest.mark.parametrize("rho", [1e-300, 0.5, 1 - 1e-6, 1 - 2**-52])
@pytest.mark.parametrize("W", [257, 4096])
def test_power_sum_by_zeta_contains_the_direct_sum(W, rho):
    """H_W by the Hurwitz zeta difference (with guard bits near rho = 1) holds the 60-digit direct sum."""
    ctx = mpmath.MPContext()
    ctx.dps = 60
    r = ctx.mpf(rho)
    ref = ctx.fsum(ctx.power(k, -r) for k in range(1, W + 1))
    with arb_precision(128):
        H = ot._power_sum_arb(W, arb_from_float(rho))
        lo, hi = (ctx.mpf(x.str(50, radius=False)) for x in (H.lower(), H.upper()))
        slack = ref * ctx.mpf("1e-45")  # the 50 digits written of each end
        assert lo - slack <= ref <= hi + slack, (H, ref)
        assert float(H.rad() / H.mid()) < 1e-30, H


@pytest.mark.parametrize("n", [10**4, 10**6, 10**12])
def test_float_lies_in_the_enclosure_where_the_mass_is_near_one(n):
    """1 - m ~ 1e-14..1e-16 (W = 4096, rho = 0.999): the float is 1 - Phi_W/c, not the sum of the
    v_k (whose rounding, W eps, put it 1.4e-14 outside the enclosure at n = 1e12)."""
    W, rho = 4096, 0.999
    e = otprior.ot_window_mass(W, n, rho, certified=True)
    f = otprior.ot_window_mass(W, n, rho)
    assert e.lo <= f <= e.hi, (f, e)


@pytest.mark.parametrize("n", [2**53 + 1, 10**18, int(1e300), np.int64(2**62)])
def test_float_lies_in_the_enclosure_at_tiny_rho(n):
    """rho = 1e-300: m = W/n to 1e-280; the clip H_W n^{rho-1} formed as exp(-(1-rho) log n) was
    1.5e-13 high (the float 2.4e-14 above the enclosure at n = 1e300)."""
    for W in (1, 64, int(n) - 1):
        e = otprior.ot_window_mass(W, n, 1e-300, certified=True)
        f = otprior.ot_window_mass(W, n, 1e-300)
        assert e.lo <= f <= e.hi, (W, n, f, e)


def test_a_large_windows_floor_needs_no_lower_end_of_the_bracket():
    """W > 4096 reads f_4096 at c_hi only (the floor of Corollary 4.5); the enclosures of 4096 and 1e5
    are the same asked together or alone."""
    n, rho = 10**10, 0.99
    both = otprior.ot_window_mass(np.array([4096, 10**5]), n, rho, certified=True)
    for k, W in enumerate((4096, 10**5)):
        alone = otprior.ot_window_mass(W, n, rho, certified=True)
        assert (both.lo[k], both.hi[k]) == (alone.lo, alone.hi), (W, both, alone)
    assert both.lo[1] >= both.lo[0]


def _recurrence_one_step(n, rho_a, c, full):
    """Theorem 2's backward recurrence with the checks of every step (the sign test of Lemma 2.1)."""
    phi, psi, mr = c, flint.arb(0), -rho_a
    phis = [None] * (n + 1) if full else None
    vs = [None] * (n + 1) if full else None
    if full:
        phis[n] = c
    for k in range(n, 0, -1):
        psi += 1 / phi
        vk = psi**mr
        phi = phi - vk
        if full:
            vs[k], phis[k - 1] = vk, phi
        if k > 1:
            if phi < 0:
                return -1, phis, vs, None
            if not phi > 0:
                return 0, phis, vs, None
    if phi > 0:
        return 1, phis, vs, phi
    if phi <= 0:
        return -1, phis, vs, phi
    return 0, phis, vs, phi


@pytest.mark.parametrize("prec", [20, 128])
def test_recurrence_in_blocks_is_the_checked_loop(prec):
    """The exact route's sign test: the same sign, balls and (partial) lists as the checked loop, above,
    below and at the root, and where the precision is too low to decide."""
    rho = 0.5
    signs = set()
    for n in (1, 2, 33, 100, 300):
        log_c = otprior.ot_prior(n, rho).log_c
        with arb_precision(prec):
            r = arb_from_float(rho)
            for c in (flint.arb(log_c).exp().mid(), flint.arb(log_c + 1e-6).exp().mid(),
                      flint.arb(log_c - 1e-6).exp().mid(), flint.arb(log_c - 2).exp().mid()):
                for full in (False, True):
                    ref = _recurrence_one_step(n, r, c, full)
                    got = ot._recurrence_arb(n, r, c, full=full)
                    assert got[0] == ref[0], (n, prec, c, got[0], ref[0])
                    signs.add(got[0])
                    if full:
                        for lst_g, lst_r in ((got[1], ref[1]), (got[2], ref[2])):
                            assert [x is None for x in lst_g] == [x is None for x in lst_r]
                            assert all(_same_ball(a, b) for a, b in zip(lst_g, lst_r, strict=True) if a is not None)
                    assert (got[3] is None) == (ref[3] is None) and (got[3] is None or _same_ball(got[3], ref[3]))
    assert signs == ({-1, 0} if prec == 20 else {1, -1})  # every verdict is met


@pytest.mark.parametrize("n, rho", [(4097, 0.1), (10**4, 0.5)])
def test_certified_takes_the_exact_route_up_to_1e4_where_it_is_cheap(n, rho):
    """4096 < n <= 1e4 with n <= 2e4 (1 - rho): the exact route's enclosure (1e-12 wide, about 30 ms)
    instead of the bounds route's (1e-2 wide); it contains the bounds route's."""
    e, route = otprior.ot_window_mass(64, n, rho, certified=True, return_route=True)
    b = otprior.ot_window_mass(64, n, rho, certified=True, method="bounds")
    assert route == "exact" and b.lo <= e.lo <= e.hi <= b.hi
    assert e.hi - e.lo < 1e-10 * e.hi < 1e-6 * (b.hi - b.lo)
    assert otprior.ot_window_mass(64, 10**4 + 1, rho, certified=True, return_route=True)[1] == "bounds"


@pytest.mark.parametrize("rho", [1e-300, 0.5, 1 - 2**-52])
def test_extreme_lengths_answer_with_the_float_inside_the_enclosure(rho):
    """n = 2^53 - 1, 2^53 + 1, 1e300 as a float and as an object array, W = 1 and n - 1: every call answers,
    the float lies in the certified enclosure, and Theorem 4(iii)'s bound and the dilution bound hold it."""
    for n in (2**53 - 1, 2**53 + 1, 1e300, np.array([int(1e300)], dtype=object)):
        top = int(np.ravel(n)[0]) - 1
        for W in (1, top):
            f = otprior.ot_window_mass(W, n, rho)
            e = otprior.ot_window_mass(W, n, rho, certified=True)
            assert np.all((e.lo <= f) & (f <= e.hi)), (W, n, rho, f, e)
            assert np.all(otprior.ot_window_mass_bound(W, n, rho) >= e.lo)
            assert np.all(otprior.ot_dilution_bound(W, n, rho, 0.0).bound >= e.lo)


def test_the_exact_double_route_stays_inside_lemma_4_2s_proved_bounds():
    # the exact route's sums rounded 1/4096 at rho = 1e-300 two ulps above H_W n^(rho - 1), and 3/10001 one ulp
    # below W/n (outside the certified enclosure of the bounds route); both are clipped now
    for W, n in [(1, 4096), (3, 4096), (1, 10001), (3, 10001), (7, 16384), (1, 65536)]:
        for rho in (1e-300, 1e-17):
            v = otprior.ot_window_mass(W, n, rho)
            assert W / n <= v <= otprior.ot_window_mass_bound(W, n, rho)
            e = otprior.ot_window_mass(W, n, rho, certified=True)
            assert e.lo <= v <= e.hi, (W, n, rho, v, e)
