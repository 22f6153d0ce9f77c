"""Normalisers with biases: each theorem of proofs/normalisers.md against explicit attention rows."""

import math

import numpy as np
import pytest
from scipy.special import expit, softmax

import otprior
from otprior import DomainError, classify
from otprior import normalisers as N
from otprior.encodings import ALiBi, KerpleLog, LogDistance, NoPE, T5Buckets


def flat_row(n, W, delta):
    z = np.zeros(n)
    z[:W] = delta
    return z


@pytest.mark.parametrize("s", [0.5, 1.0, 2.0])
def test_ssmax_threshold_on_explicit_rows(s):
    W = 4
    v = classify(NoPE(), N.SSMax(s), score_bound=1.0)
    assert v.threshold == pytest.approx(1 / s) and v.kind == "content-dependent"
    ns = [10**3, 10**5, 10**6]
    for delta, kept in [(0.8 / s, False), (1.0 / s, True), (1.3 / s, True)]:
        masses = [float(np.sum(N.SSMax(s).attention(flat_row(n, W, delta))[:W])) for n in ns]
        # independent closed form: W n^(s Delta) / (W n^(s Delta) + n - W)
        ref = [W * n ** (s * delta) / (W * n ** (s * delta) + n - W) for n in ns]
        assert masses == pytest.approx(ref, rel=1e-9)
        if kept:
            assert masses[-1] >= W / (W + 1) * 0.999
        else:
            assert masses[-1] < masses[1] < masses[0] and masses[-1] < 0.25
    # 2 s B < 1: no admissible content keeps the window
    assert classify(NoPE(), N.SSMax(s), score_bound=0.45 / s).kind == "diluting"


def test_logn_is_ssmax_with_s_one_over_log_L():
    v = classify(NoPE(), N.LogN(4096), score_bound=10.0)
    assert v.threshold == pytest.approx(math.log(4096))
    z = flat_row(10**5, 3, 2.0)
    assert np.allclose(N.LogN(4096).attention(z), N.SSMax(1 / math.log(4096)).attention(z))


def test_ssmax_with_decaying_bias_concentrates():
    enc = ALiBi(0.5)
    v = classify(enc, N.SSMax(1.0), score_bound=0.2)  # 2B = 0.4 <= b(0) - b(1) = 0.5
    assert v.kind == "bounded"
    masses = v.window_mass(1, [10, 1000, 100000])
    assert masses[0] < masses[1] < masses[2] and masses[2] > 0.99
    # content can move the top logit to a distant key when 2B > b(0) - b(1)
    assert classify(enc, N.SSMax(1.0), score_bound=0.4).kind == "content-dependent"
    shares = []
    for n in (10**2, 10**5):
        z = enc.bias(np.arange(n, dtype=float))
        z[0] -= 0.4  # content -B on the window, +B on the next key
        z[1] += 0.4
        shares.append(N.SSMax(1.0).attention(z)[0])
    assert shares[1] < shares[0] < 0.5 and shares[1] < 0.05


@pytest.mark.parametrize("B", [0.0, 0.5, 2.0, 6.0])
def test_stick_breaking_window_floor_on_random_rows(B):
    rng = np.random.default_rng(int(10 * B))
    sb = N.StickBreaking()
    for W in (1, 3, 10):
        floor = N.stick_breaking_window_floor(W, B)
        assert floor == pytest.approx(1 - (1 - expit(-B)) ** W, rel=1e-12)
        for n in (W, 50, 5000):
            for _ in range(5):
                z = rng.uniform(-B, B, n)
                assert np.sum(sb.attention(z)[:W]) >= floor * (1 - 1e-12)
            # attained at z = -B everywhere
            assert np.sum(sb.attention(np.full(n, -B))[:W]) == pytest.approx(floor, rel=1e-12)
    # a free constant: the floor above is about absolute logits, not content around a constant (Theorem N4)
    assert classify(LogDistance(0.5), sb, score_bound=B).kind == "content-dependent"
    assert classify(LogDistance(1.5), sb, score_bound=B).kind == "bounded"


def test_stick_breaking_free_constant_dilutes_a_non_summable_bias():
    # Theorem N4(iv): NoPE, all logits c_n = -(1/2) ln n; reference: the weights of the definition summed directly
    sb = N.StickBreaking()
    for n, expected in ((10**3, 0.883), (10**5, 0.987)):
        z = np.full(n, -0.5 * math.log(n))
        beta = expit(z)
        keep = np.concatenate([[1.0], np.cumprod(1 - beta)[:-1]])
        D = float(np.sum((beta * keep)[4:]))
        assert D == pytest.approx(expected, abs=6e-4)
        assert float(np.sum(sb.attention(z)[4:])) == pytest.approx(D, rel=1e-12)
    # n = 1e7 in closed form: (1 - s)^4 - (1 - s)^n, s = sigma(c_n)
    s = expit(-0.5 * math.log(1e7))
    assert (1 - s) ** 4 - (1 - s) ** 1e7 == pytest.approx(0.9987, abs=1e-4)
    v = classify(NoPE(), sb, score_bound=0.0)
    assert v.kind == "content-dependent" and v.bounded is None and "Theorem N4(iv)" in v.reason
    assert v.limit_distant_mass(4) == pytest.approx(0.0625, rel=1e-12)  # at the constant c = 0


@pytest.mark.parametrize("enc", [LogDistance(1.5), ALiBi(0.3)], ids=["logdist", "alibi"])
def test_stick_breaking_softmax_bound_for_every_constant(enc):
    # Theorem N4(iii): for every constant c and content within B, D_n(W) <= T_n / (T_n + e^(-2B) H)
    rng = np.random.default_rng(7)
    sb = N.StickBreaking()
    n, W = 400, 3
    b = enc.bias(np.arange(n, dtype=float))
    H, T = float(np.sum(np.exp(b[:W]))), float(np.sum(np.exp(b[W:])))
    worst = 0.0
    for B in (0.0, 0.3, 1.0):
        bound = T / (T + math.exp(-2 * B) * H)
        for c in np.linspace(-12, 8, 81):
            for e in (np.full(n, -B), np.where(np.arange(n) < W, -B, B), rng.uniform(-B, B, n)):
                D = float(np.sum(sb.attention(b + c + e)[W:]))
                assert D <= bound * (1 + 1e-12)
                worst = max(worst, D / bound)
    assert worst > 0.5  # the bound is not vacuous on these rows
    assert classify(enc, sb, score_bound=1.0).kind == "bounded"


def test_stick_breaking_rows_against_the_definition():
    z = np.array([0.3, -1.0, 2.0, 0.0])
    beta = expit(z)
    ref = [beta[0], beta[1] * (1 - beta[0]), beta[2] * (1 - beta[0]) * (1 - beta[1]), beta[3] * np.prod(1 - beta[:3])]
    assert np.allclose(N.StickBreaking().attention(z), ref, rtol=1e-14)


def test_forgetting_gates_constant_gates_are_the_worst_case():
    rng = np.random.default_rng(4)
    fox = N.ForgettingGate(f_max=0.98, f_min=0.5)
    eps = -math.log(0.98)
    for enc in (NoPE(), KerpleLog(0.7, 1.0)):
        v = classify(enc, fox)
        assert v.kind == "bounded"
        n, W = 3000, 8
        b = enc.bias(np.arange(n, dtype=float))
        worst = 1 - float(np.sum(softmax(b - eps * np.arange(n))[:W]))
        for _ in range(20):
            gates = rng.uniform(0.5, 0.98, n)
            D = 1 - float(np.sum(fox.attention(b, gates)[:W]))
            assert D <= worst * (1 + 1e-12)
        assert v.window_mass(W, n) == pytest.approx(1 - worst, rel=1e-12)
    assert classify(NoPE(), N.ForgettingGate(f_max=1.0)).kind == "diluting"


@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_entmax_flat_rows_and_limit_share(alpha):
    ent = N.Entmax(alpha)
    v = classify(NoPE(), ent, score_bound=0.5)
    assert v.kind == "content-dependent" and v.threshold == 0.0
    W = 3
    for delta in (0.05, 0.2):
        limit = min(1.0, W * ((alpha - 1) * delta) ** (1 / (alpha - 1)))
        masses = [float(np.sum(ent.attention(flat_row(n, W, delta))[:W])) for n in (10**3, 10**5)]
        assert abs(masses[1] - limit) < abs(masses[0] - limit) + 1e-12
        assert masses[1] == pytest.approx(limit, rel=0.1, abs=1e-3)
    # constant content: uniform, diluting
    assert np.sum(ent.attention(np.zeros(1000))[:W]) == pytest.approx(W / 1000, rel=1e-6)


def test_sparsemax_matches_the_projection():
    z = np.array([1.0, 0.8, 0.1, -2.0])
    p = N.entmax(z, 2.0)
    # Euclidean projection onto the simplex: tau = (1.0 + 0.8 - 1) / 2 = 0.4
    assert np.allclose(p, [0.6, 0.4, 0.0, 0.0])


def test_softmax_and_causal_ot_pairs():
    assert classify(ALiBi(0.3), "softmax").kind == classify(ALiBi(0.3)).kind == "bounded"
    v = classify(NoPE(), N.CausalOTNormaliser(0.5), score_bound=0.3)
    assert v.kind == "diluting"
    assert v.window_mass(10, 1024) == pytest.approx(otprior.ot_window_mass(10, 1024, 0.5), rel=1e-12)
    assert classify(ALiBi(0.3), N.CausalOTNormaliser(0.5)).kind == "undecided"
    # the operator's row at constant scores is Theorem 2's prior
    assert np.allclose(N.CausalOTNormaliser(0.5).attention(np.zeros(40)), otprior.ot_prior(40, 0.5), rtol=1e-9)


def test_every_pair_answers():
    encs = [NoPE(), ALiBi(0.3), LogDistance(1.3), T5Buckets(values=np.linspace(0, -2, 32))]
    for name in N.names():
        params = {"train_length": 512} if name == "logn" else {}
        norm = N.get(name, **params)
        for enc in encs:
            v = classify(enc, norm, score_bound=0.25)
            assert v.kind in ("bounded", "diluting", "content-dependent", "undecided") and v.reason
            m = v.window_mass(4, [8, 64])
            assert m.shape == (2,) and np.all((m >= 0) & (m <= 1 + 1e-12))


def test_normaliser_refusals():
    with pytest.raises(DomainError) as info:
        N.get("sinkhorn")
    assert info.value.parameter == "normaliser" and "ssmax" in str(info.value)
    with pytest.raises(DomainError):
        N.SSMax(0.0)
    with pytest.raises(DomainError):
        N.ForgettingGate(f_max=0.5, f_min=0.9)


def test_temperature_scales_the_exponent():
    t = N.Temperature(2.0)
    assert classify(LogDistance(0.8), t).kind == "bounded"  # 2 * 0.8 > 1
    assert classify(LogDistance(0.4), t).kind == "diluting"
    assert classify(ALiBi(0.1), t).kind == "bounded" and classify(NoPE(), t).kind == "diluting"
    b = LogDistance(0.8).bias(np.arange(500, dtype=float))
    assert classify(LogDistance(0.8), t).window_mass(5, 500) == pytest.approx(float(np.sum(softmax(2 * b)[:5])), rel=1e-12)


def test_entmax_with_decaying_bias_has_a_finite_support():
    ent = N.Entmax(2.0)
    enc = ALiBi(0.3)
    assert classify(enc, ent, score_bound=0.1).kind == "bounded"  # 2B = 0.2 <= 0.3
    assert classify(enc, ent, score_bound=0.2).kind == "undecided"
    rows = [ent.attention(enc.bias(np.arange(n, dtype=float))) for n in (20, 200, 2000)]
    support = int(np.sum(rows[0] > 0))
    assert support < 20 and all(np.allclose(r[:20], rows[0]) and np.all(r[20:] == 0) for r in rows)
