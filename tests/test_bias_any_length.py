"""A user's Bias at any length (Theorem 13, proofs/closed_form_tails.md) and verdicts that check
the expression on the whole half-line."""

import math

import mpmath
import pytest
import sympy as sp

import otprior
from otprior import classify
from otprior.encodings import get
from otprior.encodings.bias import _tail_sum_arb

d = sp.Symbol("d", positive=True)


def _f(ctx, x):
    return ctx.exp(-ctx.mpf("0.7") * ctx.log(1 + x) - ctx.mpf("0.01") * ctx.sqrt(x))


def test_monotone_tail_encloses_an_independent_euler_maclaurin_sum():
    """Theorem 13's bracket [int, f(N) + int] (Arb integration after b' < 0 is proved) contains
    mpmath's own Euler–Maclaurin summation (sumem, 30 digits, private context)."""
    b = -0.7 * sp.log(1 + d) - 0.01 * sp.sqrt(d)
    ctx = mpmath.MPContext()
    ctx.dps = 30
    for N, n in ((1000, 10**9), (5000, 10**6)):
        ball = _tail_sum_arb(b, d, N, n)
        ref = ctx.sumem(lambda x: _f(ctx, x), [N, n - 1])
        lo, hi = float(ball.lower()), float(ball.upper())
        assert lo <= float(ref) <= hi
        assert hi - lo <= 1.01 * float(_f(ctx, N)) + 1e-12


def test_tail_refuses_what_it_cannot_prove():
    assert _tail_sum_arb(-sp.log(1 + d) + sp.sin(d), d, 1000, 10**7) is None  # not decreasing
    assert _tail_sum_arb(-2 * sp.log(1 + d) + sp.Abs(sp.sin(d)), d, 1000, 10**7) is None  # unsupported function


@pytest.mark.parametrize(
    "expr, bad",
    [
        ("-2*log(d+1)+1/(d-100)", "{100}"),
        pytest.param("-3*log(d+1)+log(100-d)", "Interval(100, oo)", marks=pytest.mark.slow),
        pytest.param("-2*log(d+1)+log(cos(d/50))", "", marks=pytest.mark.slow),
    ],
)
def test_verdicts_check_the_whole_half_line(expr, bad):
    v = classify(get("bias", expr=expr))
    assert v.kind == "undecided" and "not real and finite" in v.reason and bad in v.reason
    with pytest.raises(otprior.DomainError):
        v.limit_distant_mass(8)


@pytest.mark.slow
def test_user_bias_beyond_direct_summation():
    """n = 1e9: direct head to 2^22, then Theorem 13's tail; against mpmath (direct head to 2^14,
    sumem beyond)."""
    enc = get("bias", expr="-0.7*log(1+d) - 0.01*sqrt(d)")
    ctx = mpmath.MPContext()
    ctx.dps = 30
    n, W = 10**9, 64
    head = ctx.fsum(_f(ctx, k) for k in range(W))
    mid = ctx.fsum(_f(ctx, k) for k in range(W, 1 << 14))
    rest = ctx.sumem(lambda x: _f(ctx, x), [1 << 14, n - 1])
    ref = head / (head + mid + rest)
    assert math.isclose(enc.window_mass(W, n), float(ref), rel_tol=1e-9)


def test_command_line_masses_at_any_length(capsys):
    from otprior.cli import main

    code = main(["mass", "kerple-power", "--r1", "0.05", "--r2", "0.4", "--window", "64", "--n", "1e3", "1e300"])
    out = capsys.readouterr().out
    assert code == 0 and "n = 1e+300" in out and "0.99104907289525" in out


@pytest.mark.slow
def test_command_line_user_bias_beyond_direct_summation(capsys):
    from otprior.cli import main

    code = main(["mass", "bias", "--expr", "-0.7*log(1+d) - 0.01*sqrt(d)", "--window", "64", "--n", "1e3", "1e6", "1e9"])
    out = capsys.readouterr().out
    assert code == 0 and "n = 1000000000" in out


def test_arrays_of_lengths_read_each_weight_once():
    """The vectorised route (one row of weights, tails accumulated segment by segment) agrees
    with the per-length log-sum-exp."""
    import numpy as np

    enc = get("bias", expr="-0.7*log(1+d) - 0.01*sqrt(d)")
    n = np.array([[64, 100, 5000], [20000, 100, 64]])
    m, D = enc.window_mass(64, n), enc.distant_mass(64, n)
    for idx in np.ndindex(n.shape):
        ref_m, ref_D = enc._masses(64, int(n[idx]))
        assert abs(m[idx] - ref_m) <= 1e-14 * ref_m and abs(D[idx] - ref_D) <= 1e-14 * max(ref_D, 1e-300)


def test_fire_at_any_length_by_linear_pieces():
    """FIRE with its default f or a one-head ReLU MLP is linear in u between kinks, so each piece
    is a Hurwitz-zeta sum (Theorem 14); it equals the direct log-sum-exp where both run, and
    beyond 2^22 keys it answers within the verdict's bound W e^(osc f) / n."""
    import numpy as np

    from otprior._balls import arb_precision
    from otprior.encodings import FIRE
    from otprior.encodings._base import direct_masses

    rng = np.random.default_rng(0)
    mlp = (rng.normal(size=8), rng.normal(size=8), rng.normal(size=(1, 8)), rng.normal(size=1))
    for enc in (FIRE(), FIRE(mlp=mlp, c=0.3, L=64.0)):
        for n in (1000, 50000):
            with arb_precision(128):
                m = float((enc._sum_pieces(63, n) / enc._sum_pieces(n - 1, n)).mid())
            ref = direct_masses(enc.log_weights(n), 64)[0]
            assert abs(m - ref) <= 1e-14 * ref
        grid = np.linspace(0, 1, 2001)
        osc = float(np.ptp(enc._f(grid)))
        for n in (10**7, 10**18, int(1e300)):
            m = enc.window_mass(64, n)
            assert 0.0 < m <= 64 * math.exp(osc) / n * (1 + 1e-9)


# --- Theorem 15: Euler–Maclaurin tails with derivative bounds from the expression

_SWEEP_BIASES = (
    "-0.7*log(1+d) - 0.01*sqrt(d)",
    "-1.2*log(1+d)",
    "-0.05*d",
    "-0.5*log(1+d) + 2*exp(-d/10)*sin(d/3) - 0.02*sqrt(d)",  # not monotone at the start
)


def _mp_bias(ctx, text):
    """The bias as an mpmath function, from its own text (no otprior code)."""
    env = {"log": ctx.log, "sqrt": ctx.sqrt, "exp": ctx.exp, "sin": ctx.sin, "cos": ctx.cos}
    code = compile(text, "<bias>", "eval")  # the test's own constant strings, not user input
    return lambda x: eval(code, {"__builtins__": {}}, {**env, "d": x})  # noqa: S307


@pytest.mark.parametrize("text", _SWEEP_BIASES)
def test_euler_maclaurin_tail_contains_direct_sums(text):
    """At n = 3000 the certified route (64 Arb terms + Theorem 15's tail) contains mpmath's direct sum
    of every term (40 digits, private context); the enclosure is at most 2^-50 wide."""
    enc = get("bias", expr=text)
    ctx = mpmath.MPContext()
    ctx.dps = 40
    b = _mp_bias(ctx, text)
    n, W = 3000, 16
    w = [ctx.exp(b(ctx.mpf(k))) for k in range(n)]
    S_W, S = ctx.fsum(w[:W]), ctx.fsum(w)
    out = enc.mass_enclosures(W, n)
    linear = text == "-0.05*d"  # alpha + beta d: the geometric closed form (Theorem 16)
    assert out.route.startswith("geometric" if linear else "Euler-Maclaurin") and not out.exact
    assert out.window_mass.lo <= float(S_W / S) <= out.window_mass.hi
    assert out.distant_mass.lo <= float((S - S_W) / S) <= out.distant_mass.hi
    assert out.window_mass.hi - out.window_mass.lo <= 2.0**-50


def test_bias_any_length_float_and_certified_agree():
    """n = 1e7, 1e18 and 1e300: the float route is within 8 ulps of the certified midpoint, and the
    enclosure contains an independent reference at 1e7 (mpmath: 4096 direct terms plus sumem)."""
    ctx = mpmath.MPContext()
    ctx.dps = 30
    text = "-0.7*log(1+d) - 0.01*sqrt(d)"
    enc = get("bias", expr=text)
    b = _mp_bias(ctx, text)
    N = 4096
    head = ctx.fsum(ctx.exp(b(ctx.mpf(k))) for k in range(N))
    S_W = ctx.fsum(ctx.exp(b(ctx.mpf(k))) for k in range(64))
    tail = ctx.sumem(lambda x: ctx.exp(b(x)), [N, 10**7 - 1])
    ref = float(S_W / (head + tail))
    for n in (10**7, 10**18, int(1e300)):
        m = enc.window_mass(64, n)
        out = enc.mass_enclosures(64, n)
        assert abs(m - out.window_mass.mid) <= 8 * math.ulp(m), (n, m, out.window_mass)
        if n == 10**7:
            assert out.window_mass.lo <= ref <= out.window_mass.hi


def test_euler_maclaurin_refuses_an_oscillating_tail():
    """sin(d) without decay: Theorem 15's remainder does not shrink; the certified route refuses
    (DomainError naming n) rather than return a wide or wrong ball."""
    enc = get("bias", expr="-1.2*log(1+d) + 0.5*sin(d)")
    with pytest.raises(otprior.DomainError, match="n="):
        enc.mass_enclosures(64, 10**9)


def test_mass_enclosures_stay_in_the_unit_interval_and_refuse_overflow_by_name():
    from otprior.encodings import Bias

    r = Bias("-1.2*log(1+d)").mass_enclosures(10**300 - 1, 10**300)
    assert 0.0 <= r.window_mass.lo <= r.window_mass.hi <= 1.0 and r.distant_mass.lo >= 0.0
    with pytest.raises(otprior.DomainError, match="^bias="):
        Bias("exp(exp(d))").mass_enclosures(1, 10)
