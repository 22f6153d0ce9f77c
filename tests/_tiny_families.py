"""Tiny random-weight transformers models, one per family, built from configs (no downloads).

Every weight but the positional ones (sinks, T5 tables, position tables) is set to zero, so each
attention row is softmax(positional bias + mask) as the model's own code builds it: the
constant-content prior. ``own_rows`` runs the model's eager attention and returns the last query's
row per layer in distance order.
"""

import numpy as np
import torch

SW, CHUNK = 96, 128  # a window and a chunk that the lengths 256, 1024, 4096 exceed

_KEEP = ("sinks", "relative_attention_bias", "wpe", "embed_positions", "position_embeddings")


def _small(**kw):
    base = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                max_position_embeddings=8192)  # fmt: skip
    base.update(kw)
    return base


def _families():
    import transformers as T

    llama_rope = {
        "default": None,
        "linear": {"rope_type": "linear", "factor": 2.0},
        "dynamic": {"rope_type": "dynamic", "factor": 2.0},
        "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
        "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
        "longrope": {"rope_type": "longrope", "short_factor": [1.0] * 2, "long_factor": [2.0] * 2, "original_max_position_embeddings": 1024},
    }
    fam = {}
    for kind, scaling in llama_rope.items():
        kw = _small() if scaling is None else _small(rope_scaling=scaling)
        fam[f"llama-{kind}"] = lambda kw=kw: T.LlamaConfig(**kw)
    fam.update({
        "mistral": lambda: T.MistralConfig(**_small(sliding_window=SW)),
        "mixtral": lambda: T.MixtralConfig(**_small(sliding_window=SW, num_local_experts=2, num_experts_per_tok=1)),
        "qwen2-sliding": lambda: T.Qwen2Config(**_small(use_sliding_window=True, sliding_window=SW, max_window_layers=1)),
        "qwen3": lambda: T.Qwen3Config(**_small(head_dim=4)),
        "starcoder2": lambda: T.Starcoder2Config(**_small(sliding_window=SW)),
        "gemma": lambda: T.GemmaConfig(**_small(head_dim=4)),
        "gemma2": lambda: T.Gemma2Config(**_small(head_dim=4, sliding_window=SW)),
        "gemma3_text": lambda: T.Gemma3TextConfig(**_small(head_dim=4, sliding_window=SW, layer_types=["sliding_attention", "full_attention"],
                                                             rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 1024})),
        "cohere": lambda: T.CohereConfig(**_small()),
        "cohere2": lambda: T.Cohere2Config(**_small(sliding_window=SW, layer_types=["sliding_attention", "full_attention"])),
        "phi": lambda: T.PhiConfig(**_small(partial_rotary_factor=0.5)),
        "phi3-su": lambda: T.Phi3Config(**_small(pad_token_id=0, rope_scaling={"type": "su", "short_factor": [1.0] * 2, "long_factor": [2.0] * 2,
                                                               "original_max_position_embeddings": 1024})),
        "stablelm": lambda: T.StableLmConfig(**_small(partial_rotary_factor=0.5)),
        "persimmon": lambda: T.PersimmonConfig(**_small(num_key_value_heads=4)),
        "olmo2": lambda: T.Olmo2Config(**_small()),
        "smollm3": lambda: T.SmolLM3Config(**_small(pad_token_id=0, no_rope_layers=[1, 0])),
        "gpt_oss": lambda: T.GptOssConfig(**_small(head_dim=4, sliding_window=SW, num_local_experts=2, num_experts_per_tok=1)),
        "llama4_text": lambda: T.Llama4TextConfig(**_small(head_dim=4, attention_chunk_size=CHUNK, num_local_experts=1, intermediate_size_mlp=32,
                                                          no_rope_layers=[1, 0])),
        "gptj": lambda: T.GPTJConfig(vocab_size=64, n_embd=32, n_layer=1, n_head=2, rotary_dim=8, n_positions=8192),
        "codegen": lambda: T.CodeGenConfig(vocab_size=64, n_embd=32, n_layer=1, n_head=2, rotary_dim=8, n_positions=8192, n_ctx=8192),
        "gpt_neox": lambda: T.GPTNeoXConfig(**_small(hidden_size=32, num_key_value_heads=None)),
        "bloom": lambda: T.BloomConfig(vocab_size=64, hidden_size=24, n_layer=1, n_head=6),
        "mpt": lambda: T.MptConfig(vocab_size=64, d_model=24, n_layers=1, n_heads=6, max_seq_len=8192, attn_config={"alibi": True, "alibi_bias_max": 8}),
        "mpt-biasmax4": lambda: T.MptConfig(vocab_size=64, d_model=24, n_layers=1, n_heads=6, max_seq_len=8192, attn_config={"alibi": True, "alibi_bias_max": 4}),
        "mpt-noalibi": lambda: T.MptConfig(vocab_size=64, d_model=24, n_layers=1, n_heads=6, max_seq_len=8192, attn_config={"alibi": False}),
        "falcon-rope": lambda: T.FalconConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, new_decoder_architecture=True,
                                              num_kv_heads=2, max_position_embeddings=8192),
        "t5": lambda: T.T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=4),
        "mt5": lambda: T.MT5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=4),
        "umt5": lambda: T.UMT5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=4),
        "longt5": lambda: T.LongT5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=4,
                                         encoder_attention_type="transient-global"),
        "switch_transformers": lambda: T.SwitchTransformersConfig(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=2,
                                                                  num_heads=4, num_experts=2, encoder_sparse_step=2, decoder_sparse_step=2),
        "gpt2": lambda: T.GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=1024),
        "opt": lambda: T.OPTConfig(vocab_size=64, hidden_size=16, ffn_dim=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=1024,
                                   word_embed_proj_dim=16),
        "bart": lambda: T.BartConfig(vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                                     encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=1024),
        "gpt_neo": lambda: T.GPTNeoConfig(vocab_size=64, hidden_size=16, num_layers=2, num_heads=2, attention_types=[[["global", "local"], 1]],
                                          window_size=SW, max_position_embeddings=2048),
        "xglm": lambda: T.XGLMConfig(vocab_size=64, d_model=16, num_layers=1, attention_heads=2, ffn_dim=32, max_position_embeddings=2048),
        "gpt_bigcode": lambda: T.GPTBigCodeConfig(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=1024),
        "mamba": lambda: T.MambaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, state_size=4),
        "jamba": lambda: T.JambaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, num_experts=2,
                                       num_experts_per_tok=1, mamba_d_state=4, mamba_expand=1, use_mamba_kernels=False),
    })  # fmt: skip
    return fam


FAMILIES = _families()


def build(name, folder):
    """The model of ``name`` with positional weights only, saved in ``folder``: ``(folder, model)``."""
    import transformers as T

    torch.manual_seed(0)
    cfg = FAMILIES[name]()
    cls = T.AutoModelForSeq2SeqLM if getattr(cfg, "is_encoder_decoder", False) else T.AutoModelForCausalLM
    model = cls.from_config(cfg, attn_implementation="eager").eval()
    with torch.no_grad():
        for key, p in model.named_parameters():
            if "sinks" in key:
                p.copy_(torch.linspace(-1.0, 3.0, p.numel()).reshape(p.shape))  # sinks large enough to matter
            elif not any(k in key for k in _KEEP):
                p.zero_()
    model.save_pretrained(folder)
    if name == "phi3-su":  # the legacy layout Phi-3 checkpoints ship in (transformers rewrites it on save)
        import json
        from pathlib import Path

        path = Path(folder) / "config.json"
        data = json.loads(path.read_text())
        rope = data.pop("rope_parameters")
        rope.pop("rope_type", None)
        data["rope_theta"] = rope.pop("rope_theta")
        data["rope_scaling"] = {**rope, "type": "su"}
        path.write_text(json.dumps(data))
    return folder, model


@torch.no_grad()
def own_rows(model, n, ckpt):
    """``{(stack, layer): (H, n) array}``: the last query's attention row (distance order), by the model's eager code."""
    ids = torch.zeros(1, n, dtype=torch.long)
    kw = {"output_attentions": True, "use_cache": False}
    if getattr(model.config, "is_encoder_decoder", False):
        out = model(input_ids=ids, decoder_input_ids=ids, **kw)
        stacks = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions}
    else:
        out = model(input_ids=ids, **kw)
        stacks = {"": out.attentions}
    rows = {}
    for stack, maps in stacks.items():
        layers = [a for a in maps if a is not None]
        for layer, a in enumerate(layers):
            if a.dim() != 4:
                continue  # blocked maps (LongT5's encoder) are not rows of n keys
            rows[(stack, layer)] = a[0, :, -1, :].double().numpy()[:, ::-1].copy()
    return rows


def window_distant(row, W):
    """``1 - (mass on the W nearest keys)`` of a distance-ordered row."""
    return 1.0 - float(np.sum(row[:W]))
