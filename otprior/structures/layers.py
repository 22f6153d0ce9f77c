"""Per-layer structure from a config: ``layer_types``, ``sliding_window``, ``max_window_layers``,
``attention_chunk_size``, ``no_rope_layers``, ``attn_logit_softcapping``, gpt-oss ``sinks`` aside.

transformers 5 writes ``layer_types`` (``"full_attention"``, ``"sliding_attention"``,
``"chunked_attention"``) into every config that mixes them; older configs imply them:

- Qwen2/Qwen3: sliding only when ``use_sliding_window``, and then on layers
  ``i >= max_window_layers`` (default 28); Qwen2-MoE: sliding iff ``use_sliding_window``, ``i`` even
  and ``i < max_window_layers``; Qwen3-MoE: every layer when ``use_sliding_window``;
- Gemma-2 and gpt-oss: every other layer local (even ``i``); Gemma-3: ``sliding_window_pattern`` (6: five
  local then one global); Cohere-2: ``sliding_window_pattern`` (4);
- Mistral, Mixtral, Ministral-3, Phi-3, PhiMoE, Starcoder2: one ``sliding_window`` on every layer when
  it is set (:data:`WINDOW_EVERY_LAYER`); any other model type's class ignores ``sliding_window``;
- Llama-4: ``attention_chunk_size`` on the layers ``no_rope_layers`` marks as RoPE layers.

These are the rules of transformers 5.24's config classes (their ``__post_init__``); the checkpoint
reader asks the installed config class to fill ``layer_types`` itself when it can.

:func:`layer_structures` returns one record per layer; the checkpoint reader names every field it
used and every attention field it did not model.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._validation import DomainError
from .composed import compose
from .masks import Chunked, FullCausal, SlidingWindow
from .softcap import SoftCap

__all__ = ["LayerStructure", "layer_structures", "LAYER_TYPES", "WINDOW_EVERY_LAYER"]

LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


@dataclass(frozen=True)
class LayerStructure:
    """One layer: its ``type`` (one of :data:`LAYER_TYPES`), its :class:`Structure` (no sink:
    sinks are tensors, added by the reader), and whether it rotates (``rope``; ``False`` on
    ``no_rope_layers``)."""

    layer: int
    type: str
    structure: object
    rope: bool = True


#: model types whose transformers class applies one ``sliding_window`` to every layer (the mask is
#: ``create_sliding_window_causal_mask`` whenever ``config.sliding_window`` is set; Qwen3-MoE only with
#: ``use_sliding_window``); any other model type without ``layer_types`` ignores the field
WINDOW_EVERY_LAYER = ("mistral", "mixtral", "ministral3", "phi3", "phimoe", "qwen3_moe", "starcoder2")


def _int(cfg, key, low=1):
    """An integer field (``None`` when absent), strict as transformers' config classes: an ``int``
    (never a float or a string, never a bool) at least ``low``."""
    v = cfg.get(key)
    if v is None:
        return None
    if type(v) is not int or v < low:
        raise DomainError(key, v, f"an integer >= {low} (transformers' config classes refuse other types)")
    return v


def _flag(cfg, key):
    """A boolean field (``False`` when absent), strict as transformers' config classes: a ``bool``."""
    v = cfg.get(key, False)
    if v is None:
        return False
    if type(v) is not bool:
        raise DomainError(key, v, "true or false (transformers' config classes refuse other types)")
    return v


def layer_structures(config: dict, num_layers: int, model_type: str = "") -> tuple:
    """The :class:`LayerStructure` of each of ``num_layers`` layers, from a (text) config dict.

    Returns ``(records, used)``: the records and the config keys that decided them.
    """
    cfg = config
    used = []
    if model_type == "qwen2_moe" and cfg.get("sliding_window") == 0 and type(cfg.get("sliding_window")) is int:
        cfg = {**cfg, "sliding_window": None}  # Qwen2MoeConfig writes 0 for "no window"
    window = _int(cfg, "sliding_window")
    chunk = _int(cfg, "attention_chunk_size")
    cap = cfg.get("attn_logit_softcapping")
    if cap is not None:
        if type(cap) not in (int, float) or not cap > 0:
            raise DomainError("attn_logit_softcapping", cap, "a positive number")
        used.append("attn_logit_softcapping")
    qwen = model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
    if qwen and not _flag(cfg, "use_sliding_window"):
        window = None  # the Qwen config classes drop sliding_window unless use_sliding_window, layer_types or not
    types = cfg.get("layer_types")
    if types is not None:
        if type(types) is not list or len(types) != num_layers or any(t not in LAYER_TYPES for t in types):
            raise DomainError("layer_types", types, f"a list of {num_layers} of {', '.join(LAYER_TYPES)}")
        used.append("layer_types")
    else:
        # transformers 5.24's own rules when a config has no layer_types (each config class's __post_init__)
        mt = model_type
        if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
            use = _flag(cfg, "use_sliding_window")
            first = _int(cfg, "max_window_layers", low=0)
            first = 28 if first is None else first  # the config classes' default
            if not use:
                window = None  # transformers drops sliding_window unless use_sliding_window
            used.append("use_sliding_window")
            if mt == "qwen3_moe":  # no layer types: Qwen3MoeAttention windows every layer (max_window_layers unused)
                types = ["sliding_attention" if window is not None else "full_attention"] * num_layers
            elif mt == "qwen2_moe":  # sliding iff (i + 1) % 2 and i < max_window_layers and use_sliding_window
                used.append("max_window_layers")
                types = ["sliding_attention" if window is not None and (i + 1) % 2 and i < first else "full_attention"
                         for i in range(num_layers)]  # fmt: skip
            else:  # Qwen2, Qwen3: sliding iff use_sliding_window and i >= max_window_layers
                used.append("max_window_layers")
                types = ["sliding_attention" if window is not None and i >= first else "full_attention" for i in range(num_layers)]
        elif mt in ("gemma2", "gpt_oss"):
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(num_layers)]
        elif mt in ("gemma3_text", "gemma3", "cohere2"):
            pattern = _int(cfg, "sliding_window_pattern")
            pattern = pattern if pattern is not None else 6 if mt.startswith("gemma3") else 4
            if "sliding_window_pattern" in cfg:
                used.append("sliding_window_pattern")
            types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(num_layers)]
        elif mt in ("llama4_text", "llama4"):
            flags = cfg.get("no_rope_layers")
            if type(flags) is not list or len(flags) != num_layers:
                interval = _int(cfg, "no_rope_layer_interval") or 4
                flags = [int((i + 1) % interval != 0) for i in range(num_layers)]
            types = ["chunked_attention" if f and chunk is not None else "full_attention" for f in flags]
        elif mt in WINDOW_EVERY_LAYER:
            types = ["sliding_attention" if window is not None else "full_attention"] * num_layers
        else:
            # the class of this model type never reads sliding_window (Llama, GPT-NeoX, ...): not a window
            types = ["full_attention"] * num_layers
    if window is not None and "sliding_attention" in types:
        used.append("sliding_window")
    if chunk is not None and "chunked_attention" in types:
        used.append("attention_chunk_size")
    no_rope = cfg.get("no_rope_layers")
    if no_rope is not None:
        if type(no_rope) is not list or len(no_rope) != num_layers:
            raise DomainError("no_rope_layers", no_rope, f"a list of {num_layers} flags (1: the layer rotates)")
        used.append("no_rope_layers")
    out = []
    for i, t in enumerate(types):
        parts = []
        if t == "sliding_attention":
            if window is None:
                why = " (with use_sliding_window set: transformers drops the window without it)" if qwen else ""
                raise DomainError("sliding_window", cfg.get("sliding_window"), "a window width for the sliding_attention layers" + why)
            parts.append(SlidingWindow(window))
        elif t == "chunked_attention":
            if chunk is None:
                raise DomainError("attention_chunk_size", None, "a chunk size for the chunked_attention layers")
            parts.append(Chunked(chunk))
        if cap is not None:
            parts.append(SoftCap(float(cap)))
        rope = bool(no_rope[i]) if no_rope is not None else True
        out.append(LayerStructure(i, t, compose(*parts) if parts else FullCausal(), rope))
    return tuple(out), tuple(dict.fromkeys(used))
