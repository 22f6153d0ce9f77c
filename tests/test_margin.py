"""margin_for (Theorem 9) and content bounds (Theorem 10), against independent bisections."""

import math
from types import SimpleNamespace

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otprior
from otprior import DomainError, NoMarginError
from otprior.margin import _search


def mp_masses(W, L, alpha, offset=1.0, B=0.0):
    """(D_L smallest, D_L largest) over content within B, 30 digits, Hurwitz zeta route,
    in a private mpmath context."""
    ctx = mpmath.MPContext()
    ctx.dps = 30
    a, o = ctx.mpf(alpha), ctx.mpf(offset)
    H = ctx.zeta(a, o) - ctx.zeta(a, W + o)
    T = ctx.zeta(a, W + o) - ctx.zeta(a, L + o)
    k = ctx.exp(2 * ctx.mpf(B))
    return T / (T + k * H), T / (T + H / k)


def mp_growth(W, L0, L1, alpha, kind="absolute", offset=1.0, B=0.0):
    """Growth as a float from the Arb ball of :func:`arb_growth` (relative radius < 1e-9)."""
    return float(arb_growth(W, L0, L1, alpha, kind, offset, B).mid())


def bisect_margin(W, L0, L1, tol, **kw):
    """Independent reference, valid without monotonicity: scan the growth (Arb balls written
    in this file) on a grid of
    step 0.01 from the top down to the highest grid point above tol, then bisect in that cell."""
    top = 2.0
    while mp_growth(W, L0, L1, top, **kw) > tol or mp_growth(W, L0, L1, top + 1, **kw) > tol:
        top += 1.0
    grid = [1 + 1e-12 + 0.01 * i for i in range(int((top - 1) / 0.01) + 1)]
    above = [a for a in grid if mp_growth(W, L0, L1, a, **kw) > tol]
    if not above:
        return 0.0
    lo, hi = above[-1], above[-1] + 0.01
    assert mp_growth(W, L0, L1, hi, **kw) <= tol
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mp_growth(W, L0, L1, mid, **kw) > tol else (lo, mid)
    return hi - 1


def test_reference_value():
    r = otprior.margin_for(64, (512, 8192), 0.05)
    assert r.margin == pytest.approx(0.3628, abs=5e-5)
    assert float(r) == r.margin and r.exponent == 1 + r.margin


@pytest.mark.parametrize(
    "W, L0, L1, tol, kw",
    [
        (64, 512, 8192, 0.05, {}),
        (16, 2048, 10**6, 0.02, {}),
        (128, 4096, 65536, 0.1, {"kind": "relative"}),
        (64, 512, 8192, 0.05, {"B": 0.2}),
        (32, 1024, 32768, 0.2, {"kind": "relative", "B": 0.02}),
        (8, 100, 10**5, 0.05, {"offset": 3.0}),
    ],
)
def test_margin_equals_independent_bisection(W, L0, L1, tol, kw):
    ref = bisect_margin(W, L0, L1, tol, **kw)
    r = otprior.margin_for(
        W, (L0, L1), tol, growth=kw.get("kind", "absolute"), score_bound=kw.get("B", 0.0), offset=kw.get("offset", 1.0)
    )
    assert r.margin == pytest.approx(ref, abs=1e-8)
    lo, hi = r.bracket
    assert lo <= ref + 1e-12 and ref <= hi + 1e-12 and hi - lo <= 1e-8
    # the attained growth is within tol, and a slightly smaller margin breaks it
    assert r.growth <= tol
    assert float(mp_growth(W, L0, L1, 1 + r.margin, **kw)) <= tol
    assert float(mp_growth(W, L0, L1, 1 + r.margin - 1e-6, **kw)) > tol
    d0, d1 = r.distant_mass
    assert d0 == pytest.approx(float(mp_masses(W, L0, 1 + r.margin, kw.get("offset", 1.0), kw.get("B", 0.0))[0]), rel=1e-12)


def test_every_exponent_above_the_margin_is_within_tol():
    r = otprior.margin_for(64, (512, 8192), 0.05)
    for alpha in np.linspace(r.exponent, r.exponent + 4, 400):
        assert float(mp_growth(64, 512, 8192, alpha)) <= 0.05


def test_zero_margin_when_exponent_one_already_suffices():
    r = otprior.margin_for(100, (128, 130), 0.5)
    assert r.margin == 0.0 and tuple(r.bracket) == (0.0, 0.0)
    assert r.growth <= 0.5


class _Synthetic:
    """A non-monotone log-growth curve with known Lipschitz constant 2: it exceeds the level
    on (1.2, 1.4) and on (2.5, 2.7), and dips below it in between."""

    def record(self, a):
        g = 0.1 + 0.15 * math.exp(-(((a - 1.3) / 0.1) ** 2)) + 0.15 * math.exp(-(((a - 2.6) / 0.1) ** 2))
        ball = flint.arb(g, 1e-15)
        return SimpleNamespace(phi=ball, log_up=ball, log_down=flint.arb(0), prec=64)

    def interval_bound(self, a, b, ra, rb):
        return (ra.phi.upper() + rb.phi.upper()) / 2 + flint.arb(2.0) * (flint.arb(b) - flint.arb(a)) / 2


def test_search_does_not_assume_monotonicity():
    hit = _search(_Synthetic(), 1.0, 5.0, flint.arb(0.2), 1e-10)
    a, b = hit
    # the highest crossing: 0.1 + 0.15 exp(-((a - 2.6) / 0.1)^2) = 0.2
    crossing = 2.6 + 0.1 * math.sqrt(math.log(1.5))
    assert b == pytest.approx(crossing, abs=1e-9)


def test_no_margin_for_relative_growth_with_large_content_bound():
    with pytest.raises(NoMarginError, match="score_bound"):
        otprior.margin_for(64, (512, 8192), 0.05, growth="relative", score_bound=0.1)


def test_result_as_dict():
    d = otprior.margin_for(64, (512, 8192), 0.05).as_dict()
    assert set(d) >= {"margin", "exponent", "growth", "growth_bounds", "distant_mass", "bracket", "Lrange", "tol"}
    r = otprior.margin_for(64, (512, 8192), 0.05)
    assert r.lengths == r.Lrange == (512, 8192)
    lower, upper = r.bracket
    assert lower <= upper == r.margin


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((0, (512, 8192), 0.05), {}, "window"),
        ((512, (512, 8192), 0.05), {}, "window"),
        ((64, (8192, 512), 0.05), {}, "Lrange"),
        ((64, (512, 512), 0.05), {}, "Lrange"),
        ((64, (512,), 0.05), {}, "Lrange"),
        ((64, (512, 8192, 10**5), 0.05), {}, "Lrange"),
        ((64, 512, 0.05), {}, "Lrange"),
        ((64, (512.5, 8192), 0.05), {}, "Lrange"),
        ((64, (512, 8192), 0.0), {}, "tol"),
        ((64, (512, 8192), 1.0), {}, "tol"),
        ((64, (512, 8192), float("nan")), {}, "tol"),
        ((64, (512, 8192), 0.05), {"growth": "ratio"}, "growth"),
        ((64, (512, 8192), 0.05), {"score_bound": -1.0}, "score_bound"),
        ((64, (512, 8192), 0.05), {"offset": 0.0}, "offset"),
    ],
)
def test_refusals(args, kwargs, name):
    with pytest.raises(DomainError) as info:
        otprior.margin_for(*args, **kwargs)
    assert info.value.parameter == name


def test_growth_is_not_monotone_in_general():
    # relative growth with a content bound rises (alpha 1.02 -> 1.04) before it falls: a search
    # that assumed monotonicity could stop at the wrong crossing; Theorem 9's search assumes none
    # (proofs/margin_selection.md, which cites this example)
    values = [float(mp_growth(32, 1024, 32768, 1 + 0.01 * i, kind="relative", B=0.02)) for i in range(1, 60)]
    rises = [v2 > v1 for v1, v2 in zip(values, values[1:], strict=False)]
    falls = [v2 < v1 for v1, v2 in zip(values, values[1:], strict=False)]
    assert any(rises) and any(falls)


# --- edges and properties, checked with Arb balls computed here (Hurwitz zeta) -----------


def arb_growth(W, L0, L1, alpha, kind="absolute", offset=1.0, B=0.0):
    """Ball of the growth at ``alpha``, written independently of otprior: Hurwitz zeta
    differences (digamma at 1) for H, T_L0, T_L1; Theorem 10's extremes; precision doubled
    until the ball's relative radius is below 1e-9."""
    prec = 128
    while True:
        g = _arb_growth(W, L0, L1, alpha, kind, offset, B, prec)
        if (g.is_finite() and g.rad() < 1e-9 * abs(g.mid())) or prec > 20000:
            return g
        prec *= 2


def _arb_growth(W, L0, L1, alpha, kind, offset, B, prec):
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        a, o = flint.arb(alpha), flint.arb(offset)

        def S(lo, hi):  # sum_{d=lo}^{hi} (d + o)^-a
            if alpha == 1.0:
                return (flint.arb(hi + 1) + o).digamma() - (flint.arb(lo) + o).digamma()
            return a.zeta(flint.arb(lo) + o) - a.zeta(flint.arb(hi + 1) + o)

        H, T0, T1 = S(0, W - 1), S(W, L0 - 1), S(W, L1 - 1)
        k = (2 * flint.arb(B)).exp()
        d0, d1 = T0 / (T0 + k * H), T1 / (T1 + H / k)
        return d1 / d0 - 1 if kind == "relative" else d1 - d0
    finally:
        flint.ctx.prec = old


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((1, (2, 4), 1e-6), {"offset": 0.5}),
        ((37, (38, 51), 0.03), {"growth": "relative"}),
        ((64, (512, 8192), 1e-16), {}),
        ((64, (512, 8192), 1e-300), {}),
        ((1, (2, 10**18), 1e-300), {}),
        ((3, (5, 9), 1e-5), {"offset": 1e-300}),
    ],
)
def test_edge_cases_answered_with_a_proved_bracket(args, kwargs):
    W, (L0, L1), tol = args
    r = otprior.margin_for(*args, **kwargs)
    kind = kwargs.get("growth", "absolute")
    o = kwargs.get("offset", 1.0)
    assert arb_growth(W, L0, L1, 1 + r.margin, kind, o) <= tol
    lower, upper = r.bracket
    if lower > 0:
        assert arb_growth(W, L0, L1, 1 + lower, kind, o) > tol
        assert upper - lower <= 1e-10 * max(1.0, upper) * 2
    assert r.growth_bounds.lo <= r.growth <= tol


def test_tiny_tolerance_gives_the_minimal_margin():
    r = otprior.margin_for(64, (512, 8192), 1e-16)
    assert 5.0 < r.margin < 6.0  # not the top of the search range
    assert arb_growth(64, 512, 8192, 1 + r.margin - 1e-6) > 1e-16


@pytest.mark.parametrize("offset", [1e300])
def test_unreachable_tolerance_refused(offset):
    with pytest.raises(NoMarginError) as info:
        otprior.margin_for(3, (5, 9), 1e-5, offset=offset)
    assert info.value.parameter == "tol"


def margin_property(W, L0, L1, tol, kind, B, offset, alphas):
    try:
        r = otprior.margin_for(W, (L0, L1), tol, growth=kind, score_bound=B, offset=offset)
    except NoMarginError:
        assert kind == "relative" and math.exp(4 * B) - 1 >= tol * 0.999
        return
    lower, upper = r.bracket
    # every exponent above 1 + margin keeps the growth within tol
    for t in alphas:
        alpha = 1 + r.margin + t * (1 + r.margin)
        assert arb_growth(W, L0, L1, alpha, kind, offset, B) <= tol * (1 + 1e-12) + 0 * alpha
    assert arb_growth(W, L0, L1, 1 + r.margin, kind, offset, B) <= tol
    # and some exponent just below the bracket's lower end does not
    if lower > 0:
        assert arb_growth(W, L0, L1, 1 + lower, kind, offset, B) > tol
    else:
        assert r.margin == 0.0


PROPERTY = dict(
    W=st.integers(1, 200),
    extra0=st.integers(1, 10**4),
    ratio=st.integers(2, 10**6),
    log_tol=st.floats(-30, math.log10(0.5)),
    kind=st.sampled_from(["absolute", "relative"]),
    B=st.sampled_from([0.0, 0.0, 0.01, 0.1]),
    log_offset=st.floats(-3, 3),
    alphas=st.lists(st.floats(0, 3), min_size=3, max_size=6),
)


@settings(max_examples=12, deadline=None)
@given(**PROPERTY)
def test_margin_property(W, extra0, ratio, log_tol, kind, B, log_offset, alphas):
    L0 = W + extra0
    margin_property(W, L0, L0 * ratio, 10**log_tol, kind, B, 10**log_offset, alphas)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(**PROPERTY)
def test_margin_property_many(W, extra0, ratio, log_tol, kind, B, log_offset, alphas):
    L0 = W + extra0
    margin_property(W, L0, L0 * ratio, 10**log_tol, kind, B, 10**log_offset, alphas)


def test_growth_identities_symbolic():
    # Lemma 9a's closed forms of the growth, checked by sympy from the definitions
    import sympy as sp

    H, T0, E, k = sp.symbols("H T0 E k", positive=True)
    T1 = T0 + E
    P = T0 * (k - 1 / k) + k * E
    d0, d1 = T0 / (T0 + k * H), T1 / (T1 + H / k)
    assert sp.cancel(sp.together(d1 - d0 - H * P / ((T1 + H / k) * (T0 + k * H)))) == 0
    assert sp.cancel(sp.together(d1 / d0 - 1 - H * P / (T0 * (T1 + H / k)))) == 0


@settings(max_examples=10, deadline=None)
@given(
    W=st.integers(1, 100),
    extra0=st.integers(1, 1000),
    ratio=st.integers(2, 1000),
    B=st.sampled_from([0.0, 0.05, 0.5]),
    log_offset=st.floats(-2, 2),
    start=st.floats(0.2, 5.0),
)
def test_lemma_9a_monotone_factors_and_slope(W, extra0, ratio, B, log_offset, start):
    # A = H/(T1 + H/k) increases, P/T0 and T0/(T0 + kH) decrease, |d log G/d alpha| <= 2 Lambda,
    # on a grid of exponents, with balls computed here
    L0 = W + extra0
    L1 = L0 * ratio
    o = 10.0**log_offset
    old = flint.ctx.prec
    flint.ctx.prec = 256
    try:
        a_o = flint.arb(o)
        lam = ((flint.arb(L1 - 1) + a_o) / a_o).log()

        def parts(alpha):
            a = flint.arb(alpha)

            def S(lo, hi):
                return a.zeta(flint.arb(lo) + a_o) - a.zeta(flint.arb(hi + 1) + a_o)

            H, T0, E = S(0, W - 1), S(W, L0 - 1), S(L0, L1 - 1)
            k = (2 * flint.arb(B)).exp()
            P = T0 * (k - 1 / k) + k * E
            A = H / (T0 + E + H / k)
            return A, P / T0, T0 / (T0 + k * H), (A * P / T0 * (T0 / (T0 + k * H))).log()

        alphas = [1.0 + start + 0.05 * i + 1e-9 for i in range(6)]
        values = [parts(x) for x in alphas]
        for (A1, B1, C1, g1), (A2, B2, C2, g2), x1, x2 in zip(values, values[1:], alphas, alphas[1:], strict=False):
            assert A2 >= A1 or A2.overlaps(A1)
            assert B2 <= B1 or B2.overlaps(B1)
            assert C2 <= C1 or C2.overlaps(C1)
            assert abs(g2 - g1) <= 2 * lam * flint.arb(x2 - x1)
    finally:
        flint.ctx.prec = old


def test_tiny_relative_tolerances_need_few_evaluations():
    """Lemma 9b's relative bound as a sum of non-negative balls (no cancellation): tolerances
    down to 1e-300 are decided in a few dozen ball evaluations, and the growth at the margin
    is within tol while a point of the bracket's lower end exceeds it."""
    for tol in (1e-38, 1e-120, 1e-300):
        r = otprior.margin_for(64, (512, 8192), tol, growth="relative")
        assert r.evaluations <= 60, (tol, r.evaluations)
        assert r.growth_bounds.hi <= tol
        assert r.bracket.hi - r.bracket.lo <= 1e-8 * r.margin


def test_growth_near_its_limit_answers():
    """Absolute growth with B = 100 tends to one over a long plateau; Lemma 9a(iii)'s split
    F1 F2 bounds intervals sharply there (this call used to walk down in 1e-4 steps)."""
    r = otprior.margin_for(64, (512, 8192), 0.999999, score_bound=100)
    assert r.evaluations <= 80
    assert r.growth_bounds.hi <= 0.999999
    lo = r.bracket.lo
    assert 40.0 < lo <= r.margin <= lo + 1e-8 * r.margin


def test_margin_at_huge_offsets_is_the_geometric_limit():
    """For o >> L1 the weights (d + o)^-alpha with alpha = s o tend to e^{-s d} (Lemma 9d's scaled sums
    answer there): margin / o at o = 1e300 and 1e23 equals the slope s* at which the geometric prior's
    growth D_{L1} - D_{L0} crosses tol, found by mpmath bisection (private context)."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = 40
    W, L0, L1, tol = 64, 512, 8192, 0.05

    def D(s, L):
        q = ctx.exp(-s)
        return (q**W - q**L) / (1 - q**L)

    lo, hi = ctx.mpf("1e-6"), ctx.mpf(1)  # growth > tol at lo, < tol at hi
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if D(mid, L1) - D(mid, L0) > tol else (lo, mid)
    for o in (1e23, 1e300):
        r = otprior.margin_for(W, (L0, L1), tol, offset=o)
        assert r.margin / o == pytest.approx(float(lo), rel=1e-7)
        assert r.growth <= tol


def test_no_margin_below_1e300_is_said_quickly_and_why():
    """W = 1 at offset 1e300: the margin is about o log(1/tol) > 1e300; the growth at alpha = 1e300 is
    proved above tol and the error says so (no search over a domain that cannot contain the answer)."""
    with pytest.raises(NoMarginError, match="proved above"):
        otprior.margin_for(1, (2, 10**300), 0.05, offset=1e300)
    r = otprior.margin_for(1, (2, 10**300), 0.05, offset=1e200)  # 1.386e200: inside the domain
    assert 1e200 < r.margin < 1e201


def test_scaled_sums_match_the_hurwitz_route():
    """Lemma 9d: margin's arb_sum is o^alpha times the Hurwitz-zeta sum of otprior._power_sums (an
    independent route), over direct, tail-bound and Euler-Maclaurin regimes (alpha = 1 included)."""
    from otprior import margin as M
    from otprior._balls import arb_from_float, arb_precision
    from otprior._power_sums import arb_sum as hurwitz

    cases = [(0, 63, 1.0, 1.0), (64, 8191, 1.3, 1.0), (0, 5, 40.0, 0.5), (3, 10**6, 2.5, 3.7), (0, 63, 17.0, 1.0),
             (512, 8191, 1e3, 1e3), (0, 63, 1.5, 1e-300), (10, 10**12, 1.0001, 1e6)]
    with arb_precision(160):
        for d0, d1, alpha, o in cases:
            scaled = M.arb_sum(d0, d1, alpha, o)
            ref = hurwitz(d0, d1, alpha, o) * arb_from_float(o) ** arb_from_float(alpha)
            assert scaled.is_finite() and scaled.overlaps(ref), (d0, d1, alpha, o, scaled, ref)
            assert scaled.rad() <= abs(scaled.mid()) * flint.arb(2) ** -100


def test_margin_beyond_lemma_9b_uses_the_monotone_factors():
    """W = 1, (L0, L1) = (10, 1e300), offset 1e300: Lemma 9b's bound at alpha = 1e300 is 0.74, yet the
    growth never exceeds 0.1 (D_{L0} <= 0.9), so the margin at tol 0.2 is 0 (Lemma 9e; was NoMarginError).
    At tol 0.05 the margin lies where the geometric limit's growth (weights e^{-s d}, s = alpha/o, mpmath in
    a private context) crosses tol: above it at 0.999 of the margin, below at the margin."""
    import mpmath

    r = otprior.margin_for(1, (10, 10**300), 0.2, offset=1e300)
    assert r.margin == 0.0 and r.growth_bounds.hi <= 0.2
    ctx = mpmath.MPContext()
    ctx.dps = 40

    def growth(alpha):  # (1 + d/o)^-alpha = e^{-alpha log1p(d/o)}: e^{-s d} to 1e-290 for d << o
        q = ctx.exp(-ctx.mpf(alpha) * ctx.log1p(ctx.mpf("1e-300")))
        D = [q * (1 - q ** (L - 1)) / (1 - q) for L in (10, ctx.inf)]
        return D[1] / (1 + D[1]) - D[0] / (1 + D[0])

    r = otprior.margin_for(1, (10, 10**300), 0.05, offset=1e300)
    assert 1e298 < r.margin < 1e300
    assert growth(1 + r.margin) <= 0.05 * (1 + 1e-9)
    assert growth(0.999 * r.margin) > 0.05
