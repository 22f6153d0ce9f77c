"""Rotary families: every ``rope_type`` the registry's RoPE takes; GPT-J and CodeGen rotate ``rotary_dim``
dimensions, Phi-3's legacy ``su`` is longrope, Gemma-3 rotates per layer type."""

from __future__ import annotations

from . import Architecture, register

ROPE_MODEL_TYPES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gpt_neox", "gpt_neox_japanese", "gptj",
    "gemma", "gemma2", "gemma3_text", "phi", "phi3", "olmo", "olmo2", "stablelm", "starcoder2", "cohere", "persimmon",
    "internlm2", "deepseek_v2", "deepseek_v3", "granite", "exaone", "codegen", "gpt_oss", "llama4_text",
    "cohere2", "smollm3", "helium", "glm", "olmo3", "minimax", "qwen3_next", "ernie4_5", "arcee", "dots1", "hunyuan_v1_dense",
)  # fmt: skip


def _rope(cfg, family, implementation, rope):
    return "rope", rope(cfg, family=family), f"{family or 'config'} RoPE"


register(Architecture("rope", ROPE_MODEL_TYPES, _rope))
