"""Every family transformers ships with a positional mechanism, read with no flags and checked against the
model's own constant-content attention (``tests/_tiny_families.py``): windows, chunks, sinks, caps,
per-layer types, absolute positions and the honest refusals."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from _tiny_families import CHUNK, FAMILIES, SW, build, own_rows, window_distant  # noqa: E402

from otprior.torch import CheckpointError, analyse_checkpoint, load_checkpoint  # noqa: E402

W = 64
REFUSED = {"mamba": "no attention layers", "jamba": "state-space"}
ABSOLUTE = {"gpt2", "opt", "bart", "gpt_neo", "xglm", "gpt_bigcode"}
FAST = ("gpt_oss", "llama4_text")  # the rest in the slow run (each build imports its family's modelling code)
# families whose eager path in transformers differs from the one otprior models (checked elsewhere)
SKIP_ROWS = {"falcon-rope": None}


def compare(name, folder, model, lengths):
    ck = load_checkpoint(folder)
    usable = [n for n in lengths if ck.position_limit is None or n <= ck.position_limit]
    rep = analyse_checkpoint(ck, window=W, lengths=tuple(usable) if len(usable) > 1 else (usable[0] - 1, usable[0]))
    worst, compared = 0.0, 0
    for n in usable:
        rows = own_rows(model, n, ck)
        for r in rep.rows:
            key = (r["stack"], r["layer"])
            if key not in rows or r["distant_mass"][str(n)] is None:
                continue
            worst = max(worst, abs(window_distant(rows[key][r["head"]], W) - r["distant_mass"][str(n)]))
            compared += 1
    return ck, rep, worst, compared


def expected_kinds(name, ck):
    """Per layer: a window keeps mass (S1), chunks oscillate (S2), otherwise the bias decides (Theorem 11;
    a soft cap or a sink does not change a RoPE layer's verdict, S3-S4)."""
    if name in ABSOLUTE:
        return {"undecided"}
    kinds = set()
    for st in ck.structures.values():
        parts = {p.name for p in st.parts()} if st is not None else set()
        if "sliding-window" in parts:
            kinds.add("bounded")
        elif "chunked" in parts:
            kinds.add("oscillating")
        else:
            kinds.add("bounded" if ck.scheme == "alibi" else "diluting")
    return kinds


def check(name, tmp_path, lengths):
    folder, model = build(name, tmp_path / name)
    if name in REFUSED:
        with pytest.raises(CheckpointError, match=REFUSED[name]):
            load_checkpoint(folder)
        return
    if name == "llama4_text":
        lengths = tuple(sorted({*lengths, 300}))  # mid-chunk: the query sees 300 mod 128 = 44 keys
    ck, rep, worst, compared = compare(name, folder, model, lengths)
    assert compared > 0
    assert worst < 1e-6, (name, worst)
    assert {r["kind"] for r in rep.rows} == expected_kinds(name, ck), name
    json_ok = rep.as_dict()
    assert json_ok["implementation"] == "transformers"


@pytest.mark.parametrize("name", FAST)
def test_structured_families_match_their_own_attention(name, tmp_path):
    check(name, tmp_path, (256, 1024))


def test_the_structure_read_is_the_one_the_model_runs(tmp_path):
    """What the reader says per layer, against the config transformers built."""
    folder, model = build("gpt_oss", tmp_path / "g")
    ck = load_checkpoint(folder)
    sliding = [i for i, t in enumerate(model.config.layer_types) if t == "sliding_attention"]
    for (_stack, layer), st in ck.structures.items():
        assert st.visible(10**6) == (SW if layer in sliding else 10**6)
        sinks = [p for p in st.parts() if p.name == "sink"][0].logit
        assert sinks == pytest.approx(model.model.layers[layer].self_attn.sinks.detach().double().tolist())
    folder, model = build("llama4_text", tmp_path / "l")
    ck = load_checkpoint(folder)
    assert ck.structures[("", 0)].visible(CHUNK + 1) == 1 and ck.structures[("", 1)] is None
    assert ck.layer_encoding_params[1] == {"__nope__": True}  # no_rope_layers[1] = 0
    assert any(k == "attn_temperature_tuning" for k, _ in ck.not_modelled)


def test_gemma3_global_layers_rotate_with_their_own_theta_and_factor(tmp_path):
    from otprior.torch import layer_encoding
    from otprior.torch._checkpoint import layer_groups

    folder, model = build("gemma3_text", tmp_path / "g3")
    ck = load_checkpoint(folder)
    local, full = (layer_encoding(ck, g) for g in layer_groups(ck.heads))
    assert local.rope_theta == 10000.0 and full.rope_theta == 1e6 and full.rope_type == "yarn"
    # the attention factor transformers applies on the global layers (YaRN: 0.1 ln s + 1 = 1.2079 for s = 8)
    rotary = model.model.rotary_emb
    factor = getattr(rotary, "full_attention_attention_scaling", None)
    assert factor is not None and full.cos_sin_factor == pytest.approx(float(factor), rel=1e-6)
    assert local.cos_sin_factor == 1.0
    assert full.cos_sin_factor > 1.2  # the 1.0 a single-theta reading would give is wrong here


def test_mpt_as_transformers_runs_it_and_as_the_original(tmp_path):
    folder, model = build("mpt-biasmax4", tmp_path / "m")
    ck, rep, worst, _ = compare("mpt-biasmax4", folder, model, (256,))
    assert worst < 1e-6 and "ignored" in ck.note and ck.implementation == "transformers"
    original = analyse_checkpoint(folder, window=W, lengths=(255, 256), implementation="original")
    assert original.checkpoint.implementation == "original"
    gap = max(abs(a["distant_mass"]["256"] - b["distant_mass"]["256"]) for a, b in zip(rep.rows, original.rows, strict=True))
    assert gap > 0.1  # the original code's bias max 4 is a different prior: both are reported, each named


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(FAMILIES) - set(SKIP_ROWS)))
def test_every_family_matches_its_own_attention(name, tmp_path):
    check(name, tmp_path, (256, 1024, 4096))


TEXT = bytes(range(256)) * 12


def test_measure_confirms_a_right_prior_and_fails_a_wrong_one(tmp_path):
    import dataclasses

    from otprior.torch import HeadParameters, measure_checkpoint

    folder, _ = build("bloom", tmp_path / "b")
    ok = measure_checkpoint(folder, TEXT, lengths=(128, 256), window=W, samples=1)
    assert ok.failed == [] and max(r["prediction_error"] for r in ok.rows) < 1e-6
    assert "prediction confirmed" in ok.format_text()
    ckpt = load_checkpoint(folder)
    wrong = dataclasses.replace(ckpt, heads=[HeadParameters(h.layer, h.head, {"slope": 2 * h.params["slope"]}, h.stack) for h in ckpt.heads])
    bad = measure_checkpoint(folder, TEXT, lengths=(128, 256), window=W, samples=1, checkpoint=wrong)
    assert len(bad.failed) > 0 and "FAILED" in bad.format_text() and bad.as_dict()["prediction"] == "FAILED"
    # the wrong prior is not absorbed into the content band: the content is read against the model's own row
    assert all(r["content_bound"] is not None and r["content_bound"] < 1e-5 for r in bad.rows)


@pytest.mark.slow
def test_measure_reads_sinks_caps_lengths_and_survives_blocked_maps(tmp_path):
    import dataclasses

    from otprior.torch import measure_checkpoint

    folder, _ = build("gpt_oss", tmp_path / "g")
    ckpt = load_checkpoint(folder)
    assert measure_checkpoint(folder, TEXT, lengths=(256,), window=W, samples=1).failed == []
    no_sinks = dataclasses.replace(ckpt, structures={k: None for k in ckpt.structures})  # the structure ignored, as before
    assert measure_checkpoint(folder, TEXT, lengths=(256,), window=W, samples=1, checkpoint=no_sinks).failed
    folder, _ = build("gpt2", tmp_path / "gpt2")  # n_positions 1024
    m = measure_checkpoint(folder, TEXT, lengths=(512, 2048), window=W, samples=1)
    assert m.lengths == (512,) and "above the model's position limit 1024" in m.note and m.failed == []
    folder, _ = build("longt5", tmp_path / "l")
    m = measure_checkpoint(folder, TEXT, lengths=(128,), window=8, samples=1)
    assert m.failed == [] and {r["stack"] for r in m.rows} == {"decoder"}


@pytest.mark.slow
def test_cli_names_the_implementation_and_a_wrong_one_fails_measure(tmp_path, capsys):
    import json

    from otprior.cli import main

    folder, _ = build("mpt-biasmax4", tmp_path / "m")
    text = tmp_path / "t.bin"
    text.write_bytes(TEXT)
    common = ["checkpoint", str(folder), "--window", "16", "--lengths", "64", "128", "--measure", "--text", str(text), "--json"]
    assert main(common) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["implementation"] == "transformers" and out["measurement"]["prediction"] == "confirmed"
    # MosaicML's alibi_bias_max = 4 is not what transformers' class runs: the measurement says so
    assert main([*common, "--implementation", "original"]) == 3  # a FAILED prediction: the report, then status 3
    out = json.loads(capsys.readouterr().out)
    assert out["implementation"] == "original" and out["measurement"]["prediction"] == "FAILED"


@pytest.mark.slow
def test_gemma3_multimodal_layout_reads_its_language_model(tmp_path):
    tc = dict(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=4,
              sliding_window=SW, layer_types=["sliding_attention", "full_attention"])  # fmt: skip
    vc = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14)
    cfg = transformers.Gemma3Config(text_config=tc, vision_config=vc, mm_tokens_per_image=4, image_token_index=299, boi_token_index=297,
                                    eoi_token_index=298)  # fmt: skip
    torch.manual_seed(0)
    cfg._attn_implementation = "eager"
    model = transformers.Gemma3ForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    model.save_pretrained(tmp_path / "g3mm")
    ck = load_checkpoint(tmp_path / "g3mm")
    assert ck.scheme == "rope" and ck.num_layers == 2 and "multimodal layout" in ck.structure_notes[0]
    assert ck.layer_encoding_params[1]["rope_theta"] == 1e6 and ck.layer_encoding_params[0]["rope_theta"] == 1e4
    rep = analyse_checkpoint(ck, window=W, lengths=(256, 1024))
    for n in (256, 1024):
        with torch.no_grad():
            out = model(input_ids=torch.zeros(1, n, dtype=torch.long), output_attentions=True, use_cache=False)
        for r in rep.rows:
            row = out.attentions[r["layer"]][0, r["head"], -1].double().numpy()[::-1]
            assert abs(window_distant(row, W) - r["distant_mass"][str(n)]) < 1e-6


@pytest.mark.slow
def test_measure_checks_falcon_against_its_default_path(tmp_path):
    from otprior.torch import measure_checkpoint

    cfg = transformers.FalconConfig(vocab_size=64, hidden_size=48, num_hidden_layers=1, num_attention_heads=3, alibi=True, multi_query=False,
                                    bias=True)  # fmt: skip
    torch.manual_seed(0)
    transformers.FalconForCausalLM(cfg).save_pretrained(tmp_path / "f")
    m = measure_checkpoint(tmp_path / "f", TEXT, lengths=(64, 300), window=8, samples=1)
    assert m.failed == [] and max(r["prediction_error"] for r in m.rows) < 1e-6 and "SDPA" in m.note


def test_a_new_family_is_one_registered_record(tmp_path):
    import json

    from safetensors.torch import save_file

    from otprior.torch import architectures as A

    assert A.lookup("bloom").family == "bloom" and A.lookup("gpt2").absolute == ("n_positions", "learned")
    assert A.lookup("mamba").refusal and A.lookup("nonexistent") is None
    with pytest.raises(TypeError, match="twice"):
        A.register(A.Architecture("again", ("bloom",)))
    toy = A.Architecture("toy", ("toy_alibi",), lambda cfg, family, impl, rope: ("alibi", {"variant": "bloom"}, "toy ALiBi"), early=True)
    A.register(toy)
    try:
        save_file({"h.0.attn.qkv.weight": torch.zeros(48, 16), "wte.weight": torch.zeros(8, 16)}, str(tmp_path / "model.safetensors"))
        (tmp_path / "config.json").write_text(json.dumps({"model_type": "toy_alibi", "n_head": 4, "n_layer": 1}))
        ck = load_checkpoint(tmp_path)
        assert ck.scheme == "alibi" and ck.num_heads == 4 and "toy ALiBi" in ck.note
    finally:
        del A.REGISTRY["toy_alibi"]


def test_hostile_structure_fields_are_refused_by_name(tmp_path):
    import json

    from safetensors.torch import save_file

    base = {"model_type": "mistral", "num_attention_heads": 4, "num_hidden_layers": 1, "hidden_size": 16}
    tensors = {"model.embed_tokens.weight": torch.zeros(8, 16), "model.layers.0.self_attn.q_proj.weight": torch.zeros(16, 16)}
    cases = [
        ({"sliding_window": True}, {}, "sliding_window"),
        ({"layer_types": "sliding_attention"}, {}, "layer_types"),
        ({"attn_logit_softcapping": -1.0}, {}, "attn_logit_softcapping"),
        ({}, {"model.layers.0.self_attn.sinks": torch.zeros(3)}, "sinks"),  # three sinks for four heads
        ({}, {"model.layers.0.self_attn.sinks": torch.tensor([0.0, float("inf"), 0.0, 0.0])}, "non-finite"),
    ]
    for i, (extra_cfg, extra_tensors, needle) in enumerate(cases):
        folder = tmp_path / str(i)
        folder.mkdir()
        save_file({**tensors, **extra_tensors}, str(folder / "model.safetensors"))
        (folder / "config.json").write_text(json.dumps({**base, **extra_cfg}))
        with pytest.raises(CheckpointError, match=needle):
            load_checkpoint(folder)


def test_measure_runs_the_positional_check_in_float32_for_a_bfloat16_checkpoint(tmp_path):
    from otprior.torch import measure_checkpoint

    _, model = build("bloom", tmp_path / "b32")
    model.to(torch.bfloat16).save_pretrained(tmp_path / "b16")
    m = measure_checkpoint(tmp_path / "b16", TEXT, lengths=(32, 64), window=8, samples=1)
    # a bfloat16 softmax output carries ~4e-3 relative rounding; the prior is checked in float32
    assert m.failed == [] and max(r["prediction_error"] for r in m.rows) < 1e-6, max(r["prediction_error"] for r in m.rows)
    assert "ran in float32" in m.note and "bfloat16" in m.note


def test_a_failed_prediction_ends_the_cli_with_status_3(tmp_path, capsys, monkeypatch):
    import dataclasses
    import json

    from otprior.cli import EXIT_PREDICTION_FAILED, main
    from otprior.torch import HeadParameters, measurement

    folder, _ = build("bloom", tmp_path / "b")
    text = tmp_path / "t.bin"
    text.write_bytes(TEXT)
    common = ["checkpoint", str(folder), "--window", "8", "--lengths", "32", "64", "--measure", "--text", str(text), "--json"]
    assert main(common) == 0 and json.loads(capsys.readouterr().out)["measurement"]["prediction"] == "confirmed"
    real = measurement.measure_checkpoint

    def wrong_prior(path, text, *, checkpoint, **kw):  # the slopes doubled: the model's own rows contradict it
        heads = [HeadParameters(h.layer, h.head, {"slope": 2 * h.params["slope"]}, h.stack) for h in checkpoint.heads]
        return real(path, text, checkpoint=dataclasses.replace(checkpoint, heads=heads), **kw)

    monkeypatch.setattr(measurement, "measure_checkpoint", wrong_prior)
    assert main(common) == EXIT_PREDICTION_FAILED == 3
    assert json.loads(capsys.readouterr().out)["measurement"]["prediction"] == "FAILED"


# configs without layer_types: (model type, fields); transformers 5.24's config class fills layer_types itself
_NO_LAYER_TYPES = [
    ("qwen2", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}),
    ("qwen2", {"use_sliding_window": True, "sliding_window": 8}),  # max_window_layers defaults to 28
    ("qwen2", {"use_sliding_window": False, "sliding_window": 8, "max_window_layers": 1}),
    ("qwen3", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 2}),
    ("qwen2_moe", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 3}),
    ("qwen2_moe", {"use_sliding_window": False, "sliding_window": 0}),
    ("gpt_oss", {"sliding_window": 8}),
    ("gemma2", {"sliding_window": 8}),
    ("gemma3_text", {"sliding_window": 8, "sliding_window_pattern": 2}),
    ("cohere2", {"sliding_window": 8}),
]


@pytest.mark.parametrize(("family", "fields"), _NO_LAYER_TYPES)
def test_layer_rules_without_layer_types_are_transformers_own(family, fields):
    from otprior import structures as S

    layers = 30
    theirs = transformers.CONFIG_MAPPING[family](num_hidden_layers=layers, **fields).layer_types
    records, _ = S.layer_structures(fields, layers, family)
    assert [r.type for r in records] == theirs, family


def _qwen3_moe_window(on):
    cfg = transformers.CONFIG_MAPPING["qwen3_moe"](num_hidden_layers=3, use_sliding_window=on, sliding_window=8, max_window_layers=1)
    return getattr(cfg, "layer_types", None), cfg.sliding_window


def test_window_only_where_the_class_reads_it(tmp_path):
    import json

    from otprior import structures as S

    # Qwen3-MoE has no layer_types: its attention takes config.sliding_window on every layer (None unless use_sliding_window)
    assert _qwen3_moe_window(True) == (None, 8) and _qwen3_moe_window(False) == (None, None)
    on = {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}
    assert [r.type for r in S.layer_structures(on, 3, "qwen3_moe")[0]] == ["sliding_attention"] * 3
    assert [r.type for r in S.layer_structures({**on, "use_sliding_window": False}, 3, "qwen3_moe")[0]] == ["full_attention"] * 3
    # Llama's class never reads sliding_window: the model's own rows are full-causal, and the field is named as ignored
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=1, max_position_embeddings=256)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()  # constant content: the rows are the model's positional part
    model.save_pretrained(tmp_path / "l")
    path = tmp_path / "l" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "sliding_window": 8}))
    ck = load_checkpoint(tmp_path / "l")
    assert ck.structures[("", 0)] is None
    assert ("sliding_window", "the LlamaForCausalLM ignores it") in ck.not_modelled
    rep = analyse_checkpoint(ck, window=4, lengths=(16, 32))
    for n in (16, 32):
        row = own_rows(model, n, ck)[("", 0)][0]
        assert abs(window_distant(row, 4) - rep.rows[0]["distant_mass"][str(n)]) < 1e-6


@pytest.mark.parametrize(("field", "value"), [("max_window_layers", 1.0), ("max_window_layers", "1"), ("use_sliding_window", "true"),
                                              ("use_sliding_window", 1)])  # fmt: skip
def test_fields_transformers_refuses_are_refused_by_name(field, value):
    from otprior import DomainError
    from otprior import structures as S

    fields = {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1, field: value}
    with pytest.raises(Exception, match=field):  # transformers refuses the config ...
        transformers.CONFIG_MAPPING["qwen2"](num_hidden_layers=2, **fields)
    with pytest.raises(DomainError, match=field):  # ... and so does the reader, naming the field
        S.layer_structures(fields, 2, "qwen2")


def test_a_chunk_inside_the_window_is_bounded_with_limit_zero(tmp_path):
    folder, model = build("llama4_text", tmp_path / "l4")
    ck = load_checkpoint(folder)
    rep = analyse_checkpoint(ck, window=CHUNK + 1, lengths=(200, 300))
    chunked = [r for r in rep.rows if "Chunked" in (r["structure"] or "")]
    assert chunked and all(r["kind"] == "bounded" and r["limit_distant_mass"] == 0.0 and r["distant_mass_bounds"] is None for r in chunked)
    for n in (200, 300):  # the model's own rows: every visible key lies in the window
        rows = own_rows(model, n, ck)
        for r in chunked:
            assert abs(window_distant(rows[(r["stack"], r["layer"])][r["head"]], CHUNK + 1)) < 1e-6


def test_gemma3_text_config_without_window_reads_transformers_default_and_no_text_config_is_named(tmp_path):
    import json

    from safetensors.torch import save_file

    from otprior import structures as S
    from otprior.torch._structure import read_structures

    text = {"model_type": "gemma3_text", "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]}
    default = transformers.Gemma3TextConfig(num_hidden_layers=2, layer_types=text["layer_types"]).sliding_window
    out, _, notes = read_structures(text, "gemma3_text", 2, {}, "cfg")
    assert out[0] == S.SlidingWindow(default) and out[1] is None
    assert any(f"sliding_window = {default} (transformers' default" in n for n in notes)
    save_file({"model.language_model.layers.0.self_attn.q_proj.weight": torch.zeros(16, 16)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3", "vision_config": {"hidden_size": 16}}))
    with pytest.raises(CheckpointError, match="without its text_config"):
        load_checkpoint(tmp_path)


def test_qwen_layer_types_without_use_sliding_window_have_no_window():
    from otprior import DomainError
    from otprior import structures as S

    fields = {"use_sliding_window": False, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]}
    assert transformers.Qwen2Config(num_hidden_layers=2, **fields).sliding_window is None  # dropped: the model cannot run it
    with pytest.raises(DomainError, match="use_sliding_window"):
        S.layer_structures(fields, 2, "qwen2")
