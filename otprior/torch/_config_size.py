"""The size of a model built from its configuration, estimated before it is built.

A model run from a checkpoint (``checkpoint --measure``, ``intervene``) is first built from its
configuration and only then filled with the checkpoint's tensors, so a few bytes of config
(``"intermediate_size": 3e7``) could ask for tens of gigabytes. :func:`check_runnable_size` refuses
such a model before anything is built:

1. the parameter count is estimated from the configuration's own fields (for a decoder of
   ``L`` layers, width ``h``, ``a`` query heads and ``k`` key/value heads of width ``d``, MLP
   width ``f`` and vocabulary ``V``, with ``E`` experts per MLP)::

       P = 2 V h + L (h d (2 a + 2 k) + 3 E h f + 4 h + [E > 1] E h) + h

   (embeddings and an untied output head; the query, key, value and output projections; a gated
   MLP of three matrices per expert; norms and biases; the routers), which bounds the usual
   families from above but for learned position tables (an ungated MLP has two matrices, tied
   embeddings one table; the position tables are counted in step 3), and refused, naming the
   field whose term dominates, when ``4 P`` bytes (float32) exceed the memory cap;
2. layer, head and expert counts above :data:`MAX_REPEATS` are refused outright;
3. the model is then built on torch's ``meta`` device (no storage is allocated) and its exact
   parameter and buffer bytes are held to the memory cap and to twice the bytes of the
   checkpoint's tensor files plus :data:`SLACK_BYTES`, so that a family whose fields the formula
   does not know cannot grow beyond what its checkpoint holds.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ..limits import _human
from ..limits import current as current_caps
from ._formats import CheckpointError, _read_json

__all__ = ["check_runnable_size", "estimate_parameters"]

MAX_REPEATS = 1024  # layers, heads or experts of one model (the largest public models have under 300)
SLACK_BYTES = 64 << 20  # buffers and small tables a model may hold beyond its checkpoint's tensors
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")

_ALIASES = {
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim", "model_dim"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size", "moe_intermediate_size"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"),
    "head_dim": ("head_dim", "kv_channels"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
}


def _field(config, name, where):
    """``(alias, value)`` of the first alias ``config`` gives as a number; the value a
    non-negative integer (a float is rounded up, as the size it asks for)."""
    get = config.get if isinstance(config, dict) else lambda key, default=None: getattr(config, key, default)
    for alias in _ALIASES[name]:
        value = get(alias, None)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise CheckpointError(f"{where}: {alias} = {value!r} is not a finite size; refused before building the model")
            value = math.ceil(value)
        if value < 0:
            raise CheckpointError(f"{where}: {alias} = {value} is negative; refused before building the model")
        return alias, value
    return None, None


def estimate_parameters(config, where="config") -> tuple:
    """Upper estimate of the parameters of a decoder described by ``config`` (a dict or a
    ``transformers`` config object): ``(count, field, terms)`` with the formula of the module's
    docstring, ``field`` the config field of the largest term and ``terms`` the fields used.
    Fields the config lacks count as 0 (step 3 of :func:`check_runnable_size` covers them).

    Raises
    ------
    CheckpointError
        A layer, head or expert count above :data:`MAX_REPEATS`, or a size that is not finite.

    Notes
    -----
    Sub-configurations (a multimodal model's ``text_config``, ``vision_config``) are estimated
    the same way, down to four levels, and added.
    """
    if not isinstance(config, dict) and callable(getattr(config, "to_dict", None)):
        config = config.to_dict()  # every attribute, the family's defaults included, sub-configs as dicts
    return _estimate_nested(config, where, 0)


def _estimate_nested(config, where, depth):
    count, field, fields = _estimate_flat(config, where)
    if isinstance(config, dict) and depth < 4:
        own = count
        for key, value in config.items():
            if isinstance(value, dict):
                sub, sub_field, sub_fields = _estimate_nested(value, f"{where} ({key})", depth + 1)
                count += sub
                if sub > own:
                    own, field, fields = sub, f"{key}.{sub_field}", {f"{key}.{k}": v for k, v in sub_fields.items()}
    return count, field, fields


def _estimate_flat(config, where):
    got = {name: _field(config, name, where) for name in _ALIASES}
    for name in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "num_experts"):
        alias, value = got[name]
        if value is not None and value > MAX_REPEATS:
            raise CheckpointError(f"{where}: {alias} = {value}, above the {MAX_REPEATS} any model has; refused before building the model")
    val = {name: (v if v is not None else 0) for name, (_, v) in got.items()}
    h, f, L, V = val["hidden_size"], val["intermediate_size"], val["num_hidden_layers"], val["vocab_size"]
    a = val["num_attention_heads"]
    k = val["num_key_value_heads"] or a
    d = val["head_dim"] or (h // a if a else 0)
    E = max(val["num_experts"], 1)
    if f == 0 and got["intermediate_size"][0] is None:
        f = 4 * h  # the usual default MLP width
    terms = {
        "vocab_size": 2 * V * h,
        "head_dim" if got["head_dim"][0] else "num_attention_heads": L * h * d * (2 * a + 2 * k),
        "intermediate_size": L * 3 * E * h * f,
        "hidden_size": L * 4 * h + h,
        "num_experts": L * E * h if E > 1 else 0,  # the routers
    }
    largest = max(terms, key=terms.get)
    if largest == "intermediate_size" and E > 1 and val["num_experts"] > f:
        largest = "num_experts"
    alias = got[largest][0] or largest if largest in got else largest
    return sum(terms.values()), alias, {got[n][0]: v for n, (_, v) in got.items() if got[n][0]}


def _checkpoint_bytes(paths) -> int:
    """Bytes of the checkpoint's tensor files (their sizes, no read)."""
    total = 0
    for p in paths:
        try:
            total += os.stat(p).st_size
        except OSError:
            pass
    return total


def _refuse(where, what, nbytes, cap, why):
    raise CheckpointError(
        f"{where}: {what}: the model would need about {_human(nbytes)} as float32, above {why} of {_human(cap)}; refused before building it"
    )


def _check(where, count, field, fields, weights_bytes):
    cap = current_caps().max_bytes
    bound = min(cap, 2 * weights_bytes + SLACK_BYTES)
    shown = ", ".join(f"{k}={v}" for k, v in fields.items())
    named = f"{field} = {fields[field]}" if field in fields else field
    if 4 * count > cap:
        _refuse(where, f"{named} ({shown})", 4 * count, cap, "the memory cap (OTPRIOR_MAX_BYTES)")
    if 4 * count > bound:
        _refuse(where, f"{named} ({shown})", 4 * count, bound, "twice its checkpoint's tensor bytes plus 64 MiB")


def check_runnable_size(path) -> None:
    """Refuse, before it is built, a model whose configuration asks for more memory than the cap
    (``OTPRIOR_MAX_BYTES``) or than twice its checkpoint's tensor bytes plus 64 MiB.

    ``path`` is what :func:`otprior.torch.measurement.load_runnable` or
    :func:`otprior.torch.model.load_model` takes: a reference model's ``.safetensors`` (with its
    ``.json``) or a ``transformers`` model folder with ``config.json``. Anything else passes
    (the loader refuses it itself).

    Raises
    ------
    CheckpointError
        Naming the config field whose term of the estimate dominates, and the bytes needed.
    """
    path = Path(path)
    reference = path.with_suffix(".safetensors")
    if not path.is_dir() and reference.with_suffix(".json").is_file():
        where = reference.with_suffix(".json")
        raw = _read_json(where, "model config")
        count, field, fields = _reference_estimate(raw, where)
        _check(where, count, field, fields, _checkpoint_bytes([reference]))
        return
    if not (path.is_dir() and (path / "config.json").is_file()):
        return
    where = path / "config.json"
    raw = _read_json(where, "config")  # bounded, regular file, strict JSON: before transformers reads it
    weights = [path / n for n in sorted(os.listdir(path)) if n.endswith(_WEIGHT_SUFFIXES)]
    weights_bytes = _checkpoint_bytes(weights)
    count, field, fields = estimate_parameters(raw, where)
    _check(where, count, field, fields, weights_bytes)
    try:
        import transformers
    except ImportError:
        return
    import torch

    try:
        config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=False)
    except Exception:  # noqa: BLE001 - the loader reports an unreadable config itself
        return
    # the family's defaults fill what config.json leaves out (a bare llama config is 7B parameters)
    count, field, fields = estimate_parameters(config, where)
    _check(where, count, field, fields, weights_bytes)
    cls = transformers.AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else transformers.AutoModelForCausalLM
    try:
        with torch.device("meta"):
            model = cls.from_config(config)
    except Exception:  # noqa: BLE001 - the loader reports a config it cannot build itself
        return
    tensors = [*model.named_parameters(), *model.named_buffers()]
    count = sum(t.numel() for _, t in tensors)
    name, largest = max(tensors, key=lambda item: item[1].numel(), default=("none", None))
    shape = tuple(largest.shape) if largest is not None else ()
    # the config field whose value is the largest dimension of the largest tensor, else the tensor itself
    options = [(v, k) for k, v in config.to_dict().items() if type(v) is int and v > 1 and v in shape]
    field = f"{max(options)[1]} = {max(options)[0]}" if options else f"tensor {name} of shape {shape}"
    _check(where, count, field, {**fields, "parameters": count}, weights_bytes)


def _reference_estimate(raw, where):
    """The reference model (byte vocabulary of 256): embeddings and output head, per layer the four
    attention projections, the two MLP matrices, and norms and biases."""
    fields = {}
    for key in ("d_model", "n_layers", "n_heads", "d_ff"):
        value = raw.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value) or value < 0:
                raise CheckpointError(f"{where}: {key} = {value!r} is not a size; refused before building the model")
            fields[key] = math.ceil(value)
    if fields.get("n_layers", 0) > MAX_REPEATS or fields.get("n_heads", 0) > MAX_REPEATS:
        key = "n_layers" if fields.get("n_layers", 0) > MAX_REPEATS else "n_heads"
        raise CheckpointError(f"{where}: {key} = {fields[key]}, above the {MAX_REPEATS} any model has; refused before building the model")
    d, L, f = fields.get("d_model", 64), fields.get("n_layers", 2), fields.get("d_ff", 256)
    terms = {"d_model": 2 * 256 * d + L * (4 * d * d + 8 * d), "d_ff": L * (2 * d * f + f), "n_layers": 0}
    largest = max(terms, key=terms.get)
    return sum(terms.values()), largest, fields
