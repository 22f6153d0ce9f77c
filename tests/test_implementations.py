"""Each encoding against the implementation people run.

transformers' functions are called on configs (never weights from a hub). KERPLE, FIRE and
CABLE are re-implemented here from their reference code, cited per test, in torch, and
compared with otprior's numpy encodings.
"""

import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from otprior import DomainError, classify
from otprior.encodings import (
    CABLE,
    FIRE,
    ALiBi,
    KerpleLog,
    KerplePower,
    RoPE,
    T5Buckets,
    YaRN,
    bf16_round,
    cable_row_bias,
    t5_bucket,
)

HEAD_COUNTS = [1, 2, 3, 5, 6, 7, 8, 12, 16, 20, 24, 25, 32, 40, 48, 64, 71, 96, 128]


def window_mass_of_row(bias_row, W):
    """Window mass of a bias row in distance order (entry 0 = the query itself)."""
    return float(np.exp(logsumexp(bias_row[:W]) - logsumexp(bias_row)))


# --- ALiBi -------------------------------------------------------------------------


def test_alibi_bloom_slopes_and_rows():
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    worst = 0.0
    n = 64
    for H in HEAD_COUNTS:
        mask = torch.ones(1, n, dtype=torch.long)
        alibi = build_alibi_tensor(mask, H, torch.float32).reshape(H, n).double().numpy()  # slope * key position
        enc = ALiBi(heads=H)
        ours = enc.bias(np.arange(n, dtype=float))  # -m d, d = n - 1 - j
        theirs = (alibi - alibi[:, -1:])[:, ::-1]  # shift-invariant: subtract the query's own entry
        worst = max(worst, float(np.max(np.abs(ours - theirs) / (1 + np.abs(theirs)))))
    assert worst < 5e-6  # the library evaluates slopes and products in float32


def test_alibi_mpt_slopes_any_head_count_and_bias_max():
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    worst = 0.0
    n = 32
    for H in HEAD_COUNTS:
        for bias_max in (4, 8, 12.5):
            alibi = build_mpt_alibi_tensor(H, n, alibi_bias_max=bias_max).reshape(H, n).double().numpy()  # -(n-1-j) m
            ours = ALiBi(heads=H, variant="mpt", alibi_bias_max=bias_max).bias(np.arange(n, dtype=float))
            worst = max(worst, float(np.max(np.abs(ours - alibi[:, ::-1]) / (1 + np.abs(alibi)))))
    assert worst < 5e-6  # float32 in the library


def test_alibi_falcon_effective_row_and_window_mass():
    from transformers.models.falcon.modeling_falcon import build_alibi_tensor

    worst_row, worst_mass = 0.0, 0.0
    for H, head_dim in [(8, 64), (12, 64), (71, 64), (32, 128), (5, 16)]:
        for n in (16, 300, 2000):
            mask = torch.ones(1, n, dtype=torch.long)
            alibi = build_alibi_tensor(mask, H, torch.float32).reshape(H, n).double().numpy()
            # Falcon: (scores + alibi) * 1/sqrt(head_dim); the row of the last query, distance order
            theirs = ((alibi - alibi[:, -1:]) / math.sqrt(head_dim))[:, ::-1]
            enc = ALiBi(heads=H, variant="falcon", head_dim=head_dim, bf16=True)
            ours = enc.bias(np.arange(n, dtype=float), n)
            worst_row = max(worst_row, float(np.max(np.abs(ours - theirs))))
            m_ours = enc.window_mass(8, n)
            m_theirs = np.array([window_mass_of_row(theirs[h], 8) for h in range(H)])
            worst_mass = max(worst_mass, float(np.max(np.abs(m_ours - m_theirs))))
    assert worst_row < 1e-9 and worst_mass < 1e-12
    # without the 1/sqrt(head_dim) the window mass is far off (the error this variant corrects)
    plain = ALiBi(heads=8).window_mass(8, 2000)
    falcon = ALiBi(heads=8, variant="falcon", head_dim=64).window_mass(8, 2000)  # bf16 by default for falcon
    assert np.max(np.abs(plain - falcon)) > 0.1
    # the bfloat16 rounding of slope x position is not a detail: without it the masses move by > 0.05
    unrounded = ALiBi(heads=8, variant="falcon", head_dim=64, bf16=False).window_mass(16, 5000)
    assert np.max(np.abs(unrounded - ALiBi(heads=8, variant="falcon", head_dim=64).window_mass(16, 5000))) > 0.05


def test_falcon_bf16_rows_oscillate():
    """Theorem 11c on the model's own rows: the window mass swings between ~1 and <= W / G_n."""
    from transformers.models.falcon.modeling_falcon import build_alibi_tensor

    enc = ALiBi(0.5, variant="falcon", head_dim=64)
    v = classify(enc)
    assert v.kind == "oscillating" and v.bounded is None and v.distant_mass_bounds(4) == (0.0, 1.0)
    with pytest.raises(ValueError):
        v.limit_distant_mass(4)  # no limit exists
    k = 16
    for n, at_lower_edge in [(2**k + 2**(k - 8) + 2, True), (2**k + 2**(k - 7) + 2**(k - 8) - 1, False)]:
        mask = torch.ones(1, n, dtype=torch.long)
        alibi = build_alibi_tensor(mask, 1, torch.float32).reshape(n).double().numpy() * 0.5 / 0.00390625  # one head: slope 2^-8
        # a single-head Falcon tensor has slope 2^-8; rescale to 0.5 exactly (powers of two commute with bf16)
        row = ((alibi - alibi[-1]) / 8.0)[::-1]
        mass = window_mass_of_row(row, 4)
        assert mass == pytest.approx(enc.window_mass(4, n), abs=1e-12)
        G = ALiBi.tied_keys(n, 0.5)
        assert mass <= 4 / G + 1e-15
        if at_lower_edge:
            assert mass > 0.99 and G <= 2
        else:
            assert G >= 2 ** (k - 8) and mass < 0.02


def test_bf16_rounding_matches_torch():
    x = np.random.default_rng(0).normal(size=2000) * np.exp(np.random.default_rng(1).uniform(-20, 20, 2000))
    assert np.array_equal(bf16_round(x), torch.tensor(x, dtype=torch.float32).bfloat16().double().numpy())


# --- T5 ----------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True])
def test_t5_buckets_match_transformers(bidirectional):
    from transformers.models.t5.modeling_t5 import T5Attention

    mismatches = 0
    for nb in (4, 6, 8, 16, 32, 33, 64, 128):
        half = nb // 2 if bidirectional else nb
        for md in sorted({half // 2 + 1, 20, 128, 1000}):
            if md <= (half // 2):
                continue
            d = torch.arange(0, 5000)
            theirs = T5Attention._relative_position_bucket(-d, bidirectional=bidirectional, num_buckets=nb, max_distance=md).numpy()
            ours = t5_bucket(d.numpy(), nb, md, bidirectional)
            mismatches += int(np.sum(ours != theirs))
    assert mismatches == 0


def test_t5_learned_table_window_mass_and_refusals():
    from transformers.models.t5.modeling_t5 import T5Attention

    rng = np.random.default_rng(3)
    worst = 0.0
    for nb, md, H in [(32, 128, 4), (8, 16, 2), (64, 40, 3)]:
        table = rng.normal(size=(nb, H))
        enc = T5Buckets.from_table(table, nb, md)
        for n in (10, 200, 3000):
            d = torch.arange(n)
            buckets = T5Attention._relative_position_bucket(-d, bidirectional=False, num_buckets=nb, max_distance=md).numpy()
            rows = table[buckets].T  # (H, n) in distance order
            theirs = np.array([window_mass_of_row(rows[h], 5) for h in range(H)])
            worst = max(worst, float(np.max(np.abs(enc.window_mass(5, n) - theirs))))
    assert worst < 1e-12
    with pytest.raises(DomainError) as info:
        T5Buckets(32, 16)  # max_distance <= num_buckets / 2: the logarithmic buckets run backwards
    assert info.value.parameter == "max_distance"
    with pytest.raises(DomainError) as info:
        T5Buckets().window_mass(4, 100)  # no table: no NoPE in disguise
    assert info.value.parameter == "values"


# --- RoPE --------------------------------------------------------------------------


def _config(head_dim, theta, rope, max_pos=4096):
    from transformers import LlamaConfig

    params = {"rope_theta": theta, **rope}
    return LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim, max_position_embeddings=max_pos, rope_parameters=params)


ROPE_CASES = [
    ({"rope_type": "linear", "factor": 4.0}, {}),
    ({"rope_type": "dynamic", "factor": 2.0}, {"seq_len": 9000}),
    ({"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}, {}),
    ({"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 2048, "truncate": False}, {}),
    ({"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "mscale": 1.0, "mscale_all_dim": 0.707, "beta_fast": 16, "beta_slow": 2}, {}),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "attention_factor": 1.3}, {}),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, {}),
    ({"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 2.0, "high_freq_factor": 8.0, "original_max_position_embeddings": 1024}, {}),
]


@pytest.mark.parametrize("rope, call", ROPE_CASES, ids=lambda x: str(x.get("rope_type", "")) if x else "")
@pytest.mark.parametrize("head_dim, theta", [(64, 10000.0), (128, 500000.0), (96, 1e6)])
def test_rope_inverse_frequencies_and_factor_match_transformers(rope, call, head_dim, theta):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = _config(head_dim, theta, rope)
    inv, factor = ROPE_INIT_FUNCTIONS[rope["rope_type"]](config, "cpu", seq_len=call.get("seq_len"))
    kw = {k: v for k, v in rope.items()}
    ours = RoPE(1.0, head_dim=head_dim, rope_theta=theta, max_position_embeddings=4096, **kw, **call)
    rel = np.max(np.abs(ours.inverse_frequencies() - inv.double().numpy()) / inv.double().numpy())
    assert rel < 2e-6  # the library evaluates in float32
    assert ours.cos_sin_factor == pytest.approx(float(factor), rel=1e-12)
    assert ours.score_bound == pytest.approx(float(factor) ** 2, rel=1e-12)


def test_rope_longrope_and_default():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rng = np.random.default_rng(0)
    short, long = (1 + rng.random(32)).tolist(), (1 + 10 * rng.random(32)).tolist()
    rope = {"rope_type": "longrope", "short_factor": short, "long_factor": long, "original_max_position_embeddings": 4096, "factor": 8.0}
    config = _config(64, 10000.0, rope, max_pos=32768)
    for seq_len in (None, 100, 20000):
        inv, factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=seq_len)
        ours = RoPE(1.0, head_dim=64, rope_type="longrope", short_factor=short, long_factor=long, original_max_position_embeddings=4096, factor=8.0)
        assert np.max(np.abs(ours.inverse_frequencies(seq_len) - inv.double().numpy()) / inv.double().numpy()) < 2e-6
        assert ours.cos_sin_factor == pytest.approx(float(factor), rel=1e-12)
    inv, factor = LlamaRotaryEmbedding.compute_default_rope_parameters(_config(128, 10000.0, {"rope_type": "default"}))
    ours = RoPE(1.0, head_dim=128)
    assert np.max(np.abs(ours.inverse_frequencies() - inv.double().numpy()) / inv.double().numpy()) < 2e-6 and factor == 1.0


def test_yarn_class_equals_rope_yarn_and_the_factor_bound_is_attained():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    y = YaRN(8.0, 1.0, original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=0.5)
    config = _config(128, 10000.0, {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096, "mscale": 1.0, "mscale_all_dim": 0.5})
    inv, factor = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    assert np.allclose(y.inverse_frequencies(), inv.double().numpy(), rtol=2e-6)
    assert y.cos_sin_factor == pytest.approx(float(factor))
    # Theorem R: |(a R_i q).(a R_j k)| = a^2 |q.R_{j-i} k| <= a^2 |q||k|, attained for aligned q, k
    a = y.cos_sin_factor
    rng = np.random.default_rng(1)
    q = rng.normal(size=128)
    angles = 7 * y.inverse_frequencies()

    def rotate(x, th):
        x1, x2 = x[::2], x[1::2]
        return np.stack([x1 * np.cos(th) - x2 * np.sin(th), x1 * np.sin(th) + x2 * np.cos(th)], -1).ravel()

    k = rotate(q, angles)  # aligned with the rotated query at relative distance 7
    logit = np.dot(a * rotate(q, 7 * y.inverse_frequencies()), a * k)
    assert logit == pytest.approx(a * a * np.dot(q, q), rel=1e-12)


# --- KERPLE ------------------------------------------------------------------------
# Reference: chijames/KERPLE, megatron/mpu/layers.py, ParallelKerpleLog.forward and
# ParallelKerplePower.forward (clamp(min=eps=1e-2), power exponents clamp(max=2),
# log: bias = -bias_p * log(1 + bias_a * diff); power: bias = -bias_a * diff**bias_p,
# wei = exp(-wei_a * diff**wei_p), output x * wei + bias).


def _kerple_log_ref(bias_p, bias_a, n):
    diff = torch.tril(torch.arange(n).view(n, 1).repeat(1, n) + torch.arange(0, -n, -1)).to(torch.float64)
    p = bias_p.clamp(min=1e-2)[:, None, None]
    a = bias_a.clamp(min=1e-2)[:, None, None]
    return -p * torch.log(1 + a * diff)


def _kerple_power_ref(bias_a, bias_p, wei_a, wei_p, x):
    n = x.shape[-1]
    diff = torch.tril(torch.arange(n).view(n, 1).repeat(1, n) + torch.arange(0, -n, -1)).to(torch.float64)
    bias = -diff.pow(bias_p.clamp(min=1e-2, max=2)[:, None, None]) * bias_a.clamp(min=1e-2)[:, None, None]
    wei = (-diff.pow(wei_p.clamp(min=1e-2, max=2)[:, None, None]) * wei_a.clamp(min=1e-2)[:, None, None]).exp()
    return x * wei + bias


def test_kerple_log_from_stored_matches_reference():
    rng = np.random.default_rng(5)
    worst = 0.0
    for H in (1, 4, 12):
        bias_p = torch.tensor(rng.uniform(-0.5, 2.5, H))  # includes values below the clamp
        bias_a = torch.tensor(rng.uniform(-0.2, 1.5, H))
        n = 300
        ref = _kerple_log_ref(bias_p, bias_a, n)[:, n - 1].numpy()[:, ::-1]  # last query, distance order
        enc = KerpleLog.from_stored(bias_p=bias_p.numpy(), bias_a=bias_a.numpy())
        worst = max(worst, float(np.max(np.abs(enc.bias(np.arange(n)) - ref))))
        theirs = np.array([window_mass_of_row(ref[h], 16) for h in range(H)])
        assert np.max(np.abs(np.atleast_2d(enc.window_mass(16, n)).reshape(-1) - theirs)) < 1e-12
    assert worst < 1e-12


def test_kerple_power_from_stored_matches_reference_with_kernel():
    rng = np.random.default_rng(6)
    H, n = 6, 200
    bias_a, bias_p = torch.tensor(rng.uniform(-0.1, 1.0, H)), torch.tensor(rng.uniform(0.0, 2.6, H))
    wei_a, wei_p = torch.tensor(rng.uniform(0.0, 1.0, H)), torch.tensor(rng.uniform(0.0, 2.5, H))
    x = torch.tensor(rng.normal(size=(H, n, n)))
    ref = _kerple_power_ref(bias_a, bias_p, wei_a, wei_p, x)[:, n - 1].numpy()[:, ::-1]
    enc = KerplePower.from_stored(bias_a=bias_a.numpy(), bias_p=bias_p.numpy(), wei_a=wei_a.numpy(), wei_p=wei_p.numpy())
    d = np.arange(n)
    content = x[:, n - 1].numpy()[:, ::-1]
    ours = np.stack([h.kernel(d) * content[i] + h.bias(d) for i, h in enumerate(enc.per_head())])
    assert np.max(np.abs(ours - ref)) < 1e-12
    with pytest.raises(DomainError) as info:
        KerplePower(0.5, 2.5)
    assert info.value.parameter == "r2"


# --- FIRE --------------------------------------------------------------------------
# Reference: mcleish7/arithmetic, cramming/architectures/embeddings.py, FIRE.forward (eval:
# positions = arange(n); normaliser max(position, |L_mult * init_L|), 0-indexed; log(|c x| + 1);
# normalized = rel / (norm + eps); MLP Linear(1, w) -> ReLU -> Linear(w, heads)).


def _fire_ref(n, mlp, c, init_L, L_mult, eps):
    positions = torch.arange(n, dtype=torch.float64)
    rel = positions[:, None] - positions[None, :]
    threshold = torch.abs(torch.tensor(L_mult * init_L, dtype=torch.float64))
    norm = torch.max(positions, threshold)[:, None]
    rel = torch.log(torch.abs(c * rel) + 1)
    norm = torch.log(torch.abs(c * norm) + 1)
    return mlp((rel / (norm + eps)).unsqueeze(-1)).permute(2, 0, 1)  # (heads, n, n)


def test_fire_matches_reference_including_the_query_index():
    torch.manual_seed(0)
    worst = 0.0
    for heads, width, c, L in [(1, 8, 0.1, 512.0), (4, 32, 0.37, 20.0), (3, 16, -0.2, 3.0)]:
        mlp = torch.nn.Sequential(torch.nn.Linear(1, width), torch.nn.ReLU(), torch.nn.Linear(width, heads)).double()
        weights = (mlp[0].weight.detach().numpy().ravel(), mlp[0].bias.detach().numpy(), mlp[2].weight.detach().numpy(), mlp[2].bias.detach().numpy())
        enc = FIRE(mlp=weights, c=c, L=L, eps=1e-6)
        for n in (5, 40, 300):
            with torch.no_grad():
                ref = _fire_ref(n, mlp, c, L, 1.0, 1e-6)[:, n - 1].numpy()[:, ::-1]  # row of the last query
            ours = np.atleast_2d(enc.bias(np.arange(n, dtype=float), n))
            worst = max(worst, float(np.max(np.abs(ours - ref))))
            masses = np.atleast_1d(enc.window_mass(4, n))
            assert np.max(np.abs(masses - [window_mass_of_row(ref[h][: n][: n], 4) for h in range(heads)])) < 1e-12
    assert worst < 1e-12


# --- CABLE -------------------------------------------------------------------------
# Reference: axiomlab/Cable, src/Cable.py, CausalSelfAttention.forward:
# b = cumsum(-softplus(h_attn(x)), dim=1); Bias = b.unsqueeze(3) - b.unsqueeze(2) (b_i - b_j).


def test_cable_row_matches_reference_and_worst_case_bound():
    rng = np.random.default_rng(2)
    for T in (1, 10, 500):
        h = rng.normal(size=(3, T)) * 2
        b = torch.cumsum(-torch.nn.functional.softplus(torch.tensor(h)), dim=-1)
        bias = (b.unsqueeze(2) - b.unsqueeze(1))  # (heads, T, T): [i, j] = b_i - b_j
        ref = bias[:, T - 1].numpy()[:, ::-1]
        assert np.max(np.abs(cable_row_bias(h) - ref)) < 1e-12
        eps = float(np.log1p(np.exp(h.min())))  # softplus(min h): the least increment
        for k in range(3):
            for W in (1, 3):
                if W <= T:
                    D = 1 - window_mass_of_row(ref[k], W)
                    assert D <= CABLE(eps).distant_mass(W, 10**9) * (1 + 1e-12) + 1e-15
