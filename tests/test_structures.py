"""Attention structures (``proofs/attention_structure.md``) against rows built here term by term and
against transformers' own mask functions, sink and soft-cap code (configs only, no weights)."""

import math

import numpy as np
import pytest
import torch
from scipy.special import softmax

import otprior
from otprior import DomainError, classify
from otprior import structures as S
from otprior.encodings import ALiBi, KerpleLog, NoPE, T5Buckets
from otprior.structures import (
    AbsolutePositions,
    AttentionSink,
    Chunked,
    GlobalTokens,
    SlidingWindow,
    SoftCap,
    compose,
    layer_structures,
)


def visible_keys(kind, size, n):
    """transformers' mask (masking_utils overlays and causal) for the last query of n keys: a boolean row."""
    from transformers import masking_utils as mu

    q = torch.tensor(n - 1)
    kv = torch.arange(n)
    b = torch.tensor(0)
    causal = mu.causal_mask_function(b, None, q, kv)
    if kind == "sliding":
        extra = mu.sliding_window_overlay(size)(b, None, q, kv)
    else:
        extra = mu.chunked_overlay(size, torch.zeros(1, dtype=torch.long))(b, None, q, kv)
    return (causal & extra).numpy()


@pytest.mark.parametrize("kind", ["sliding", "chunk"])
def test_masks_match_transformers(kind):
    for size in (1, 2, 5, 16, 96):
        st = SlidingWindow(size) if kind == "sliding" else Chunked(size)
        for n in (1, 2, 3, 16, 17, 96, 97, 385):
            row = visible_keys(kind, size, n)[::-1]  # distance order
            r = st.visible(n)
            assert row[:r].all() and not row[r:].any(), (size, n)


def direct_row(bias, n, *, visible=None, cap=None, extra_logw=None):
    """The row of the last query built here: logits in key order, the mask as -inf, an extra column."""
    j = np.arange(n)
    d = n - 1 - j
    z = bias(d.astype(float))
    if cap is not None:
        z = cap * np.tanh(z / cap)
    if visible is not None:
        z = np.where(d < visible, z, -np.inf)
    cols = z if extra_logw is None else np.append(z, extra_logw)
    p = softmax(cols)
    keys = p[:n][::-1]  # distance order
    return keys, (0.0 if extra_logw is None else p[n])


ENCODINGS = [NoPE(), ALiBi(0.3), KerpleLog(1.5, 0.5), T5Buckets(values=tuple(np.linspace(0.5, -2.0, 32)))]


@pytest.mark.parametrize("enc", ENCODINGS, ids=lambda e: type(e).__name__)
def test_masses_equal_explicit_rows(enc):
    bias = lambda d: np.asarray(enc.bias(d), dtype=float)  # noqa: E731
    worst = 0.0
    for n in (7, 64, 257, 1000):
        for W in (1, 4, 6):
            cases = [
                (SlidingWindow(96), dict(visible=min(n, 96))),
                (Chunked(40), dict(visible=(n - 1) % 40 + 1)),
                (AttentionSink(1.3), dict(extra_logw=1.3)),
                (SoftCap(0.7), dict(cap=0.7)),
                (compose(SlidingWindow(50), AttentionSink(-0.4)), dict(visible=min(n, 50), extra_logw=-0.4)),
                (compose(Chunked(33), SoftCap(2.0), AttentionSink(0.2)), dict(visible=(n - 1) % 33 + 1, cap=2.0, extra_logw=0.2)),
                (GlobalTokens(16, 0.5), dict(extra_logw=0.5 + math.log(-(-n // 16)))),
            ]
            for st, kw in cases:
                keys, extra = direct_row(bias, n, **kw)
                m, D, sink = st.window_mass(enc, W, n), st.distant_mass(enc, W, n), st.sink_mass(enc, W, n)
                worst = max(worst, abs(m - keys[:W].sum()), abs(D - keys[W:].sum() - extra), abs(sink - extra))
    assert worst < 1e-12, worst


def test_gpt_oss_sinks_and_sliding_window_match_transformers():
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    H, n, w = 3, 300, 64
    sinks = torch.tensor([-1.0, 0.5, 2.5], dtype=torch.float64)
    module = torch.nn.Module()
    module.sinks, module.num_key_value_groups = torch.nn.Parameter(sinks), 1
    module.eval()
    q = torch.zeros(1, H, n, 4, dtype=torch.float64)
    v = torch.randn(1, H, n, 4, dtype=torch.float64)
    for width in (None, w):
        i = torch.arange(n)
        allowed = i[None, :] <= i[:, None]
        if width is not None:
            allowed &= i[None, :] > i[:, None] - width  # masking_utils' sliding_window_overlay
        mask = torch.zeros(n, n, dtype=torch.float64).masked_fill(~allowed, -torch.inf)[None, None]
        with torch.no_grad():
            _, weights = eager_attention_forward(module, q, q, v, mask, scaling=1.0)
        row = weights[0, :, -1].numpy()[:, ::-1]  # (H, n) distance order
        st = AttentionSink(tuple(sinks.tolist())) if width is None else compose(SlidingWindow(width), AttentionSink(tuple(sinks.tolist())))
        for W in (8, 64):
            ours = st.window_mass(NoPE(), W, n)
            assert np.max(np.abs(ours - row[:, :W].sum(-1))) < 1e-12
    # without the sink the prediction would be 64/256 = 0.25; the sink takes its share
    assert AttentionSink(2.5).window_mass(NoPE(), 64, 256) == pytest.approx(64 / (256 + math.exp(2.5)), rel=1e-14)


def test_softcap_bound_holds_for_any_logits_and_matches_gemma2():
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

    rng = np.random.default_rng(3)
    c, n, W = 2.0, 400, 16
    module = torch.nn.Module()
    module.num_key_value_groups, module.training = 1, False
    q = torch.tensor(rng.normal(size=(1, 1, n, 8)) * 6)
    k = torch.tensor(rng.normal(size=(1, 1, n, 8)) * 6)
    mask = torch.zeros(n, n, dtype=torch.float64).masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -torch.inf)[None, None]
    _, weights = eager_attention_forward(module, q, k, k, mask, dropout=0.0, scaling=1.0, softcap=c)
    rows = weights[0, 0].numpy()
    bound = W * math.exp(2 * c) / (W * math.exp(2 * c) + n - W)  # Theorem S4 at the last query
    last = rows[-1][::-1]
    assert last[:W].sum() <= bound
    # adversarial content: +big on the window, -big elsewhere reaches the bound from below, never above
    z = np.where(np.arange(n) < W, 1e6, -1e6)
    z = c * np.tanh(z / c)
    assert softmax(z)[:W].sum() == pytest.approx(bound, rel=1e-12)
    v = classify(ALiBi(1.0), structure=SoftCap(c))  # a capped ALiBi bias is bounded in (-c, c): diluting
    assert v.kind == "diluting"
    assert SoftCap(c).window_mass(ALiBi(1.0), W, 10**5) <= W * math.exp(2 * c) / (W * math.exp(2 * c) + 10**5 - W)


def test_window_verdict_limit_and_chunk_bounds_from_rows():
    enc = KerpleLog(0.8, 1.0)  # diluting with every key visible
    assert classify(enc).kind == "diluting"
    v = classify(enc, structure=SlidingWindow(96))
    assert v.kind == "bounded" and v.bounded
    keys, _ = direct_row(lambda d: enc.bias(d), 5000, visible=96)
    assert v.limit_distant_mass(64) == pytest.approx(keys[64:].sum(), abs=1e-13)
    assert v.limit_distant_mass(200) == 0.0
    assert v.window_mass(64, 5000) == pytest.approx(keys[:64].sum(), abs=1e-13)
    # chunks: liminf and limsup over one period of rows built directly
    C, W = 48, 5
    vc = classify(enc, structure=compose(Chunked(C), AttentionSink(0.7)))
    assert vc.kind == "oscillating" and vc.bounded
    period = [1 - direct_row(lambda d: enc.bias(d), n, visible=(n - 1) % C + 1, extra_logw=0.7)[0][:W].sum() for n in range(4 * C, 5 * C)]
    lo, hi = vc.distant_mass_bounds(W)
    assert lo == pytest.approx(min(period), abs=1e-13) and hi == pytest.approx(max(period), abs=1e-13)
    with pytest.raises(ValueError):
        vc.limit_distant_mass(W)
    assert classify(NoPE(), structure=Chunked(C)).distant_mass_bounds(W) == (0.0, (C - W) / C)


def test_other_verdicts_and_refusals():
    v = classify(ALiBi(0.5), structure=GlobalTokens(16, 0.0))
    assert v.kind == "diluting"
    m = [GlobalTokens(16, 0.0).window_mass(ALiBi(0.5), 4, n) for n in (100, 1000, 10000)]
    assert m[0] > m[1] > m[2] and m[2] < 0.01
    a = classify(NoPE(), structure=AbsolutePositions(1024))
    assert a.kind == "undecided" and "no relative prior" in a.reason
    assert AbsolutePositions(1024).window_mass(NoPE(), 8, 1024) == pytest.approx(8 / 1024)
    with pytest.raises(DomainError, match="max_positions"):
        AbsolutePositions(1024).window_mass(NoPE(), 8, 1025)
    # a bounded bias with a sink keeps its verdict; its limit follows Theorem S3
    vs = classify(ALiBi(0.2), structure=AttentionSink(1.0))
    assert vs.kind == "bounded"
    assert vs.limit_distant_mass(8) == pytest.approx(AttentionSink(1.0).distant_mass(ALiBi(0.2), 8, 20000), abs=1e-12)
    # per-head sinks give per-head verdicts; a wrong count is refused
    assert len(classify(ALiBi(heads=4), structure=AttentionSink((0.0, 1.0, 2.0, 3.0)))) == 4
    with pytest.raises(DomainError):
        classify(ALiBi(heads=4), structure=AttentionSink((0.0, 1.0)))
    assert classify(NoPE(), "ssmax", structure=SlidingWindow(8)).kind == "undecided"
    # the registry and the two classify routes
    assert set(S.names()) >= {"causal", "sliding-window", "chunked", "sink", "softcap", "global-tokens", "absolute"}
    assert S.get("sliding-window", width=4).visible(10) == 4
    with pytest.raises(DomainError):
        S.get("sliding-window")
    assert otprior.encodings.classify(NoPE(), structure=SlidingWindow(4)).kind == "bounded"
    assert classify(NoPE(), structure="causal").kind == "diluting"


@pytest.mark.parametrize(
    "model_type, kwargs",
    [
        ("qwen2", dict(use_sliding_window=True, sliding_window=32, max_window_layers=2)),
        ("qwen2", dict(use_sliding_window=False, sliding_window=32, max_window_layers=2)),
        ("gemma2", dict(sliding_window=32)),
        ("gemma3_text", dict(sliding_window=32)),
        ("cohere2", dict(sliding_window=32)),
        ("llama4_text", dict(attention_chunk_size=64)),
        ("mistral", dict(sliding_window=32)),
        ("gpt_oss", dict(sliding_window=32)),
    ],
)
def test_layer_structures_match_transformers_configs(model_type, kwargs):
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, num_hidden_layers=7, **kwargs)
    d = cfg.to_dict()
    expected = list(cfg.layer_types) if getattr(cfg, "layer_types", None) else None
    for given in (d, {k: v for k, v in d.items() if k != "layer_types"}):
        if "layer_types" not in given and model_type in ("gpt_oss",):
            continue  # gpt-oss alternates by its own rule, stored in layer_types
        records, used = layer_structures(given, 7, model_type)
        if expected is not None:
            assert [r.type for r in records] == expected
        for r in records:
            if r.type == "sliding_attention":
                assert r.structure.visible(1000) == cfg.sliding_window
            elif r.type == "chunked_attention":
                assert r.structure.visible(65) == 1
            else:
                assert r.structure.visible(1000) == 1000


def test_cli_classify_under_a_structure(capsys):
    import json

    from otprior.cli import main

    assert main(["classify", "nope", "--sliding-window", "96", "--window", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "bounded" and out["limit_distant_mass"] == pytest.approx(32 / 96)
    assert main(["classify", "nope", "--chunk", "128", "--window", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "oscillating" and out["limsup_distant_mass"] == pytest.approx(0.5) and out["liminf_distant_mass"] == 0.0
    assert main(["classify", "alibi", "--heads", "2", "--sink", "0", "1", "--window", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [h["kind"] for h in out["heads"]] == ["bounded", "bounded"]
    assert main(["classify", "alibi", "--heads", "2", "--sink", "0", "1", "2", "--window", "4"]) == 2  # three sinks, two heads
    assert "structure" in capsys.readouterr().err


def test_extremes_and_hostile_configs():
    # a sink far above or below the row, lengths far beyond any direct sum
    assert AttentionSink(1e4).window_mass(NoPE(), 4, 10) == 0.0
    assert AttentionSink(-1e4).window_mass(NoPE(), 4, 10) == pytest.approx(0.4, rel=1e-15)
    assert AttentionSink(700.0).window_mass(NoPE(), 4, 10) == pytest.approx(4 / (10 + math.exp(700.0)), rel=1e-12)
    assert SlidingWindow(96).window_mass(ALiBi(0.1), 4, 10**15) == pytest.approx(SlidingWindow(96).window_mass(ALiBi(0.1), 4, 96), rel=1e-15)
    assert SoftCap(50.0).window_mass(NoPE(), 64, 10**12) == pytest.approx(64e-12, rel=1e-12)  # b = 0: the cap changes nothing
    with pytest.raises(DomainError, match="direct summation"):
        classify(ALiBi(0.1), structure=SlidingWindow(2**40)).limit_distant_mass(4)
    with pytest.raises(DomainError):
        SlidingWindow(0)
    with pytest.raises(DomainError):
        AttentionSink(float("nan"))
    with pytest.raises(DomainError):
        compose(SoftCap(1.0), SoftCap(2.0))
    # configs: every malformed attention field is refused by name
    for bad, key in [({"sliding_window": -1}, "sliding_window"), ({"sliding_window": 8.5}, "sliding_window"),
                     ({"layer_types": ["full_attention"]}, "layer_types"), ({"layer_types": ["bogus"] * 2}, "layer_types"),
                     ({"attn_logit_softcapping": "50"}, "attn_logit_softcapping"), ({"no_rope_layers": [1]}, "no_rope_layers"),
                     ({"layer_types": ["chunked_attention"] * 2}, "attention_chunk_size")]:  # fmt: skip
        with pytest.raises(DomainError, match=key):
            layer_structures(bad, 2, "llama")


def test_huge_soft_caps_give_their_rate_in_powers_of_ten():
    for c, exponent in ((400.0, 800 / math.log(10)), (1e6, 2e6 / math.log(10)), (1e300, 2e300 / math.log(10))):
        v = classify(ALiBi(0.5), structure=SoftCap(c))
        assert v.kind == "diluting"
        shown = float(v.rate.split("e^(2c) = 10^")[1])
        assert abs(shown - exponent) <= 1e-5 * exponent, (c, shown)
    small = float(classify(ALiBi(0.5), structure=SoftCap(2.0)).rate.split("e^(2c) = ")[1])
    assert abs(small - math.exp(4.0)) < 1e-2 * math.exp(4.0)


def _direct_D(encoding, structure, W, n):
    """D_n(W) summed term by term in a private 40-digit context: the visible row's biases and the sink."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = 40
    r = structure.visible(n)
    b = np.asarray(encoding.bias(np.arange(r, dtype=float), n), dtype=float)
    w = [ctx.exp(ctx.mpf(float(x))) for x in b]
    sink = ctx.exp(ctx.mpf(float(structure.sink_logit))) if structure.sink_logit is not None else 0
    return float(1 - ctx.fsum(w[:W]) / (ctx.fsum(w) + sink))


def test_an_n_dependent_row_under_a_window_and_a_sink_is_not_called_bounded():
    cot = otprior.encodings.get("causal-ot", rho=0.5)
    st = S.compose(SlidingWindow(8), AttentionSink(1.0))
    D = [_direct_D(cot, st, 4, n) for n in (10**3, 10**4, 10**5)]  # 0.97767, 0.99282, 0.99772 (0.99928 at 1e6)
    assert all(a < b for a, b in zip(D, D[1:], strict=False)) and D[-1] > 0.997  # the sink takes the whole row: D_n -> 1
    v = classify(cot, structure=st)
    assert v.kind == "undecided" and "depends on n" in v.reason
    assert classify(cot, structure=AttentionSink(1.0)).kind != "bounded"
    # an n-independent row keeps Theorem S3's bounded verdict under the same structure
    assert classify(ALiBi(0.5), structure=st).kind == "bounded"


def test_a_constant_chunked_row_is_bounded_with_its_limit():
    for st, W in ((Chunked(1), 1), (Chunked(1), 5), (S.compose(Chunked(1), AttentionSink(1.0)), 1)):
        v = classify(ALiBi(0.5), structure=st)
        direct = [_direct_D(ALiBi(0.5), st, min(W, st.visible(n)), n) for n in (2, 3, 17, 64)]
        assert max(direct) - min(direct) < 1e-15
        assert v.kind == "bounded" and abs(v.limit_distant_mass(W) - direct[0]) < 1e-12, (st, W)
    v = classify(ALiBi(0.5), structure=Chunked(8))
    assert v.kind == "oscillating" and v.distant_mass_bounds(9) == (0.0, 0.0) and v.limit_distant_mass(9) == 0.0


def test_absolute_positions_reason_and_masses_agree():
    from scipy.special import softmax as sm

    for enc in (ALiBi(0.5), NoPE()):
        v = classify(enc, structure=AbsolutePositions(16))
        explicit = sm(np.asarray(enc.bias(np.arange(8, dtype=float), 8), dtype=float))[:4].sum()  # distances 0..3 of 8 keys
        assert abs(v.window_mass(4, 8) - explicit) < 1e-12
        assert ("W/n" in v.reason and "not W/n" not in v.reason) == (abs(explicit - 0.5) < 1e-12), enc
    # integer parameters follow the project's check_int: an integral float is the integer it equals
    assert SlidingWindow(64.0).width == 64 and type(SlidingWindow(64.0).width) is int
    with pytest.raises(DomainError, match="width"):
        SlidingWindow(64.5)
