"""The attention structure of a checkpoint: per-layer windows and chunks, sinks, soft caps, the
multimodal text layout, absolute positions and the families with no relative prior.

Every structure object comes from :mod:`otprior.structures` (``layer_structures`` reads the config's
``layer_types``, ``sliding_window``, ``max_window_layers``, ``attention_chunk_size``,
``no_rope_layers``, ``attn_logit_softcapping``); this module adds what the tensors hold (gpt-oss
``sinks``), the families' own layer rules (GPT-Neo ``attention_layers``), and the list of config
fields that change attention but are not modelled, each named in the output.
"""

from __future__ import annotations

import re

from .. import structures as S
from .._validation import DomainError
from . import architectures

__all__ = [
    "ABSOLUTE_FAMILIES",
    "REFUSED_FAMILIES",
    "text_layout",
    "read_structures",
    "not_modelled",
    "position_limit",
]

#: Families whose positions are learned (or sinusoidal) vectors added to the input (Theorem S6), from the registry.
ABSOLUTE_FAMILIES = {t: a.absolute for t, a in architectures.REGISTRY.items() if a.absolute is not None}
#: Families refused (no attention layers, or attention beside state-space layers), from the registry.
REFUSED_FAMILIES = {t: a.refusal for t, a in architectures.REGISTRY.items() if a.refusal is not None}

#: multimodal layouts whose language model's config sits in ``text_config``
TEXT_CONFIG_FAMILIES = ("gemma3", "llama4", "mistral3", "llava", "paligemma", "qwen2_vl", "idefics3", "gemma3n")

_ATTENTION_KEY = re.compile(
    r"attn|attention|rope|rotary|window|sink|softcap|soft_cap|position|chunk|alibi|local|global|temperature|qk_norm|"
    r"qk_layernorm|layer_types|no_rope|scalar|multiplier|pos_emb|relative"
)
_WHY = {
    "query_pre_attn_scalar": "scales q.k (content) by its inverse square root: no effect on the constant-content prior",
    "attn_temperature_tuning": "Llama-4's position-dependent factor on the NoPE layers' queries: scales content only, "
    "so the content bound grows like log n there; not in the prior",
    "floor_scale": "with attn_temperature_tuning (content scale)",
    "attn_scale": "with attn_temperature_tuning (content scale)",
    "use_qk_norm": "normalises queries and keys: content",
    "qk_layernorm": "normalises queries and keys: content",
    "attention_bias": "biases of the projections: content",
    "attention_dropout": "training only",
    "attn_pdrop": "training only",
    "attention_multiplier": "a constant factor on q.k: content scale (Theorem N2's temperature); not in the constant-content prior",
    "final_logit_softcapping": "caps the output logits, not attention",
    "scale_attn_weights": "a constant factor on q.k: content",
    "scale_attn_by_inverse_layer_idx": "a constant factor on q.k per layer: content",
    "reorder_and_upcast_attn": "numerics of q.k only",
    "attn_softmax_bf16": "numerics of the softmax only",
    "max_window_layers": "read only with use_sliding_window (transformers drops the window otherwise)",
}
_NEVER_ATTENTION = re.compile(r"^(?:vision_|audio_|image_|mm_|boi_|eoi_|_)|expert|router|moe")


def text_layout(config: dict):
    """``(config of the language model, family, note)``: ``text_config`` for the multimodal layouts
    (Gemma-3 4B-27B, Llama-4, ...), the config itself otherwise."""
    family = config.get("model_type") if isinstance(config.get("model_type"), str) else ""
    text = config.get("text_config")
    if isinstance(text, dict) and (family in TEXT_CONFIG_FAMILIES or "model_type" in text):
        inner = text.get("model_type") if isinstance(text.get("model_type"), str) else f"{family}_text"
        return text, inner, f"multimodal layout ({family}): the language model's text_config ({inner}) is read, the vision tower is not"
    return config, family, ""


def position_limit(config: dict, family: str):
    """``(limit, key)``: the longest input the model's class can run, where it has one (learned absolute
    positions, MPT's ALiBi table, GPT-J's and CodeGen's ``n_positions`` rotary table), else ``(None, "")``."""
    for key in (ABSOLUTE_FAMILIES.get(family, (None,))[0], "n_positions" if family in ("gptj", "codegen") else None,
                "max_seq_len" if family == "mpt" else None):  # fmt: skip
        if key and type(config.get(key)) is int and config[key] > 0:
            return config[key], key
    return None, ""


def read_structures(config: dict, family: str, num_layers: int, sinks: dict, where: str):
    """``({layer: Structure or None}, used keys, notes)`` of a decoder's layers.

    ``sinks`` maps a layer to its per-head sink logits (gpt-oss), read from the tensors.
    """
    notes = []
    used = []
    if family == "gpt_neo":
        kinds = config.get("attention_layers")
        w = config.get("window_size")
        if type(kinds) is list and len(kinds) == num_layers and type(w) is int and w > 0:
            used += ["attention_layers", "attention_types", "window_size"]
            # GPT-Neo's local layers keep j with i - j < window_size: a sliding window of window_size keys
            records = [S.SlidingWindow(w) if k == "local" else None for k in kinds]
            out = dict(enumerate(records))
            notes.append(f"GPT-Neo local layers: a window of {w} keys (window_size)")
            return out, used, notes
    config, filled = transformers_layer_types(config, family, num_layers)
    if filled:  # transformers' class read its own rule's fields
        notes.append(filled)
        used_by_rule = [k for k in ("use_sliding_window", "max_window_layers", "sliding_window_pattern", "no_rope_layer_interval") if k in config]
    try:
        records, used = layer_structures_checked(config, num_layers, family)
    except DomainError as exc:
        from ._checkpoint import CheckpointError

        raise CheckpointError(f"{where}: {exc}") from None
    used = list(used) + (used_by_rule if filled else [])
    out = {}
    for r in records:
        parts = [p for p in r.structure.parts() if not isinstance(p, S.FullCausal)]
        if r.layer in sinks:
            parts.append(S.AttentionSink(tuple(float(x) for x in sinks[r.layer])))
        out[r.layer] = S.compose(*parts) if parts else None
    kinds = sorted({r.type for r in records})
    if kinds != ["full_attention"] or any(v is not None for v in out.values()):
        counts = {k: sum(r.type == k for r in records) for k in kinds}
        notes.append("layer types: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    if sinks:
        notes.append(f"attention sinks read from the tensors ({len(sinks)} layers)")
    return out, used, notes


def transformers_layer_types(config: dict, family: str, num_layers: int):
    """``(config, note)``: a config without ``layer_types`` (or without the ``sliding_window`` or
    ``attention_chunk_size`` its ``layer_types`` need) completed by the installed transformers'
    own config class (its ``__post_init__`` fills ``layer_types`` for the families that mix layer
    kinds, with its defaults for ``sliding_window`` and ``attention_chunk_size``), so the per-layer
    rule is transformers' own, not a copy of it. Unchanged (note ``""``) when the config has
    ``layer_types``, when transformers is absent or does not know the family, when its class fills
    no ``layer_types``, or when it refuses the config (the strict rules of
    :func:`otprior.structures.layer_structures` then name the field)."""
    given = config.get("layer_types")
    if not family or given is not None and not (
        type(given) is list
        and ("sliding_attention" in given and config.get("sliding_window") is None
             or "chunked_attention" in given and config.get("attention_chunk_size") is None)
    ):  # fmt: skip
        return config, ""  # layer_types given with what its layers need (or malformed: the strict rules refuse it)
    try:
        import transformers

        cls = transformers.CONFIG_MAPPING[family]
    except (ImportError, KeyError):
        return config, ""
    if type(config.get("num_hidden_layers")) is not int or config["num_hidden_layers"] != num_layers:
        return config, ""  # the class would build a list of num_hidden_layers entries: only the tensors' count
    if "layer_types" not in getattr(cls, "__dataclass_fields__", {}):
        return config, ""  # a class with no layer types (Mistral, Llama, ...): nothing to fill
    try:
        inst = cls.from_dict({k: v for k, v in config.items() if k != "model_type"})
    except Exception:  # noqa: BLE001 - transformers' own refusal: the strict rules below name the field
        return config, ""
    types = getattr(inst, "layer_types", None)
    if type(types) is not list or len(types) != num_layers or any(t not in S.LAYER_TYPES for t in types):
        return config, ""
    out = {**config, "layer_types": list(types)}
    added = []
    for kind, key in (("sliding_attention", "sliding_window"), ("chunked_attention", "attention_chunk_size")):
        if kind in types:
            value = getattr(inst, key, None)
            if value != config.get(key):
                added.append(f"{key} = {value}" + (" (transformers' default: the config has none)" if config.get(key) is None else
                                                   f" (transformers' value for the config's {config.get(key)!r})"))
            out[key] = value
    note = (f"layer types from transformers' {cls.__name__} (the config has no layer_types)" if given is None else
            f"the config's layer_types, with transformers' {cls.__name__} for what they need")
    return out, note + ("; " + ", ".join(added) if added else "")


def ignored_fields(config: dict, family: str, used) -> dict:
    """``{key: why}``: attention fields set in the config that the model's class does not use (a
    ``sliding_window`` on Llama or GPT-NeoX, a window without ``use_sliding_window`` on Qwen)."""
    out = {}
    cls = _class_name(family)
    for key in ("sliding_window", "max_window_layers", "sliding_window_pattern", "attention_chunk_size"):
        value = config.get(key)
        if key in used or value is None or value is False or value == 0:
            continue
        why = f"the {cls} ignores it"
        if family.startswith(("qwen2", "qwen3")) and config.get("use_sliding_window") is not True:
            why += " (use_sliding_window is not set)"
        out[key] = why
    return out


def _class_name(family: str) -> str:
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as names
    except ImportError:
        names = {}
    return names.get(family) or f"{family or 'model'} class"


def layer_structures_checked(config, num_layers, family):
    return S.layer_structures(config, num_layers, family)


_NESTED_READ = {"attn_config": ("alibi", "alibi_bias_max", "attn_pdrop", "attn_type", "attn_impl")}
_NESTED_WHY = {
    "softmax_scale": "a constant factor on q.k: content",
    "clip_qkv": "clips queries, keys and values: content",
    "qk_ln": "normalises queries and keys: content",
    "qk_gn": "normalises queries and keys: content",
}


def not_modelled(config: dict, read: set, why: dict | None = None) -> list:
    """``[(key, why)]``: config fields that name attention or positions and were not read (and the
    fields inside MPT's ``attn_config`` besides ALiBi's); ``why`` overrides the reason of a key."""
    why = why or {}
    out = []
    for outer, known in _NESTED_READ.items():
        inner = config.get(outer)
        if isinstance(inner, dict):
            for key, value in inner.items():
                if key not in known and value not in (None, False) and not (isinstance(value, dict | list) and not value):
                    out.append((f"{outer}.{key}", _NESTED_WHY.get(key, "not modelled: its effect on attention is not analysed")))
    for key, value in config.items():
        if key in read or not isinstance(key, str) or _NEVER_ATTENTION.search(key) or not _ATTENTION_KEY.search(key):
            continue
        if value is None or value is False or isinstance(value, dict | list) and not value:
            continue  # unset: changes nothing
        out.append((key, why.get(key) or _WHY.get(key, "not modelled: its effect on attention is not analysed")))
    return out
