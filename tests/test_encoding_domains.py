"""Registry encodings at the edges of their domains: scaling only where the implementation
scales, rebuildable fields, no overflow for extreme parameters, allocations under the caps."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.special import logsumexp

from otprior import classify
from otprior._validation import MACHINE_EPSILON, DomainError, PrecisionError
from otprior.encodings import FIRE, ALiBi, KerplePower, T5Buckets, fire_input


def _direct_window_mass(bias_row, window):
    """m_n(W) from an explicit row of biases (distance order), by log-sum-exp."""
    return float(np.exp(logsumexp(bias_row[:window]) - logsumexp(bias_row)))


@pytest.mark.parametrize("variant", ["bloom", "mpt"])
def test_alibi_head_dim_scales_only_falcon(variant):
    plain = ALiBi(heads=8, variant=variant)
    given = ALiBi(heads=8, variant=variant, head_dim=64)
    assert given.effective_slope == plain.effective_slope == tuple(plain.slope)
    np.testing.assert_array_equal(given.window_mass(8, 500), plain.window_mass(8, 500))
    # the row -m d of BLOOM's / MPT's build_alibi_tensor, without any 1/sqrt(head_dim)
    d = np.arange(500.0)
    for m, mass in zip(plain.slope, given.window_mass(8, 500), strict=True):
        assert mass == pytest.approx(_direct_window_mass(-m * d, 8), rel=1e-12)


def test_alibi_falcon_divides_by_sqrt_head_dim():
    falcon = ALiBi(0.5, variant="falcon", head_dim=64, bf16=False)
    assert falcon.effective_slope == 0.5 / 8.0
    assert falcon.window_mass(8, 500) == pytest.approx(_direct_window_mass(-(0.5 / 8.0) * np.arange(500.0), 8), rel=1e-12)


def test_fire_rebuilds_from_its_own_fields():
    rng = np.random.default_rng(0)
    W1, b1, W2, b2 = rng.normal(size=8), rng.normal(size=8), rng.normal(size=(3, 8)), rng.normal(size=3)
    enc = FIRE(mlp=(W1, b1, W2, b2), c=0.3, L=64.0)
    again = dataclasses.replace(enc)
    assert again == enc and hash(again) == hash(enc) and enc.heads == 3
    np.testing.assert_array_equal(again.window_mass(4, 300), enc.window_mass(4, 300))
    rebuilt = FIRE(**{f.name: getattr(enc, f.name) for f in dataclasses.fields(enc) if f.init})
    assert rebuilt == enc
    for h, one in enumerate(enc.per_head()):
        assert dataclasses.replace(one) == one and one.heads == 1
        # head h's bias is the reference MLP's output h: relu(W1 x + b1) . W2[h] + b2[h]
        d = np.arange(300.0)
        x = fire_input(d, 300.0, 0.3, 64.0, 1e-6)
        expected = np.maximum(np.outer(x, W1) + b1, 0.0) @ W2[h] + b2[h]
        np.testing.assert_allclose(one.bias(d, 300), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("r1, r2", [(1e-6, 0.01), (0.5, 0.01), (1e-300, 0.5), (3.0, 1e-4)])
def test_kerple_power_extreme_parameters_answer_or_refuse(r1, r2):
    enc = KerplePower(r1, r2)
    n, W = 2000, 16
    expected = _direct_window_mass(-r1 * np.arange(float(n)) ** r2, W)
    assert enc.window_mass(W, n) == pytest.approx(expected, rel=1e-10)
    verdict = classify(enc)
    assert verdict.kind == "bounded"
    try:
        limit = verdict.limit_distant_mass(W)
    except PrecisionError:
        pass  # the weights stay above e^-800 beyond the direct-summation bound: said, not guessed
    else:
        assert 0.0 <= limit <= 1.0
    # beyond direct summation: Theorem 12's bracket answers, or the call is refused naming n
    try:
        m = enc.window_mass(W, 10**9)
    except DomainError as err:
        assert err.parameter == "n"
    else:
        if r1 * 1e9**r2 < 0.1:  # independent reference: e^-x expanded, power sums by Arb's Hurwitz zeta
            import flint

            old_prec = flint.ctx.prec
            flint.ctx.prec = 256
            try:
                a, b, N = flint.arb(r1), flint.arb(r2), 10**9

                def S(lo, hi):  # sum_{d=lo}^{hi-1} e^(-a d^b), lo >= 1
                    total = flint.arb(0)
                    for k in range(0, 30):
                        s = -k * b
                        total += (-a) ** k / math.factorial(k) * (s.zeta(flint.arb(lo)) - s.zeta(flint.arb(hi)))
                    return total

                head = 1 + S(1, W)
                ref = float((head / (head + S(W, N))).mid())
            finally:
                flint.ctx.prec = old_prec
            assert m == pytest.approx(ref, rel=1e-12)


def test_t5_long_max_distance_answers_by_bucket_counts_without_allocation():
    """Theorem 16d: the masses come from nb bucket intervals, not from arrays over the distances, so a
    max_distance of 1e12 (formerly refused by the allocation cap) answers, float and certified."""
    import math

    enc = T5Buckets(32, 10**12, values=np.linspace(0.0, -3.0, 32))
    start = enc.last_bucket_start()
    assert start > 10**10  # a binary search: no allocation
    out = enc.mass_enclosures(4, 10**13)
    m = enc.window_mass(4, 10**13)
    assert out.window_mass.lo <= m <= out.window_mass.hi or abs(m - out.window_mass.mid) <= 8e-16 * m
    # independent check: the distances 0..3 are exact buckets 0..3; beyond, every key of the last bucket
    # has value -3, and the buckets between are bounded by their extreme values (a bracket of the truth)
    head = math.fsum(math.exp(v) for v in np.linspace(0.0, -3.0, 32)[:4])
    lo_tail = (10**13 - 4) * math.exp(-3.0)
    hi_tail = (start - 4) * 1.0 + (10**13 - start) * math.exp(-3.0)
    assert head / (head + hi_tail) <= out.window_mass.lo and out.window_mass.hi <= head / (head + lo_tail)
    kind, b_star, distant, last = enc.far_profile(4)
    assert kind == "constant-tail" and b_star == 0.0 and last == -3.0 and -3.0 < distant < 0.0


def test_machine_epsilon_is_the_spacing_of_doubles_at_one():
    assert MACHINE_EPSILON == math.ulp(1.0) == 2.0**-52
