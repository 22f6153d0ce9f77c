"""The torch adapter and the reference model (CPU, tiny checkpoints made here)."""

import json
import os
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import otprior  # noqa: E402
from otprior.torch import (  # noqa: E402
    CheckpointError,
    ModelConfig,
    ReferenceModel,
    analyse_checkpoint,
    byte_corpus,
    intervene,
    load_checkpoint,
    load_model,
    measure_distant_mass,
    save_model,
    train,
)
from otprior.torch.model import causal_ot_rows  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    return byte_corpus(max_bytes=300_000)


@pytest.fixture(scope="module")
def trained(corpus):
    torch.set_num_threads(2)
    return train(ModelConfig(scheme="log-distance", train_length=32, n_layers=2, n_heads=4), corpus[0], steps=5, batch_size=8).model


def model_alphas(model):
    return np.concatenate([b.attn.pos.alpha().detach().numpy() for b in model.blocks])


def test_safetensors_round_trip_reads_only_positional_keys(trained, tmp_path):
    path = save_model(trained, tmp_path / "ckpt")
    ckpt = load_checkpoint(path)
    assert ckpt.scheme == "log-distance" and "detected" in ckpt.note
    np.testing.assert_allclose([h.params["alpha"] for h in ckpt.heads], model_alphas(trained), rtol=1e-6)
    assert all(k.endswith(("pos.alpha_raw", "pos.alpha_margin")) for k in ckpt.keys_read)
    assert ckpt.bytes_read < 100
    assert [h.layer for h in ckpt.heads] == [0] * 4 + [1] * 4
    rebuilt = load_model(path)
    x = torch.randint(0, 256, (2, 20))
    torch.testing.assert_close(rebuilt(x), trained(x))


def test_pickled_state_dicts(trained, tmp_path):
    sd = trained.state_dict()
    torch.save(sd, tmp_path / "plain.pt")
    torch.save({"model": sd, "step": 30, "config": {"lr": 0.003}}, tmp_path / "nested.pth")
    for name in ("plain.pt", "nested.pth"):
        ckpt = load_checkpoint(tmp_path / name)
        np.testing.assert_allclose([h.params["alpha"] for h in ckpt.heads], model_alphas(trained), rtol=1e-6)


class _Payload:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('OTPRIOR_TEST_MARKER', '/tmp/otprior_pwned')}",))


@pytest.mark.parametrize("how", ["torch.save", "raw pickle"])
def test_malicious_pickle_is_refused_and_never_executed(tmp_path, monkeypatch, how):
    marker = tmp_path / "executed"
    monkeypatch.setenv("OTPRIOR_TEST_MARKER", str(marker))
    path = tmp_path / "evil.pt"
    if how == "torch.save":
        torch.save({"layers.0.pos.alpha_raw": torch.zeros(2), "x": _Payload()}, path)
    else:
        path.write_bytes(pickle.dumps({"x": _Payload()}))
    with pytest.raises(CheckpointError, match="refused|not a readable"):
        load_checkpoint(path)
    assert not marker.exists()


def kerple_state(H=4, layers=2):
    g = torch.Generator().manual_seed(0)
    sd = {}
    for layer in range(layers):
        sd[f"layers.{layer}.attention.bias_p"] = torch.rand(H, 1, 1, generator=g) * 2
        sd[f"layers.{layer}.attention.bias_a"] = torch.rand(H, 1, 1, generator=g)
        sd[f"layers.{layer}.attention.dense.weight"] = torch.randn(8, 8, generator=g)
    return sd


def test_kerple_needs_a_scheme_and_then_reads_both_variants_under_kerples_names(tmp_path):
    from safetensors.torch import save_file

    sd = kerple_state()
    save_file(sd, str(tmp_path / "k.safetensors"))
    with pytest.raises(CheckpointError, match="kerple-log.*kerple-power"):
        load_checkpoint(tmp_path / "k.safetensors")
    p = np.concatenate([sd[f"layers.{i}.attention.bias_p"].flatten().numpy() for i in range(2)]).astype(float)
    a = np.concatenate([sd[f"layers.{i}.attention.bias_a"].flatten().numpy() for i in range(2)]).astype(float)
    d = np.arange(4096.0)
    for scheme in ("kerple-log", "kerple-power"):
        ckpt = load_checkpoint(tmp_path / "k.safetensors", scheme=scheme)
        assert not any("dense" in k for k in ckpt.keys_read)
        report = analyse_checkpoint(ckpt, window=16, lengths=(256, 4096))
        for r, pp, aa in zip(report.rows, p, a, strict=True):
            # KERPLE's forward pass: log -bias_p log(1 + bias_a d); power -bias_a d^bias_p (bias_p in [0.01, 2])
            pp, aa = max(pp, 0.01), max(aa, 0.01)
            bias = -pp * np.log1p(aa * d) if scheme == "kerple-log" else -aa * d ** min(pp, 2.0)
            w = np.exp(bias - bias.max())
            assert r["distant_mass"]["4096"] == pytest.approx(w[16:].sum() / w.sum(), rel=1e-9, abs=1e-300)


def test_alibi_stored_and_implied(tmp_path):
    from safetensors.torch import save_file

    save_file({"blocks.0.attn.slopes": torch.tensor([0.5, 0.25])}, str(tmp_path / "a.safetensors"))
    assert [h.params["slope"] for h in load_checkpoint(tmp_path / "a.safetensors").heads] == [0.5, 0.25]
    save_file({"blocks.0.attn.qkv.weight": torch.zeros(24, 8)}, str(tmp_path / "b.safetensors"))
    ckpt = load_checkpoint(tmp_path / "b.safetensors", scheme="alibi", num_heads=8)
    assert [h.params["slope"] for h in ckpt.heads] == pytest.approx(otprior.encodings.ALiBi.slopes(8))
    assert ckpt.num_heads == 8 and ckpt.encoding_params["heads"] == 8
    with pytest.raises(CheckpointError, match="do not divide the hidden size 8"):
        load_checkpoint(tmp_path / "b.safetensors", scheme="alibi", num_heads=10**8)


def test_user_mapping(tmp_path):
    from safetensors.torch import save_file

    save_file({"enc.0.decay_exponent": torch.tensor([1.2, 0.95]), "enc.1.decay_exponent": torch.tensor([1.5, 2.0])}, str(tmp_path / "m.safetensors"))
    ckpt = load_checkpoint(tmp_path / "m.safetensors", scheme="log-distance", mapping={r"decay_exponent$": "alpha"})
    assert [h.params["alpha"] for h in ckpt.heads] == pytest.approx([1.2, 0.95, 1.5, 2.0])


def test_corrupt_missing_and_mismatched(tmp_path):
    from safetensors.torch import save_file

    (tmp_path / "junk.safetensors").write_bytes(os.urandom(200))
    with pytest.raises(CheckpointError, match="junk.safetensors"):
        load_checkpoint(tmp_path / "junk.safetensors")
    (tmp_path / "cut.pt").write_bytes(b"PK\x03\x04" + os.urandom(50))
    with pytest.raises(CheckpointError, match="cut.pt"):
        load_checkpoint(tmp_path / "cut.pt")
    sd = kerple_state(layers=1)
    del sd["layers.0.attention.bias_a"]
    save_file(sd, str(tmp_path / "missing.safetensors"))
    with pytest.raises(CheckpointError, match=r"layers\.0\.attention\.bias_a"):
        load_checkpoint(tmp_path / "missing.safetensors", scheme="kerple-log")
    sd = kerple_state(layers=1)
    sd["layers.0.attention.bias_a"] = torch.rand(3, 1, 1)
    save_file(sd, str(tmp_path / "shape.safetensors"))
    with pytest.raises(CheckpointError, match=r"bias_.*shape.*bias_"):
        load_checkpoint(tmp_path / "shape.safetensors", scheme="kerple-log")
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path / "absent.safetensors")
    with pytest.raises(CheckpointError, match="suffix"):
        load_checkpoint(tmp_path / "junk.safetensors".replace("safetensors", "txt")) if (tmp_path / "junk.txt").write_text("x") else None
    with pytest.raises(ValueError, match="scheme"):
        load_checkpoint(tmp_path / "missing.safetensors", scheme="sinusoidal")


def test_analysis_against_the_theory(tmp_path):
    from safetensors.torch import save_file

    alphas = torch.tensor([0.9, 1.05, 1.2, 1.6])
    raw = torch.log(torch.expm1(alphas - 1.0 - 0.05).clamp(min=1e-6))  # alpha = 1.05 + softplus(raw), clamped
    save_file({"blocks.0.attn.pos.alpha_raw": raw, "blocks.0.attn.pos.alpha_margin": torch.tensor([0.05])}, str(tmp_path / "c.safetensors"))
    report = analyse_checkpoint(tmp_path / "c.safetensors", window=64, lengths=(512, 8192), tol=0.05)
    assert report.lengths_note == "as given"
    assert report.margin.margin == otprior.margin_for(64, (512, 8192), 0.05).margin
    got = [r["decided_by"]["value"] for r in report.rows]
    assert all(r["decided_by"]["name"] == "alpha" and r["decided_by"]["boundary"] == 1.0 for r in report.rows)
    for r in report.rows:
        a = r["decided_by"]["value"]
        assert r["distance_from_boundary"] == pytest.approx(a - 1.0)
        assert r["distant_mass"]["8192"] == pytest.approx(otprior.distant_mass(64, 8192, a), rel=1e-12)
        assert r["kind"] == "bounded"  # alpha >= 1.05 by construction
    assert {(r["layer"], r["head"]) for r in report.near_boundary} == {(0, h) for h, a in enumerate(got) if a < 1.3628}
    json.loads(json.dumps(report.as_dict()), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert "within the margin" in report.format_text()
    assert report.nearest[0]["decided_by"]["value"] == min(got)


@pytest.mark.slow
def test_model_causal_ot_equals_the_library():
    S = torch.randn(2, 14, 14, dtype=torch.float64)
    for b in range(2):
        np.testing.assert_allclose(causal_ot_rows(S[b], 0.6, 300).numpy(), otprior.causal_ot_attention(S[b].numpy(), 0.6), atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["log-distance", "alibi", "kerple-log", "nope"])
def test_measured_distant_mass_lies_in_the_predicted_band(corpus, scheme):
    torch.manual_seed(1)
    model = train(ModelConfig(scheme=scheme, train_length=32, n_layers=2, n_heads=4), corpus[0], steps=20, batch_size=8).model
    out = measure_distant_mass(model, corpus[1], 128, 8, sequences=6)
    lo, hi = out["band"]
    # Theorem 10 with the content bound the rows actually satisfy: measured within the band
    assert np.all(lo <= out["measured"] + 1e-6) and np.all(out["measured"] <= hi + 1e-6)


def test_constant_content_gives_the_prior_exactly(corpus):
    model = ReferenceModel(ModelConfig(scheme="log-distance", train_length=32))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.weight[: 2 * model.cfg.d_model] = 0.0  # q = k = bias: content is constant
            block.attn.qkv.bias[: 2 * model.cfg.d_model] = 0.0
    out = measure_distant_mass(model, corpus[1], 256, 16, sequences=3)
    alpha = model.blocks[0].attn.pos.alpha()[0].item()
    assert out["measured"][0, 0] == pytest.approx(otprior.distant_mass(16, 256, alpha), abs=1e-6)
    assert np.allclose(out["content_bound"], 0.0, atol=1e-6)


def test_intervention_prediction_follows_the_prior(trained, corpus):
    rows = intervene(trained, corpus[1], eval_length=128, shifts=(-0.5, 0.5), batches=2, batch_size=4)
    steeper = [r for r in rows if r["shift"] > 0][0]
    flatter = [r for r in rows if r["shift"] < 0][0]
    assert steeper["prior_far_mass_after"] < steeper["prior_far_mass_before"] < flatter["prior_far_mass_after"]
    assert steeper["predicted_loss_direction"] == -1 and flatter["predicted_loss_direction"] == 1
    # the model is restored afterwards
    assert all(b.attn.pos.override is None for b in trained.blocks)


@pytest.mark.slow
def test_every_scheme_trains_a_step(corpus):
    from otprior.torch.model import SCHEMES

    for scheme in SCHEMES:
        cfg = ModelConfig(scheme=scheme, train_length=16, n_layers=1, n_heads=2, d_model=16, d_ff=32)
        result = train(cfg, corpus[0], steps=2, batch_size=2)
        assert np.all(np.isfinite(result.losses))


def test_yarn_frequencies():
    from otprior.torch.model import rope_frequencies

    inv, factor = rope_frequencies(16, 10000.0, yarn_scale=4.0, original_length=64)
    base, _ = rope_frequencies(16, 10000.0)
    assert factor == pytest.approx(0.1 * np.log(4.0) + 1)
    # high frequencies (beta_fast side) are kept, low ones interpolated by the scale
    assert inv[0] == pytest.approx(base[0])
    assert inv[-1] == pytest.approx(base[-1] / 4.0)


def test_bias_beyond_a_length_is_shifted_and_continuous():
    model = ReferenceModel(ModelConfig(scheme="log-distance", train_length=16, n_layers=1, n_heads=2))
    pos = model.blocks[0].attn.pos
    x = torch.zeros(1, 40, model.cfg.d_model)
    alpha = pos.alpha().detach().reshape(-1, 1)
    d = torch.arange(40, dtype=torch.float32)
    model.set_bias_beyond(16, 0.3)
    bias = pos(x)[0][:, -1, :].flip(-1)  # last query: bias against distance 0..39
    expected = torch.where(d < 16, -alpha * torch.log1p(d), -alpha * np.log1p(16) - (alpha + 0.3) * (torch.log1p(d) - np.log1p(16)))
    torch.testing.assert_close(bias, expected)
    model.set_bias_beyond(None, None)
    torch.testing.assert_close(pos(x)[0][:, -1, :].flip(-1), -alpha * torch.log1p(d))
