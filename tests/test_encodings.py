"""Encodings and their classification (Theorem 11), against direct computation of D_n."""

import math

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

import otprior
from otprior import DomainError, classify
from otprior.encodings import (
    CABLE,
    FIRE,
    ALiBi,
    Bias,
    CausalOT,
    KerpleLog,
    KerplePower,
    LogDistance,
    NoPE,
    RoPE,
    T5Buckets,
    YaRN,
)

d = sp.Symbol("d")


def direct_D(encoding, W, n):
    """D_n(W) by log-sum-exp over the encoding's own bias, independent of any closed form."""
    b = np.asarray(encoding.bias(np.arange(n, dtype=float), n), dtype=float)
    return float(np.exp(logsumexp(b[W:]) - logsumexp(b)))


BOUNDED = [ALiBi(0.3), KerpleLog(1.5, 0.5), KerplePower(0.5, 0.7), CABLE(0.05), LogDistance(1.6), Bias(-2 * sp.log(d + 1))]
DILUTING = [
    (NoPE(), 1.0),
    (RoPE(2.0), 1.0),
    (YaRN(8.0, 2.0), 1.0),
    (T5Buckets(values=np.linspace(0, -3, 32)), 1.0),
    (FIRE(), None),  # a bound, not a rate: see test_fire_window_mass_bound
    (KerpleLog(0.9, 1.0), 0.1),
    (LogDistance(0.5), 0.5),
    (CausalOT(0.5), 0.5),
    (CABLE(0.0), 1.0),
]


@pytest.mark.parametrize("enc", BOUNDED, ids=repr)
def test_bounded_verdicts_agree_with_direct_computation(enc):
    v = classify(enc)
    assert v.bounded is True and v.kind == "bounded" and v.reason
    W = 8
    limit = v.limit_distant_mass(W)
    assert 0 < limit < 1
    values = [direct_D(enc, W, n) for n in (10**2, 10**4, 10**6)]
    # D_n increases to D_oo < 1 and approaches it
    assert values[0] <= values[1] * (1 + 1e-12) and values[1] <= values[2] * (1 + 1e-12)
    assert values[2] <= limit * (1 + 1e-9)
    assert limit - values[2] < max(limit - values[0], 1e-15) / 2 or limit - values[2] < 1e-12


@pytest.mark.parametrize("enc, exponent", DILUTING, ids=lambda x: repr(x) if not isinstance(x, float) else "")
def test_diluting_verdicts_agree_with_direct_computation(enc, exponent):
    v = classify(enc)
    assert v.bounded is False and v.kind == "diluting" and v.reason and v.rate
    assert v.limit_distant_mass(8) == 1.0
    ns = [10**3, 10**5] if isinstance(enc, CausalOT) else [10**4, 10**6]
    m = [1 - direct_D(enc, 8, n) for n in ns]
    assert m[1] < m[0]
    if exponent is None:
        return
    fitted = -math.log(m[1] / m[0]) / math.log(ns[1] / ns[0])
    assert fitted == pytest.approx(exponent, abs=0.08)  # the stated rate's exponent


@pytest.mark.parametrize("enc", [e for e in BOUNDED] + [e for e, _ in DILUTING], ids=repr)
def test_closed_form_distant_mass_equals_direct_sum(enc):
    for n in (8, 100, 5000):
        assert enc.distant_mass(8, n) == pytest.approx(direct_D(enc, 8, n), rel=1e-11, abs=1e-15)


def test_closed_forms_at_large_n():
    assert ALiBi(0.25).distant_mass(4, 10**12) == pytest.approx(math.exp(-1.0), rel=1e-14)
    # KERPLE-log is the log-distance prior with exponent r1 and offset 1/r2
    k = KerpleLog(1.4, 0.25)
    with mpmath.workdps(40):
        a, o = mpmath.mpf(1.4), mpmath.mpf(4)
        ref = (mpmath.zeta(a, 16 + o) - mpmath.zeta(a, 10**15 + o)) / (mpmath.zeta(a, o) - mpmath.zeta(a, 10**15 + o))
    assert k.distant_mass(16, 10**15) == pytest.approx(float(ref), rel=1e-14)
    # T5 beyond the last bucket (d >= 113) the weight is constant: 1 - D_n = window / (A + (n - 113) c)
    t5 = T5Buckets(values=np.linspace(0, -3, 32))
    w = np.exp(t5.bias(np.arange(113, dtype=float)))
    c = math.exp(t5.values[-1])
    for n in (10**8, 10**12):
        assert 1 - t5.distant_mass(8, n) == pytest.approx(w[:8].sum() / (w.sum() + (n - 113) * c), rel=1e-12)


def test_fire_window_mass_bound():
    enc = FIRE()
    osc = 8.0  # f(x) = -8 x on [0, 1]
    for n in (10**3, 10**5, 10**6):
        assert 1 - direct_D(enc, 8, n) <= 8 * math.exp(osc) / n


def test_limits_match_independent_values():
    assert classify(ALiBi(0.3)).limit_distant_mass(8) == pytest.approx(math.exp(-2.4), rel=1e-15)
    with mpmath.workdps(30):
        assert classify(LogDistance(1.6)).limit_distant_mass(8) == pytest.approx(float(mpmath.zeta(1.6, 9) / mpmath.zeta(1.6)), rel=1e-14)
        assert classify(Bias(-2 * sp.log(d + 1))).limit_distant_mass(8) == pytest.approx(
            float(mpmath.zeta(2, 9) / mpmath.zeta(2)), rel=1e-9
        )


def test_alibi_slopes():
    for H in (1, 2, 8, 16):
        assert ALiBi.slopes(H) == pytest.approx([2 ** (-8 * (h + 1) / H) for h in range(H)])
    # a non power of two: those of 8, then every other slope of 16
    s16 = [2 ** (-8 * (h + 1) / 16) for h in range(16)]
    assert ALiBi.slopes(12) == pytest.approx([2 ** (-(h + 1)) for h in range(8)] + s16[0::2][:4])


def hf_bucket(d, num_buckets=32, max_distance=128):
    """T5's rule for a causal decoder, written out independently for the test."""
    max_exact = num_buckets // 2
    if d < max_exact:
        return d
    v = max_exact + int(math.log(d / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return min(v, num_buckets - 1)


def test_t5_buckets_follow_the_source_rule():
    from otprior.encodings import t5_bucket

    ds = np.arange(0, 2000)
    assert list(t5_bucket(ds)) == [hf_bucket(int(x)) for x in ds]
    assert T5Buckets().last_bucket_start() == 113


def test_yarn_changes_the_bound_not_the_verdict():
    y = YaRN(16.0, 1.0)
    assert y.score_bound == pytest.approx((0.1 * math.log(16) + 1) ** 2)
    assert classify(y).kind == classify(RoPE(1.0)).kind == "diluting"


@pytest.mark.parametrize(
    "expr, kind",
    [
        (-2 * sp.log(d + 1), "bounded"),
        (-sp.log(d + 1) - 2 * sp.log(sp.log(d + 3)), "bounded"),
        (-sp.log(d + 1) - sp.log(sp.log(d + 3)), "diluting"),
        (-sp.log(d + 1), "diluting"),
        (-sp.sqrt(d), "bounded"),
        (-d / 5, "bounded"),
        (sp.sin(d), "diluting"),
        (-sp.Rational(1, 2) * sp.log(d + 1), "diluting"),
    ],
)
def test_symbolic_bias_verdicts(expr, kind):
    assert classify(Bias(expr)).kind == kind


def test_bertrand_limit_is_certified_or_refused():
    v = classify(Bias(-sp.log(d + 1) - 2 * sp.log(sp.log(d + 3))))
    f = lambda x: 1 / ((x + 1) * np.log(x + 3) ** 2)  # noqa: E731
    k = np.arange(10**7, dtype=float)
    with mpmath.workdps(30):
        tail = mpmath.quad(lambda u: mpmath.exp(u) / ((mpmath.exp(u) + 1) * mpmath.log(mpmath.exp(u) + 3) ** 2), [mpmath.log(1e7), mpmath.inf])
    total = np.sum(f(k)) + float(tail)
    assert v.limit_distant_mass(16) == pytest.approx((total - np.sum(f(k[:16]))) / total, rel=1e-6)


def test_undecided_is_said_not_guessed():
    expr = -sp.log(d + 1) + sp.sin(d) * sp.log(sp.log(d + 3))
    v = classify(Bias(expr))
    assert v.kind in ("undecided", "diluting")  # never a wrong "bounded"
    if v.kind == "undecided":
        assert v.bounded is None
        with pytest.raises(DomainError):
            v.limit_distant_mass(8)


def test_callable_bias_with_asymptotic():
    enc = Bias(lambda x: -1.5 * np.log1p(x), asymptotic=-1.5 * sp.log(d))
    assert classify(enc).kind == "bounded"
    assert enc.distant_mass(8, 1000) == pytest.approx(LogDistance(1.5).distant_mass(8, 1000), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(eps=st.floats(0.01, 1.0), W=st.integers(1, 30), seed=st.integers(0, 2**32 - 1))
def test_cable_constant_increments_are_the_worst_case(eps, W, seed):
    inc = eps + np.random.default_rng(seed).exponential(scale=0.5, size=3000)
    b = -np.concatenate([[0.0], np.cumsum(inc)])
    D = float(np.exp(logsumexp(b[W:]) - logsumexp(b)))
    assert D <= classify(CABLE(eps)).limit_distant_mass(W) * (1 + 1e-12)


def test_content_bound_band():
    lo, hi = LogDistance(1.2, logit_bound=0.5).distant_mass_range(16, 4096)
    D = LogDistance(1.2).distant_mass(16, 4096)
    assert lo < D < hi
    dlo, dhi = otprior.distant_mass_bounds(16, 4096, 1.2, score_bound=0.5)
    assert lo == pytest.approx(dlo, rel=1e-8) and hi == pytest.approx(dhi, rel=1e-8)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: ALiBi(-0.1), "slope"),
        (lambda: KerpleLog(-1.0, 1.0), "r1"),
        (lambda: KerpleLog(1.0, -1.0), "r2"),
        (lambda: KerpleLog(1.0, 0.0), "r2"),
        (lambda: KerplePower(-0.5, 1.0), "r1"),
        (lambda: KerplePower(0.5, 3.0), "r2"),
        (lambda: CABLE(-0.1), "min_increment"),
        (lambda: CausalOT(1.0), "rho"),
        (lambda: LogDistance(0.0), "alpha"),
        (lambda: RoPE(-1.0), "logit_bound"),
        (lambda: YaRN(0.5, 1.0), "factor"),
        (lambda: T5Buckets(values=[0.0, 1.0]), "values"),
        (lambda: Bias(lambda x: -x), "asymptotic"),
        (lambda: classify("alibi"), "slope"),  # a name is built as encodings.get builds it: ALiBi needs a slope
        (lambda: classify("no-such-encoding"), "encoding"),
        (lambda: classify(3.0), "encoding"),
        (lambda: ALiBi(0.1).distant_mass(10, 5), "window"),
    ],
)
def test_refusals(make, name):
    with pytest.raises(DomainError) as info:
        make()
    assert info.value.parameter == name


def test_kerple_power_limits_of_slow_decays():
    """Theorem 12 (proofs/closed_form_tails.md): incomplete-gamma tails with the Euler–Maclaurin
    bracket answer slow decays that direct summation cannot reach. References: the published
    15-digit values, and for a fast decay the direct log-sum-exp of the encoding's own bias."""
    for (r1, r2), ref in (((0.05, 0.4), 0.991049072895256), ((2.0, 0.2), 0.418061067467670), ((1.0, 0.3), 0.369038376915370)):
        v = classify(KerplePower(r1, r2))
        assert v.limit_distant_mass(64) == pytest.approx(ref, abs=2e-15)
        assert "n^(1-r2)" in v.rate and "(r1 r2 S)" in v.rate
    assert 1.0 - 1e-20 <= classify(KerplePower(0.01, 0.1)).limit_distant_mass(64) <= 1.0
    fast = KerplePower(0.5, 0.7)
    assert classify(fast).limit_distant_mass(8) == pytest.approx(direct_D(fast, 8, 4000), rel=1e-12)
    for W, n in ((8, 3000), (64, 200_000), (3, 10)):  # finite lengths against direct sums
        for enc in (KerplePower(0.05, 0.4), KerplePower(0.3, 1.5), KerplePower(0.02, 2.0)):
            assert enc.distant_mass(W, n) == pytest.approx(direct_D(enc, W, n), rel=1e-12, abs=1e-300)
    # any length, O(1): the masses settle on the limit
    enc = KerplePower(0.05, 0.4)
    D = enc.distant_mass(64, [10**9, 10**18, int(1e300)])
    assert np.all(np.abs(D - 0.991049072895256) <= 2e-15)


def test_causal_ot_encoding_answers_at_any_length_inside_the_certified_enclosure():
    # beyond the exact crossover the encoding takes ot_window_mass's routes (proofs/ot_asymptotics.md)
    enc = otprior.encodings.get("causal-ot", rho=0.5)
    for n in (10**7, 10**18):
        m = enc.window_mass(64, n)
        box = otprior.ot_window_mass(64, n, 0.5, certified=True)
        assert box.lo <= m <= box.hi
        assert enc.distant_mass(64, n) == pytest.approx(1.0 - m, rel=1e-15)
        assert m <= otprior.ot_window_mass_bound(64, n, 0.5)


def test_a_bias_without_a_proved_tail_is_summed_directly_where_affordable():
    # a non-monotone bias has no Theorem 13 tail; up to the direct-sum cap it is summed term by term
    # reference: the terms in Python's math (each within a few ulps) summed exactly by math.fsum
    enc = otprior.encodings.Bias("-1.5*log(1+d) + 0.1*sin(d)")
    n, W = 100_000, 64
    weights = [math.exp(-1.5 * math.log1p(k) + 0.1 * math.sin(k)) for k in range(n)]
    ref = math.fsum(weights[:W]) / math.fsum(weights)
    assert enc.window_mass(W, n) == pytest.approx(ref, rel=1e-12)


def test_series_cap_does_not_truncate_derivatives():
    """python-flint truncates series to flint.ctx.cap terms (10 by default); the Euler–Maclaurin
    brackets read derivatives up to order 13, so the cap must be raised where they are formed: the
    13th Taylor coefficient of exp(-r1 x^r2) at x = 5 must match mpmath's (private context)."""
    import flint
    import mpmath

    from otprior._balls import arb_precision
    from otprior._tails import _odd_derivatives

    ctx = mpmath.MPContext()
    ctx.dps = 40
    r1, r2 = 0.05, 0.4
    with arb_precision(128):
        ders = _odd_derivatives(flint.arb(r1), flint.arb(r2), flint.arb(5), 6)
    ref = ctx.diff(lambda x: ctx.exp(-ctx.mpf(r1) * x ** ctx.mpf(r2)), 5, 13)
    assert ders[-1].overlaps(flint.arb(str(ref))) and float(abs(ref)) > 0
    assert flint.ctx.cap == 10  # restored


def test_masked_arrays_are_refused_everywhere_lengths_are_read():
    """np.asarray drops a mask and reads the masked entries' stored numbers: every function that takes
    n (or window, alpha, offset) arrays refuses a masked array with a DomainError naming the parameter."""
    import numpy as np

    import otprior
    from otprior.encodings import REGISTRY, get

    n = np.ma.masked_array([100, 10**6, 10**7], mask=[False, True, False])
    calls = {
        "n": [lambda: otprior.window_mass(64, n, 1.3), lambda: otprior.distant_mass(64, n, 1.3),
              lambda: otprior.window_mass_bounds(64, n, 1.3), lambda: otprior.distant_mass_bounds(64, n, 1.3)],
        "window": [lambda: otprior.window_mass(np.ma.masked_array([64]), 100, 1.3)],
        "alpha": [lambda: otprior.window_mass(64, 100, np.ma.masked_array([1.3], mask=[True]))],
    }
    for name in REGISTRY.names():
        try:
            enc = get(name)
        except (TypeError, ValueError):
            continue  # parameters without defaults
        calls["n"] += [lambda e=enc: e.window_mass(64, n), lambda e=enc: e.distant_mass(64, n)]
    for param, fns in calls.items():
        for fn in fns:
            with pytest.raises(otprior.DomainError, match=f"^{param}=.*masked array"):
                fn()


@pytest.mark.parametrize(
    "r1, r2",
    [(1e-6, 2.0), (1e-4, 1.99), (1e-3, 2.0), pytest.param(1e-5, 1.5, marks=pytest.mark.slow),
     pytest.param(1e-3, 1.0001, marks=pytest.mark.slow)],
)
def test_kerple_power_slow_gaussian_decays_at_any_length(r1, r2):
    """r2 > 1 with a small r1 (the convexity bracket of Theorem 12(iii) is only |f'(N)| narrow): the
    masses at n = 1e7 and 1e300 and D_oo(64) come from Theorem 15's Euler-Maclaurin sums with the
    incomplete-gamma integral, against mpmath (private context: direct terms while they matter, the
    incomplete-gamma tail beyond)."""
    import mpmath

    from otprior import classify
    from otprior.encodings import get

    ctx = mpmath.MPContext()
    ctx.dps = 30
    R1, R2 = ctx.mpf(r1), ctx.mpf(r2)
    cut = int((80 / r1) ** (1 / r2)) + 100  # e^{-r1 d^r2} < e^-80 beyond

    def tail_from(x):  # int_x^oo e^{-r1 t^r2} dt (Theorem 12(i), by mpmath's own gammainc)
        s = 1 / R2
        return ctx.gammainc(s, R1 * ctx.mpf(x) ** R2) / (R2 * R1**s)

    w = [ctx.exp(-R1 * ctx.mpf(k) ** R2) for k in range(cut)]
    H = ctx.fsum(w[:64])
    T7 = ctx.fsum(w[64 : min(cut, 10**7)])
    Tinf = T7 + tail_from(cut) + w[-1]  # a bound-sized correction: the tail is below e^-80
    enc = get("kerple-power", r1=r1, r2=r2)
    assert enc.window_mass(64, 10**7) == pytest.approx(float(H / (H + T7)), rel=1e-12, abs=1e-300)
    assert enc.window_mass(64, int(1e300)) == pytest.approx(float(H / (H + Tinf)), rel=1e-12)
    assert classify(enc).limit_distant_mass(64) == pytest.approx(float(Tinf / (H + Tinf)), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("B", [2.0, 400.0, 1e300, 1e308])
def test_rotary_rate_text_at_any_content_bound(B):
    # e^(2B) overflows a double from B ~ 355 and its exponent from B ~ 1e15: the verdict still
    # answers, with a short rate (was an OverflowError for YaRN at 1e308, 300 digits for RoPE)
    for enc in (otprior.encodings.get("rope", logit_bound=B), otprior.encodings.get("yarn", factor=4, logit_bound=B)):
        v = classify(enc)
        assert v.kind == "diluting" and len(v.rate) < 80
