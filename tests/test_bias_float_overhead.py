"""The float routes of a user's Bias with less Python and numpy overhead (``proofs/closed_form_tails.md``, Theorem
15i): the helpers return the same bits as the module at commit ``cdeccc2`` (loaded from git), the tail bound's one-piece
rest (Theorem 15i(iii)) and the bisection at the middle of a group's ``u``-range bound what they claim against
independent references (numpy's direct sum in double, mpmath in a private context)."""

import math

import mpmath
import numpy as np
import pytest

import otprior.encodings._bias_tail as tail
import otprior.encodings.bias as bias_mod
from otprior._balls import arb_precision
from otprior.encodings import Bias
from tests._git_module import module_at

BIG = int(1e300)


@pytest.fixture(scope="module")
def base_tail():
    return module_at(_base_commit(), "otprior/encodings/_bias_tail.py", "otprior.encodings._bias_tail_cdeccc2",
                     "otprior.encodings")


def _base_commit():
    import subprocess
    from pathlib import Path

    try:
        return subprocess.run(["git", "rev-parse", "cdeccc2"], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("commit cdeccc2 is not available (no git history)")


def _fns(text):
    d, b = Bias(text)._sym
    return bias_mod._numpy_fns(b, d), bias_mod._compiled(b, d)


TEXTS = ["-1.1*log(1+d)", "-0.7*log(1+d) - 0.01*sqrt(d)", "-0.02*sqrt(d)", "-1.1*log(d+1) + exp(-exp(d/1000))",
         "sqrt(d)", "-2*log(1+d) + sin(log(1+d))"]


def test_pieces_and_rules_same_bits(base_tail):
    """``_pieces`` (its own linspace and the cut of steep pieces at once), the two Gauss-Legendre rules from one evaluation
    of ``b`` and ``_logsumexp`` against the functions as they were, on random ranges of ``u`` (steep ranges cut, and random
    ones)."""
    rng = np.random.default_rng(7)
    cut = 0
    for text in TEXTS:
        f = _fns(text)[0][0]
        for l0, l1 in [(8.3, 22.0), (8.3, 41.4), (math.log(10**8), math.log(10**9))] + [
                tuple(sorted(rng.uniform(0.0, 700.0, 2))) for _ in range(3)]:
            old, new = base_tail._pieces(f, l0, l1), tail._pieces(f, l0, l1)
            assert (old is None) == (new is None), (text, l0, l1)
            if old is None:
                continue
            assert old.tobytes() == new.tobytes(), (text, l0, l1)
            cut += old.size > math.ceil(l1 - l0) + 1
            pair = tail._gl_log_pair(f, new)
            rules = (base_tail._gl_log(f, old, base_tail._GL16), base_tail._gl_log(f, old, base_tail._GL8))
            assert [float(x).hex() for x in pair] == [float(x).hex() for x in rules], (text, l0, l1)
    assert cut > 0  # the cut of steep pieces was reached
    for v in (rng.normal(0, 300, 50), np.array([-np.inf, -np.inf]), np.array([3.0, -np.inf]), np.array([np.nan, 1.0])):
        assert float(tail._logsumexp(v)).hex() == float(base_tail._logsumexp(v)).hex()


@pytest.mark.parametrize("text, a, c, ref", [
    ("-0.7*log(1+d) - 0.01*sqrt(d)", 4096, BIG - 1, -math.inf),  # a dropped tail: the one-piece rest
    ("-0.7*log(1+d) - 0.01*sqrt(d)", 4096, 10**18 - 1, -math.inf),  # groups bisected at the middle of u
    ("-1.1*log(1+d)", 10**8, 10**9 - 1, 2.0),
    ("-0.05*sqrt(d)", 4096, 10**12, -math.inf),
], ids=["dropped-tail", "bisected", "log", "sqrt"])
def test_float_tail_log_same_bits(base_tail, text, a, c, ref):
    """Theorem 15's float on long ranges: the same double as before (the proof's new cover and groups change no value)."""
    fns, tree = _fns(text)
    d, b = Bias(text)._sym
    d3 = bias_mod._derivative_trees(b, d, 3)
    old = base_tail.float_tail_log(fns, a, c, ref, d3, tree)
    tail._PROOFS.clear()
    new = tail.float_tail_log(fns, a, c, ref, d3, tree)
    assert old is not None and float(old).hex() == float(new).hex()


def test_the_tail_bound_with_one_rest_piece_bounds_the_sum():
    """Theorem 15i(iii) with the cover ``[k0, k0 e^8]``, ``[k0 e^8 + 1, c]``: an upper bound of the tail, from 3
    interval bounds (the doubling pieces took more), against the sum itself in double (numpy, every term to 1e6;
    ``e^{-0.5 sqrt(k)}`` beyond is below ``e^-500``)."""
    _, tree = _fns("-0.5*sqrt(d)")
    k0, c = 200, 10**12
    ks = np.arange(k0, 10**6, dtype=float)
    v = -0.5 * np.sqrt(ks)
    true = float(v.max() + np.log(np.sum(np.exp(v - v.max()))))
    calls = []
    real = tail._interval

    def counting(*args):
        calls.append(args[1:])
        return real(*args)

    tail._interval = counting
    try:
        with arb_precision(96):
            bound = tail._dead_tail_log(tree, k0, c, true + 12.0)  # the whole range's bound: true + 23
    finally:
        tail._interval = real
    assert bound is not None and true <= bound <= true + 12.0
    assert len(set(calls)) == 3  # the ranges bounded: the whole (too wide), the first piece, the rest
    with arb_precision(96):
        tight = tail._dead_tail_log(tree, k0, c, true + 5.0)  # a limit the first piece (true + 9) cannot meet
    assert tight is None or true <= tight


def test_bisection_at_the_middle_of_u_bounds_the_actual_error():
    """Theorem 15i(i)+(ii) over pieces cut fine at their end (``_pieces`` on ``-0.3 sqrt(d)``), with a budget that forces
    bisection: the bound covers the rule's and the remainder's actual error against mpmath's direct sum."""
    text = "-0.3*sqrt(d)"
    (b0, *_), tree = _fns(text)
    a, K = 16, 2000
    edges = tail._pieces(b0, math.log(a), math.log(K))
    assert edges.size > 6  # cut: the bisection has groups of unequal u to choose from
    ctx = mpmath.MPContext()
    ctx.dps = 40

    def f(x):
        return ctx.exp(-0.3 * ctx.sqrt(x))

    exact = ctx.fsum(f(ctx.mpf(k)) for k in range(a, K + 1))
    x, w = tail._GL16
    gl = 0
    for u0, u1 in zip(edges[:-1], edges[1:], strict=True):
        h = (ctx.mpf(float(u1)) - ctx.mpf(float(u0))) / 2
        for xi, wi in zip(x, w, strict=True):
            u = ctx.mpf(float(u0)) + h * (1 + ctx.mpf(float(xi)))
            gl += h * ctx.mpf(float(wi)) * f(ctx.exp(u)) * ctx.exp(u)
    A, Kx = ctx.mpf(a), ctx.exp(ctx.mpf(float(edges[-1])))
    d1 = [ctx.diff(f, t, 1) for t in (A, Kx)]
    d3 = [ctx.diff(f, t, 3) for t in (A, Kx)]
    formula = gl + (f(A) + f(Kx)) / 2 + (d1[1] - d1[0]) / 12 - (d3[1] - d3[0]) / 720
    # Euler-Maclaurin to the real end e^{u_P} = K (to rounding): the sum to K
    with arb_precision(80):
        whole = tail.proved_error_log(tree, edges, 1e9)
        split = tail.proved_error_log(tree, edges, whole - 1.0)  # too small for one group: bisected once
    assert whole is not None and split is not None and split < whole - 1.0
    actual = abs(formula - exact)
    assert actual > 1e-14 * exact
    assert actual <= ctx.exp(split) and actual <= ctx.exp(whole)


# Theorem 15's float (a pure -1.1 log(1+d) takes the log-distance route); 15f's sum of g
@pytest.mark.parametrize("text", ["-1.1*log(1+d) - 0.001*log(2+d)", "-1.2*log(1+d) + 0.5*sin(d)"])
def test_distant_mass_reads_the_sums_window_mass_formed(monkeypatch, text):
    """The long-range float of both sides is formed once for ``window_mass`` and read again by
    ``distant_mass`` at the same ``(W, n)`` (the twisted route passes a new slice of its functions each time: they are
    compared one by one); each value is the one a cold call gives (memo cleared), and the two masses sum to 1 within
    rounding."""
    B = Bias(text)
    W, n = 10**8, 10**9
    tail._PROOFS.clear()  # the proofs and the floats' answers
    formed = []
    real = tail._long_range_log_uncached

    def counting(*args):
        formed.append(args[1:3])
        return real(*args)

    monkeypatch.setattr(tail, "_long_range_log_uncached", counting)
    m = B.window_mass(W, n)
    first = len(formed)
    D = B.distant_mass(W, n)
    assert first >= 2 and len(formed) == first  # both sides formed once, then read
    tail._PROOFS.clear()
    assert B.distant_mass(W, n) == D and len(formed) > first
    assert abs(m + D - 1) <= 4e-16


def test_hostile_end_values_cut_as_before(base_tail):
    """``_pieces`` on biases whose end values are NaN, ``-inf`` inside or everywhere, or overflow: the few-ends path on
    Python floats keeps, cuts or declines exactly as the numpy path did."""
    import warnings

    import sympy

    d = sympy.Symbol("d", positive=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for text in ["log(sin(d)**2)", "-exp(d)", "log(d - 5)", "-exp(exp(d))", "log(cos(d))", "-d**2"]:
            f = bias_mod._numpy_fns(sympy.sympify(text, locals={"d": d}), d)[0]  # sympy directly: Bias refuses some
            for l0, l1 in [(0.0, 5.0), (0.1, 30.0), (1.0, 1.5), (600.0, 700.0), (2.0, 9.0)]:
                old, new = base_tail._pieces(f, l0, l1), tail._pieces(f, l0, l1)
                assert (old is None) == (new is None), (text, l0, l1)
                assert old is None or old.tobytes() == new.tobytes(), (text, l0, l1)


def test_the_clipped_exponentials_are_the_balls_arb_forms():
    """``e^(+-2^1100)`` kept per precision (``_iexp``'s clipped ends) equal Arb's own at that precision, and match
    mpmath's value in magnitude (private context, 64 bits: the exponent -2^1100 log2 e to 1e-15 relative)."""
    import flint

    for prec in (96, 200):
        with arb_precision(prec):
            tail._SATURATED.clear()
            for v in (tail._SATURATE, -tail._SATURATE):
                fresh = tail._exp_point(v)
                kept = tail._exp_point(flint.arb(v))  # a new ball with the same exact value: read from the memo
                assert kept is fresh
                with tail._more_bits(1109):  # log2(2^1100) = 1101 bits, plus 8
                    direct = v.exp()
                assert fresh.mid().man_exp() == direct.mid().man_exp() and fresh.rad() == direct.rad()
    ctx = mpmath.MPContext()
    ctx.prec = 64
    with arb_precision(96):
        lo = tail._exp_point(-tail._SATURATE)
        man, exp = lo.mid().man_exp()
        ref_log2 = -ctx.mpf(2) ** 1100 / ctx.ln2  # log2 of the true value
        assert abs(ctx.log(abs(int(man)), 2) + int(exp) - ref_log2) < 1e-15 * abs(ref_log2)  # to mpmath's 64 bits


def test_negligible_terms_proved_on_a_wider_range_are_reused(monkeypatch):
    """Theorem 15k(ii) on a proved superset: the distant side ``[W, n - 1]`` proves ``exp(-exp(d/1000))`` within
    ``2^-60`` on ``[4096, n - 1]``, the window side ``[4096, W - 1]`` then drops it with no interval bound; the reduced
    expressions are those of a fresh call on each range alone, and a term that is not small at 4096 is proved on its own
    range only (the wider bound would fail)."""
    B = Bias("-1.1*log(d+1) + exp(-exp(d/1000))")
    d, b = B._sym
    W, n = 10**8, 10**9
    calls = []
    real = bias_mod._interval

    def counting(tree, x0, x1):
        calls.append((x0, x1))
        return real(tree, x0, x1)

    monkeypatch.setattr(bias_mod, "_interval", counting)
    bias_mod._without_negligible_terms.cache_clear()
    far = bias_mod._without_negligible_terms(b, d, W, n - 1)
    near = bias_mod._without_negligible_terms(b, d, 4096, W - 1)
    assert calls == [(4096, n - 1)]  # one bound, on the wider range; none for the window side
    bias_mod._without_negligible_terms.cache_clear()
    assert not bias_mod._NEGLIGIBLE_RANGES  # cleared with the cache: a first call proves afresh
    monkeypatch.setattr(bias_mod, "_FLOAT_HEAD", 10**12)  # no wider range: each proved on its own
    assert bias_mod._without_negligible_terms(b, d, W, n - 1) == far
    bias_mod._without_negligible_terms.cache_clear()
    assert bias_mod._without_negligible_terms(b, d, 4096, W - 1) == near
    assert far is not None and far == near and not far.has(bias_mod.import_sympy().exp)  # -1.1 log(d + 1) on both
    # alive near 4096 (e^{-e^{d/10^5}} is 0.96 there): proved on [W, n - 1] only, where it is below e^{-1000}
    bias_mod._without_negligible_terms.cache_clear()
    calls.clear()
    monkeypatch.setattr(bias_mod, "_FLOAT_HEAD", 4096)
    B2 = Bias("-1.1*log(d+1) + exp(-exp(d/100000))")
    d2, b2 = B2._sym
    assert bias_mod._without_negligible_terms(b2, d2, W, n - 1) is not None
    assert calls == [(W, n - 1)]
    bias_mod._without_negligible_terms.cache_clear()


def test_the_tail_bound_guessed_too_wide_is_left_for_last(monkeypatch):
    """``_dead_tail_log`` with ``b`` in double: where ``log(c - k0 + 1) + b(k0)`` is above the limit the pieces are bounded
    first (one interval bound fewer for -0.5 sqrt(d) to 1e300), and every answer, met or not, is the same
    double as without the guess (the whole range is bounded after all where the pieces do not meet the limit)."""
    fns, tree = _fns("-0.5*sqrt(d)")
    calls = []
    real = tail._interval

    def counting(*args):
        calls.append(args[1:])
        return real(*args)

    monkeypatch.setattr(tail, "_interval", counting)
    for k0, c, limit in [(200, BIG, -2.9 + 12.0), (200, 10**12, -2.9 + 12.0), (200, 10**12, 2.1), (200, 10**12, 40.0),
                         (10**6, BIG, -400.0), (16, 10**6, -50.0)]:
        with arb_precision(96):
            calls.clear()
            plain = tail._dead_tail_log(tree, k0, c, limit)
            n_plain = len(set(calls))
            calls.clear()
            guessed = tail._dead_tail_log(tree, k0, c, limit, fns[0])
            n_guessed = len(set(calls))
        assert plain == guessed, (k0, c, limit, plain, guessed)
        assert n_guessed <= n_plain
        if (k0, c) == (200, BIG):  # the whole range (690 + b(200)) is far above the limit; the pieces meet it
            assert plain <= limit and n_guessed == n_plain - 1
