"""Theorem 15j(vi) (``proofs/closed_form_tails.md``): a kept range summed term by term where Theorem 15h's pieces would
be narrow, and Theorem 15d(i)'s interval bounds compiled once per tree (the same bits as the node-by-node rules).

References are independent: closed forms and Euler-Maclaurin in mpmath (private context), and the interval rules as
they were before their compilation, loaded from git."""

import functools
import math

import flint
import mpmath
import numpy as np
import pytest

import otprior.encodings._bias_tail as tail
from otprior._balls import arb_precision
from otprior.encodings import Bias
from otprior.encodings.bias import _anchored_float, _compiled, _derivative_trees, _numpy_fns, _rounding_of_b
from tests._git_module import module_at
from tests.test_bias_anchored import _sqrt_masses, _sqrt_sum_over_last

BEFORE = "cdeccc27ba75e16deaac48ed9054e2548df09796"  # the node-by-node interval rules
BIG = int(1e300)


def _parts(text):
    B = Bias(text)
    d, b = B._sym
    return B, b, d, _compiled(b, d)


@pytest.mark.parametrize("K, c", [(72480, 99999), (908579, 999999)])
def test_the_kept_sum_term_by_term_against_euler_maclaurin(K, c):
    """sqrt(d) on the kept ranges of W = 1e5, n = 1e6 (27520 terms: Theorem 15h needed 5504 pieces; 91421: 12 passes of
    2^13), against Euler-Maclaurin in closed form (mpmath; its own remainder about 1/(11520 s^4), 2e-14 at K = 72480):
    within the route's estimate, which is itself within 2^-38."""
    B, b, d, tree = _parts("sqrt(d)")
    fns = _numpy_fns(b, d)
    assert tail._direct_first(fns, K, c)
    got = tail._direct_kept_log(fns[0], K, c)
    assert got is not None and got[1] <= 2.0**-40
    ctx = mpmath.MPContext()
    ctx.dps = 30
    ref = float(ctx.log(_sqrt_sum_over_last(ctx, c, K)))
    assert abs(got[0] - ref) <= got[1] + 3e-14 * abs(ref), (got, ref)


def test_the_top_term_read_in_long_double_leaves_no_common_error():
    """b(c) read in double carries a rounding that every term b(k) - b(c) shares (sqrt(999999) in double is 4.4e-14
    below it): with b(c) as a double-double from long double (where numpy has one) the kept sum of sqrt(d) on
    [908579, 999999] is within 4e-15 of Euler-Maclaurin in closed form (mpmath); with the double reading, 4.4e-14."""
    if np.finfo(np.longdouble).nmant < 60:
        pytest.skip("long double is double here")
    B, b, d, tree = _parts("sqrt(d)")
    K, c = 908579, 999999
    bc = tail._b_top(np.sqrt, c)
    assert bc is not None and bc[1] != 0.0
    got = tail._direct_kept_log(np.sqrt, K, c, bc)
    ctx = mpmath.MPContext()
    ctx.dps = 30
    ref = float(ctx.log(_sqrt_sum_over_last(ctx, c, K)))
    assert abs(got[0] - ref) <= 4e-15, (got[0] - ref)
    assert abs(tail._direct_kept_log(np.sqrt, K, c)[0] - ref) > 2e-14  # the test can tell the two apart


def test_passes_carry_a_larger_term_found_later():
    """b(k) = -k/1000 from the top down: every pass holds a larger term than the ones before (the carried sum is
    rescaled 8 times); against the geometric sum's closed form log(expm1(N/1000)/expm1(1/1000))."""
    K, c = 10**6, 10**6 + 8 * 8192 + 17
    got = tail._direct_kept_log(lambda k: -k / 1000.0, K, c)
    ctx = mpmath.MPContext()
    ctx.dps = 30
    N = c - K + 1
    ref = float(ctx.log(ctx.expm1(ctx.mpf(N) / 1000) / ctx.expm1(ctx.mpf(1) / 1000)))
    assert got is not None and abs(got[0] - ref) <= got[1] * abs(ref) + 1e-15 * abs(ref), (got, ref)


def test_window_mass_at_1e5_1e6_is_answered_term_by_term_within_2_38():
    """sqrt(d) at W = 1e5, n = 1e6: both sides by Theorem 15j(vi) (the window side was halved four times by Theorem 15l
    before), within 2^-38 of the closed-form Euler-Maclaurin reference; the polynomial route is not asked."""
    B, b, d, tree = _parts("sqrt(d)")
    m, D = B.window_mass(10**5, 10**6), B.distant_mass(10**5, 10**6)
    rm, rD = _sqrt_masses(10**5, 10**6, 40)
    assert abs(m - rm) <= 2.0**-38 * rm and abs(D - rD) <= 2.0**-38 * rD, (m, rm, D, rD)
    real = tail._polynomial_kept_log
    try:
        tail._polynomial_kept_log = None  # a call would raise: the term-by-term sums answer first
        assert _anchored_float(b, d, tree, 10**5, 10**6) == (m, D)
    finally:
        tail._polynomial_kept_log = real


def test_large_b_and_cancellation_inside_b_are_not_summed_in_double():
    """|b| = 31623 at 1e9 (4 |b| eps above 2^-40) is left to the polynomial; a cancellation inside b (1e6 log(1+d) -
    1e6 log(2+d), running error 1e-10) makes the term-by-term sum decline and the side is answered within its bound
    (checked against mpmath) or not at all."""
    B, b, d, tree = _parts("sqrt(d)")
    assert not tail._direct_first(_numpy_fns(b, d), 10**9 - 3000, 10**9 - 1)
    text = "1000000*log(1+d) - 1000000*log(2+d) + sqrt(d)"
    B, b, d, tree = _parts(text)
    fns = _numpy_fns(b, d)
    a, c = 90000, 99999
    assert tail._direct_first(fns, a, c)  # the cost test passes: the estimate must refuse it
    b_err = functools.partial(_rounding_of_b, b, d)
    assert b_err(a, c) > 2.0**-38
    got = tail.anchored_log_sum(tree, a, c, 200, fns, _derivative_trees(b, d, 3), b_err)
    if got is None:
        return
    ctx = mpmath.MPContext()
    ctx.dps = 40

    def f(k):
        return 10**6 * (ctx.log(1 + ctx.mpf(k)) - ctx.log(2 + ctx.mpf(k))) + ctx.sqrt(k)

    top = f(c)
    ref = ctx.log(ctx.fsum(ctx.exp(f(k) - top) for k in range(c - 4000, c + 1)))  # the rest is below e^-80 of it
    assert abs(got[0] - float(ref)) <= got[1] and got[1] <= 2.0**-38


def test_a_value_that_is_not_finite_declines():
    B, b, d, tree = _parts("sqrt(d)")
    assert tail._direct_kept_log(lambda k: np.where(k == 5000.0, np.nan, np.sqrt(k)), 4000, 9000) is None
    assert tail._direct_kept_log(lambda k: np.where(k == 5000.0, np.inf, np.sqrt(k)), 4000, 9000) is None


_TEXTS = ["-0.7*log(1+d) - 0.01*sqrt(d)", "sqrt(d)", "exp(d/1000)", "-exp(d)", "2*cos(pi*d/3 + 1)",
          "-1.2*log(1+d) + 0.5*sin(d)", "-1.1*log(d+1) + exp(-exp(d/1000))", "d**0.3*log(2+d)", "-(d/10000)**80",
          "1/(1+d)", "(d+2)**(-3)", "-log(log(d+3))", "d**d", "(1+d)**(sqrt(2))", "-d**3/1e40 + log(d+1)"]


@pytest.mark.parametrize("texts", [_TEXTS[:3] + _TEXTS[12:13], pytest.param(_TEXTS, marks=pytest.mark.slow)],
                         ids=["four", "all"])
def test_the_compiled_interval_bounds_are_the_bits_of_the_node_by_node_rules(texts):
    """Theorem 15d(i)'s bounds from the compiled program against the rules as they were evaluated node by node (git),
    for the trees of b and b''' of 15 biases, 4 in the default run (monotone functions at the ends, products by constants
    and by d, powers, sin/cos, exp beyond 2^1100, d**d), points and ranges from 0 to 1e300, at 89 and 1100 bits: every
    end the same exact point, or both not bounded, or both raising."""
    before = module_at(BEFORE, "otprior/encodings/_bias_tail.py", "otprior.encodings._bias_tail_interval_before",
                       "otprior.encodings")
    trees = []
    for text in texts:
        B, b, d, tree = _parts(text)
        trees.append(tree)
        third = _derivative_trees(b, d, 3)
        if third is not None:
            trees.append(third[1])
    ends = [0, 1, 4095, 999990, 2**53 + 3, 10**18, 10**299, BIG]
    ranges = [(x, y) for x in ends for y in ends if x <= y]

    def run(fn, tree, x, y):
        try:
            return tuple(None if v is None else (v.mid().man_exp(), v.rad()) for v in fn(tree, x, y))
        except (ValueError, ZeroDivisionError, ArithmeticError) as exc:
            return type(exc).__name__

    count = 0
    for bits in (89, 1100):
        with arb_precision(bits):
            for tree in trees:
                for x, y in ranges:
                    assert run(tail._interval, tree, x, y) == run(before._interval, tree, x, y), (tree, x, y, bits)
                    count += 1
    assert count > 200
    assert math.isfinite(float(tail._interval(trees[0], 64, BIG)[1]))


def test_theorem_15j_without_a_negligible_term():
    """``sqrt(d) + exp(-exp(d/1000))``: Theorem 15j's Cauchy box around a kept range far out is unbounded for the second
    term (``exp(-exp(z/1000))`` once ``Im z > 500 pi``) although the term is below every double there; Theorem 15k drops it
    inside the anchored route now (``phi`` moved by at most ``2^-59``), which declined before (the call fell to routes
    taking 76 ms); the answer against the certified enclosure (Theorem 15, Arb)."""
    B = Bias("sqrt(d)+exp(-exp(d/1000))")
    d, b = B._sym
    got = _anchored_float(b, d, _compiled(b, d), 10**5, 10**6)
    assert got is not None
    enc = B.mass_enclosures(10**5, 10**6)
    mid = 0.5 * (enc.window_mass.lo + enc.window_mass.hi)
    assert abs(got[0] - mid) <= 2.0**-38 * mid and got[1] == 1.0


def test_largest_half_width_for_a_vanishing_third_derivative_is_immediate():
    """Far from a narrow bump the bound of b''' is about 2^-9e6: the exact integer root of 2^(9e6) took minutes (an
    independent review found calls hanging over 40 s); every half-width up to 2^1000 (beyond any range) qualifies."""
    assert tail._largest_h(flint.arb(2) ** -(10**6), -41, 3) >= 1 << 997
    assert tail._largest_h(flint.arb(2) ** -300, -41, 3) == tail._iroot((1 << 259) // 1, 3)  # the exact root below


def test_a_narrow_bump_far_from_the_range_answers_at_once():
    """``12.5*exp(-((d-999999)/1)**2)`` at W = 5e5, n = 1e6 hung in the root above; against the bump's terms summed in
    mpmath (every other term is e^0)."""
    ctx = mpmath.MPContext()
    ctx.dps = 40
    W, n = 500000, 10**6
    bump = ctx.fsum(ctx.expm1(ctx.mpf(25) / 2 * ctx.exp(-((ctx.mpf(k) - 999999) ** 2))) for k in range(999950, n))
    m_ref = W / (n + bump)
    assert abs(Bias("12.5*exp(-((d-999999)/1)**2)").window_mass(W, n) - m_ref) <= 2.0**-38 * m_ref
