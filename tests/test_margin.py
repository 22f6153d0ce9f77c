"""margin_for (Theorem 9) and content bounds (Theorem 10), against independent bisections."""

import math

import mpmath
import numpy as np
import pytest

import otprior
from otprior import DomainError, NoMarginError
from otprior.margin import _search


def mp_masses(W, L, alpha, offset=1.0, B=0.0):
    """(D_L smallest, D_L largest) over content within B, 30 digits, Hurwitz zeta route."""
    with mpmath.workdps(30):
        a, o = mpmath.mpf(alpha), mpmath.mpf(offset)
        H = mpmath.zeta(a, o) - mpmath.zeta(a, W + o)
        T = mpmath.zeta(a, W + o) - mpmath.zeta(a, L + o)
        k = mpmath.exp(2 * mpmath.mpf(B))
        return T / (T + k * H), T / (T + H / k)


def mp_growth(W, L0, L1, alpha, kind="absolute", offset=1.0, B=0.0):
    d0, _ = mp_masses(W, L0, alpha, offset, B)
    _, d1 = mp_masses(W, L1, alpha, offset, B)
    return d1 - d0 if kind == "absolute" else d1 / d0 - 1


def bisect_margin(W, L0, L1, tol, **kw):
    """Independent reference, valid without monotonicity: scan 30-digit growth on a grid of
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
    assert r.margin == 0.0 and r.bracket == (0.0, 0.0)
    assert r.growth <= 0.5


class _Synthetic:
    """A non-monotone growth curve with known Lipschitz constant 2: it exceeds the level
    on (1.2, 1.4) and on (2.5, 2.7), and dips below it in between."""

    lam = 0.0

    def bounds(self, a, level=None):
        g = 0.1 + 0.15 * math.exp(-(((a - 1.3) / 0.1) ** 2)) + 0.15 * math.exp(-(((a - 2.6) / 0.1) ** 2))
        return (g - 1e-15, g + 1e-15, 0.0, 0.0, 0.0, 0.0, 0.0)

    def lipschitz(self, ra, rb):
        return 2.0


def test_search_does_not_assume_monotonicity():
    hit = _search(_Synthetic(), 1.0, 5.0, 0.2, 1e-10)
    a, b = hit
    # the highest crossing: 0.1 + 0.15 exp(-((a - 2.6) / 0.1)^2) = 0.2
    crossing = 2.6 + 0.1 * math.sqrt(math.log(1.5))
    assert b == pytest.approx(crossing, abs=1e-9)


def test_no_margin_for_relative_growth_with_large_content_bound():
    with pytest.raises(NoMarginError, match="score_bound"):
        otprior.margin_for(64, (512, 8192), 0.05, growth="relative", score_bound=0.1)


def test_result_as_dict():
    d = otprior.margin_for(64, (512, 8192), 0.05).as_dict()
    assert set(d) >= {"margin", "exponent", "growth", "distant_mass", "bracket", "lengths", "tol"}


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
    # that assumed monotonicity could stop at the wrong crossing (README, THEORY departure)
    values = [float(mp_growth(32, 1024, 32768, 1 + 0.01 * i, kind="relative", B=0.02)) for i in range(1, 60)]
    rises = [v2 > v1 for v1, v2 in zip(values, values[1:], strict=False)]
    falls = [v2 < v1 for v1, v2 in zip(values, values[1:], strict=False)]
    assert any(rises) and any(falls)
