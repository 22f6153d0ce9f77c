"""ALiBi families: BLOOM, MPT (as transformers runs it, or the original), Falcon (ALiBi or RoPE)."""

from __future__ import annotations

from . import Architecture, register


def _bloom(cfg, family, implementation, rope):
    return "alibi", {"variant": "bloom"}, "BLOOM ALiBi"


def _mpt(cfg, family, implementation, rope):
    attn = cfg.value(["attn_config"], "dict", {})
    if implementation == "transformers":
        # transformers' MptModel builds build_mpt_alibi_tensor(num_heads, max_seq_len) with its default
        # alibi_bias_max = 8 on every layer, whatever attn_config says
        said = {k: attn[k] for k in ("alibi", "alibi_bias_max") if k in attn}
        ignored = f"; attn_config {said} ignored by that class (implementation='original' follows it)" if said else ""
        return "alibi", {"variant": "mpt", "alibi_bias_max": 8.0}, f"MPT ALiBi as transformers' MptModel runs it (alibi_bias_max 8){ignored}"
    if not cfg.value(["alibi"], "bool", True, data=attn):
        return "nope", {}, "MPT with attn_config.alibi = false: no relative bias (learned absolute positions enter the content)"
    return "alibi", {"variant": "mpt", "alibi_bias_max": float(cfg.value(["alibi_bias_max"], "float", 8.0, data=attn))}, "MPT ALiBi"


def _falcon(cfg, family, implementation, rope):
    if not cfg.value(["alibi"], "bool", False):
        return "rope", rope(cfg, family=family), "Falcon without ALiBi: RoPE"
    return "alibi", {"variant": "falcon"}, "Falcon ALiBi"


register(Architecture("bloom", ("bloom",), _bloom, early=True))
register(Architecture("mpt", ("mpt",), _mpt, early=True))
register(Architecture("falcon", ("falcon",), _falcon, early=True))
