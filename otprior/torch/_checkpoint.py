"""Reading positional parameters out of checkpoints, safely.

What is read
------------
``load_checkpoint(PATH)`` takes

* a model folder: ``config.json`` beside ``model.safetensors``, sharded safetensors
  (``model.safetensors.index.json``), ``pytorch_model.bin`` (or its shard index), a
  GPT-NeoX/KERPLE pipeline folder of per-layer files ``layer_XX-model_YY-model_states.pt``,
  or a folder holding one checkpoint file;
* a single ``.safetensors`` file, or a torch zip archive (``.pt``, ``.pth``, ``.bin``,
  ``.ckpt``), with the JSON config beside it (``PATH.json`` or ``config.json``).

The scheme and its parameters come from the config's model type (the families are records of
:mod:`otprior.torch.architectures`, one file per family) and the tensor names; every
encoding (slopes, clamps, buckets, rotary scaling) is built by the :mod:`otprior.encodings`
registry from the parameters as stored (:func:`layer_encoding`), never by a formula here:

=================  ==========================================================================
family             positional parameters (per layer, per head)
=================  ==========================================================================
BLOOM              ALiBi, slopes implied by ``n_head`` (no tensor stores them)
MPT                ALiBi when ``attn_config.alibi``, slopes from ``alibi_bias_max``
Falcon             ALiBi when ``alibi``: BLOOM's slopes, the logits scaled by
                   :math:`1/\\sqrt{d_{head}}` and rounded to bfloat16 as Falcon builds them
T5, mT5, LongT5    the learned ``relative_attention_bias`` table (buckets x heads); the
                   encoder's is bidirectional (its causal half is read), the decoder's causal;
                   stored in block 0 and shared by every layer of its stack
Llama, Mistral,    RoPE: ``rope_theta``, ``head_dim``, the rotary fraction and every key of
Qwen2, GPT-NeoX    ``rope_parameters``/``rope_scaling`` the registry's RoPE takes; no bias (the
                   prior is uniform), the attention factor scales the logit bound
KERPLE             ``bias_p``/``bias_a``: log variant :math:`-p\\log(1 + a d)`, power
                   variant :math:`-a\\,d^{p}`, optional ``wei_a``/``wei_p`` multiplicative
                   kernel :math:`e^{-w_a d^{w_p}}` on the content logits
FIRE               ``c``, ``init_L``, ``L_multiplier`` and the MLP ``mlp.0``/``mlp.2`` (per head)
reference model    ``log-distance`` (``pos.alpha_raw``), ``alibi`` (stored ``slopes``),
                   ``kerple-log``, ``cable``, ``rope``, ``nope``, ``causal-ot``
=================  ==========================================================================

A ``scheme`` given by the caller confirms the detection and is refused when the config or
the tensors contradict it.

Resource limits (caps in :class:`otprior.limits.Caps`; the readers are in ``_formats``, the
attention structure in ``_structure``)
----------------------------------------------------------------
Only regular files are opened (a FIFO, device or socket is refused before any read; a
config symlinked to ``/dev/zero`` is a character device). JSON files are read up to a cap
and must be UTF-8 objects. Safetensors headers are parsed here, each entry's declared
size checked against the file's size, and only the positional tensors read (``pread`` of
their bytes). Torch archives are checked entry by entry before ``torch.load``: every entry
stored uncompressed inside the file, ``data.pkl`` below its cap; the load itself runs with
``weights_only=True`` and ``mmap=True``; bare and legacy pickles are refused. Every tensor
materialised is checked first: a plain strided, real floating-point tensor, its elements
within its storage (a zero-stride view of 2^26 elements over one stored value is refused),
its float64 copy below the cap. Methods are called through ``torch.Tensor`` itself, never
through the loaded object, whose stored state could shadow them. Counts from a config
(heads, layers) are bounded by what the tensors imply.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import encodings
from .._validation import DomainError
from . import architectures
from ._formats import CheckpointError, _open_source, _Source, _tensor_entries

__all__ = [
    "SCHEMES",
    "ROLES",
    "CheckpointError",
    "HeadParameters",
    "Checkpoint",
    "load_checkpoint",
    "checkpoint_from_state_dict",
    "checkpoint_from_model",
    "encoding_for",
    "layer_encoding",
    "layer_structure",
    "layer_groups",
]

# The registered encodings a checkpoint can hold; the rest are read under another name or never stored.
_NOT_STORED = {
    "bias": "an expression typed by a user, never a checkpoint's parameters",
    "yarn": "a RoPE scaling type, read as 'rope' with rope_type='yarn'",
}
SCHEMES = tuple(name for name in encodings.names() if name not in _NOT_STORED)
"""Scheme names: the :mod:`otprior.encodings` registry's, less those in ``_NOT_STORED``. The reference
model's scheme names (:data:`otprior.torch.model.SCHEMES`) are registry names as they stand."""
ROLES = ("alpha", "alpha_raw", "alpha_margin", "slope", "bias_p", "bias_a", "wei_p", "wei_a", "relative_attention_bias")
_PER_HEAD_ROLES = ("alpha", "alpha_raw", "slope", "bias_p", "bias_a", "wei_p", "wei_a")

_PATTERNS = {
    "alpha_raw": re.compile(r"(?:^|\.)pos\.alpha_raw$"),
    "alpha_margin": re.compile(r"(?:^|\.)pos\.alpha_margin$"),
    "slope": re.compile(r"(?:^|\.)(?:alibi_)?slopes$"),
    "bias_p": re.compile(r"(?:^|\.)bias_p$"),
    "bias_a": re.compile(r"(?:^|\.)bias_a$"),
    "wei_p": re.compile(r"(?:^|\.)wei_p$"),
    "wei_a": re.compile(r"(?:^|\.)wei_a$"),
    "relative_attention_bias": re.compile(r"(?:^|\.)relative_attention_bias\.weight$"),
}
_ROPE_KEYS = re.compile(r"(?:^|\.)rotary_emb\.inv_freq$")
_CABLE_KEYS = re.compile(r"(?:^|\.)pos\.increment\.weight$")
_FIRE_KEYS = re.compile(r"(?:^|\.)L_multiplier$")
_EMBED = re.compile(r"(?:^|\.)(?:word_embeddings|wte|embed_tokens|embed_in|shared|embed|tok_embeddings)\.weight$")

_IMPLEMENTATIONS = ("transformers", "original")
_TRAIN_LENGTH_KEYS = ("train_length", "seq_length", "max_seq_len", "max_position_embeddings", "n_positions", "max_sequence_length", "n_ctx")


@dataclass(frozen=True)
class HeadParameters:
    """The positional parameters of one head.

    Attributes
    ----------
    layer, head : int
    params : dict
        The parameters under their stored names (floats; a T5 head's ``table`` is a tuple).
    stack : str
        ``"encoder"`` or ``"decoder"`` for encoder-decoder models, else ``""``.
    """

    layer: int
    head: int
    params: dict
    stack: str = ""


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` read.

    Attributes
    ----------
    path : Path
    scheme : str
        One of :data:`SCHEMES`.
    heads : list of HeadParameters
    keys_read : list of str
        The only tensors materialised.
    bytes_read : int
        Their total size as stored.
    note : str
        How the scheme was chosen.
    config : dict
        The JSON config found, if any.
    family : str
        The model family (config ``model_type``, or ``"tensors"`` when decided by names alone).
    encoding_params : dict
        Scheme-wide keywords of the registry's encoding (ALiBi's ``variant``,
        ``alibi_bias_max``, ``head_dim``; RoPE's ``rope_theta``, ``rope_type`` and scaling
        keys; T5's ``stacks`` geometry).
    training_length : int or None
        The training length found in the config or a training record beside it.
    training_length_source : str
    num_layers, num_heads : int
    structures : dict
        ``{(stack, layer): Structure or None}`` (:mod:`otprior.structures`; ``None``: full causal):
        sliding windows, chunks, soft caps and sinks per layer (``proofs/attention_structure.md``).
    structure_notes : list of str
        What was read for the structure, in words.
    not_modelled : list of (str, str)
        Config fields that change attention (or name positions) and are not in the prior, with why.
    implementation : str
        Whose code the reading models: ``"transformers"`` (the class ``from_pretrained`` runs, the
        default) or ``"original"`` (the family's own code, where it differs: MPT).
    layer_encoding_params : dict
        ``{layer: encoding keywords}`` where a layer's encoding differs from ``encoding_params``
        (Gemma-3's per-layer-type RoPE).
    position_limit : int or None
        The longest input the model's class runs (learned positions, MPT's table), where it has one.
    """

    path: Path
    scheme: str
    heads: list
    keys_read: list
    bytes_read: int
    note: str
    config: dict = field(default_factory=dict)
    family: str = ""
    encoding_params: dict = field(default_factory=dict)
    training_length: int | None = None
    training_length_source: str = ""
    num_layers: int = 0
    num_heads: int = 0
    structures: dict = field(default_factory=dict)
    structure_notes: list = field(default_factory=list)
    not_modelled: list = field(default_factory=list)
    implementation: str = "transformers"
    layer_encoding_params: dict = field(default_factory=dict)
    position_limit: int | None = None
    position_limit_source: str = ""


# --------------------------------------------------------------------------- config values


class _Config:
    """Typed access to config values, each refused with one clear line when mistyped."""

    def __init__(self, data: dict, where: str):
        self.data = data
        self.where = where
        self.read = set()  # the top-level keys looked at (the rest are listed as not modelled when they touch attention)

    def value(self, names, kind, default=None, data=None):
        top = data is None
        data = self.data if data is None else data
        if top:
            self.read.update(names)
        for name in names:
            if name in data and data[name] is not None:
                v = data[name]
                ok = {
                    "int": type(v) is int and v > 0,
                    "float": type(v) in (int, float) and math.isfinite(v),
                    "bool": type(v) is bool,
                    "str": type(v) is str,
                    "dict": type(v) is dict,
                    "numbers": type(v) is list and len(v) <= 4096 and all(type(x) in (int, float) and math.isfinite(x) for x in v),
                }[kind]
                if not ok:
                    desc = {
                        "int": "a positive integer", "float": "a finite number", "bool": "true or false", "str": "a string",
                        "dict": "an object", "numbers": "a list of at most 4096 finite numbers",
                    }[kind]  # fmt: skip
                    raise CheckpointError(f"{self.where}: {name} = {v!r} is not {desc}")
                return v
        return default


# --------------------------------------------------------------------------- detection


def _config_scheme(cfg: _Config, family: str, implementation: str = "transformers"):
    """``(scheme, encoding_params, note)`` the config alone implies, or ``(None, {}, "")``."""
    c = cfg.data
    if "scheme" in c and "n_heads" in c and "d_model" in c:  # the reference model's ModelConfig
        scheme = cfg.value(["scheme"], "str")
        if scheme not in SCHEMES:
            raise CheckpointError(f"{cfg.where}: scheme = {scheme!r} is not one of {', '.join(SCHEMES)}")
        return scheme, {"variant": "bloom"} if scheme == "alibi" else {}, "reference-model config"
    arch = architectures.lookup(family)
    if arch is not None and arch.scheme is not None and arch.early:
        return arch.scheme(cfg, family, implementation, _rope_params)
    pos_emb = cfg.value(["pos_emb"], "str")
    if pos_emb is not None:  # GPT-NeoX / KERPLE configs
        if pos_emb.startswith("kerple_log"):
            return "kerple-log", {}, f"pos_emb = {pos_emb!r}"
        if pos_emb.startswith("kerple_power"):
            return "kerple-power", {}, f"pos_emb = {pos_emb!r}"
        if pos_emb == "alibi":
            return "alibi", {"variant": "bloom"}, "pos_emb = 'alibi'"
        if pos_emb == "rotary":
            return "rope", _rope_params(cfg), "pos_emb = 'rotary'"
        if pos_emb == "none":
            return "nope", {}, "pos_emb = 'none'"
    if cfg.value(["alibi", "use_alibi"], "bool", False) or cfg.value(["position_embedding_type"], "str") == "alibi":
        return "alibi", {"variant": "bloom"}, "the config's alibi setting"
    if arch is not None and arch.scheme is not None:
        return arch.scheme(cfg, family, implementation, _rope_params)
    if any(k in c for k in ("rope_theta", "rope_parameters", "rope_scaling", "rotary_emb_base")):
        return "rope", _rope_params(cfg, family=family), f"{family or 'config'} RoPE"
    return None, {}, ""


# config keys read for a RoPE parameter besides its own name (older configs and the reference model)
_ROPE_ALIASES = {"rope_type": ("type",), "rope_theta": ("rotary_emb_base", "rope_base"), "partial_rotary_factor": ("rotary_pct",)}
_ROPE_READ_ELSEWHERE = ("logit_bound", "seq_len", "head_dim")  # a bound, an evaluation length, and derived below
_ROPE_TOP_LEVEL = ("rope_theta", "partial_rotary_factor", "max_position_embeddings")  # also read beside the scaling dict
_KINDS = {int: "int", float: "float", bool: "bool", str: "str", tuple: "numbers"}


_LAYER_TYPE_KEYS = ("full_attention", "sliding_attention", "chunked_attention")


def _rope_params(cfg: _Config, layer_type=None, family="") -> dict:
    """The keywords of the registry's RoPE (:func:`otprior.encodings.parameters` ``("rope")``) found in
    the config: ``rope_parameters``/``rope_scaling`` first, then the config itself; ``head_dim``
    from the config or ``hidden_size / num_attention_heads``. Unknown scaling types are refused."""
    merged = {**(cfg.value(["rope_scaling"], "dict") or {}), **(cfg.value(["rope_parameters"], "dict") or {})}
    if any(k in merged for k in _LAYER_TYPE_KEYS):  # transformers 5: one rope dict per layer type (Gemma-3)
        chosen = merged.get(layer_type or "full_attention") or merged.get("full_attention") or {}
        if not isinstance(chosen, dict):
            raise CheckpointError(f"{cfg.where}: rope_parameters[{layer_type!r}] = {chosen!r} is not an object")
        merged = dict(chosen)
    elif layer_type == "sliding_attention" and cfg.value(["rope_local_base_freq"], "float") is not None:
        # Gemma-3's older configs: the local layers rotate with rope_local_base_freq and no scaling
        merged = {"rope_type": "default", "rope_theta": cfg.value(["rope_local_base_freq"], "float")}
    legacy = merged.get("rope_type", merged.get("type"))
    if legacy == "su" or (legacy == "yarn" and family == "phi3"):
        merged = {**merged, "rope_type": "longrope"}  # transformers' Phi-3 maps the legacy names to longrope
        merged.pop("type", None)
    out = {}
    for p in encodings.parameters("rope"):
        if p.name in _ROPE_READ_ELSEWHERE:
            continue
        kinds = {k for k in (getattr(p.type, "__args__", None) or (p.type,)) if k is not type(None)}
        kind = _KINDS[next(iter(kinds))]
        names = [p.name, *_ROPE_ALIASES.get(p.name, ())]
        value = cfg.value(names, kind, data=merged)
        if value is None and p.name in _ROPE_TOP_LEVEL:
            value = cfg.value(names, kind)
        if value is not None:
            out[p.name] = tuple(float(x) for x in value) if kind == "numbers" else value
    rope_type = out.setdefault("rope_type", "default")
    if rope_type not in encodings.ROPE_TYPES:
        raise CheckpointError(f"{cfg.where}: rope_type = {rope_type!r} is not one of {', '.join(encodings.ROPE_TYPES)}")
    head_dim = cfg.value(["head_dim"], "int")
    if head_dim is None:
        hidden = cfg.value(["hidden_size", "d_model", "n_embd"], "int")
        heads = cfg.value(["num_attention_heads", "n_heads", "n_head"], "int")
        if hidden is not None and heads is not None and hidden % heads == 0:
            head_dim = hidden // heads
    if head_dim is not None:
        out["head_dim"] = head_dim
        rotary_dim = cfg.value(["rotary_dim"], "int")  # GPT-J, CodeGen: the first rotary_dim dimensions rotate
        if rotary_dim is not None and "partial_rotary_factor" not in out:
            if rotary_dim > head_dim:
                raise CheckpointError(f"{cfg.where}: rotary_dim = {rotary_dim} exceeds the head dimension {head_dim}")
            out["partial_rotary_factor"] = rotary_dim / head_dim
    return out


def _tensor_schemes(keys):
    found = {role: [k for k in keys if p.search(k)] for role, p in _PATTERNS.items()}
    present = set()
    if found["alpha_raw"]:
        present.add("log-distance")
    if found["bias_p"] or found["bias_a"] or found["wei_p"] or found["wei_a"]:
        present.add("kerple")
    if found["slope"]:
        present.add("alibi")
    if found["relative_attention_bias"]:
        present.add("t5")
    if any(_ROPE_KEYS.search(k) for k in keys):
        present.add("rope")
    if any(_CABLE_KEYS.search(k) for k in keys):
        present.add("cable")
    found["fire"] = [k for k in keys if _FIRE_KEYS.search(k)]
    if found["fire"]:
        present.add("fire")
    return present, found


def _compatible(scheme, present):
    """Whether tensors of the kinds ``present`` can belong to ``scheme``."""
    family = "kerple" if scheme.startswith("kerple") else scheme
    return present <= {family}


# --------------------------------------------------------------------------- loading


def load_checkpoint(path, scheme=None, mapping=None, *, num_heads=None, implementation="transformers") -> Checkpoint:
    """Read the per-layer, per-head positional parameters of a checkpoint.

    Parameters
    ----------
    path : str or Path
        A model folder or a checkpoint file (see the module docstring).
    scheme : str, optional
        One of :data:`SCHEMES`. Decided from the config and the tensor names when omitted;
        when given it must agree with them (otherwise :class:`CheckpointError`).
    mapping : dict, optional
        ``{tensor name or regex: role}`` for layouts the names do not reveal; roles are
        :data:`ROLES`. Every mapped tensor is shape-checked: per-head roles ``(H,)`` or
        ``(H, 1, 1)``, ``relative_attention_bias`` ``(buckets, H)``, with one ``H`` for all
        (``num_heads`` when given). Requires ``scheme``.
    num_heads : int, optional
        The head count where no tensor stores one per head (ALiBi with implied slopes);
        bounded by the hidden size the tensors imply.
    implementation : {"transformers", "original"}
        Whose code to model where they differ: transformers' class (what ``from_pretrained`` runs,
        the default) or the family's original code (MPT's ``alibi_bias_max`` and ``alibi: false``).

    Returns
    -------
    Checkpoint
    """
    path = Path(path)
    if implementation not in _IMPLEMENTATIONS:
        raise DomainError("implementation", implementation, f"one of {', '.join(_IMPLEMENTATIONS)}")
    if scheme is not None and scheme not in SCHEMES:
        raise DomainError("scheme", scheme, f"one of {', '.join(SCHEMES)}")
    if num_heads is not None and (type(num_heads) is not int or num_heads < 1):
        raise DomainError("num_heads", num_heads, "a positive integer")
    source, config, config_path, record = _open_source(path)
    return _build(source, config, str(config_path or path), record, scheme, mapping, num_heads, implementation)


def checkpoint_from_state_dict(
    state_dict, config=None, *, scheme=None, mapping=None, num_heads=None, name="<state dict>", implementation="transformers"
) -> Checkpoint:
    """:func:`load_checkpoint` for a state dict in memory (a running model's), with its config dict."""
    if implementation not in _IMPLEMENTATIONS:
        raise DomainError("implementation", implementation, f"one of {', '.join(_IMPLEMENTATIONS)}")
    entries = _tensor_entries(dict(state_dict), Path(name))
    return _build(_Source(entries, "state dict in memory", Path(name)), dict(config or {}), name, {}, scheme, mapping, num_heads, implementation)


def checkpoint_from_model(model, *, scheme=None, mapping=None, num_heads=None, implementation="transformers") -> Checkpoint:
    """The positional parameters of a model in memory: an :class:`otprior.torch.ReferenceModel`
    or a ``transformers`` model (``model.config``)."""
    from dataclasses import asdict, is_dataclass

    cfg = getattr(model, "cfg", None)
    if is_dataclass(cfg):
        config = asdict(cfg)
    elif hasattr(model, "config") and hasattr(model.config, "to_dict"):
        config = json.loads(json.dumps(model.config.to_dict(), default=str))
    else:
        config = {}
    return checkpoint_from_state_dict(
        model.state_dict(), config, scheme=scheme, mapping=mapping, num_heads=num_heads, name=type(model).__name__, implementation=implementation
    )


def _training_length(cfg: _Config, record: dict, encoding_params: dict):
    original = encoding_params.get("original_max_position_embeddings")
    if original is not None:
        return int(original), "rope_scaling.original_max_position_embeddings in the config"
    rec = _Config(record, "training record")
    for key in ("train_length", "seq_length", "max_seq_length"):
        v = rec.value([key], "int")
        if v is not None:
            return v, f"{key} in the training record"
    for key in _TRAIN_LENGTH_KEYS:
        v = cfg.value([key], "int")
        if v is not None:
            return v, f"{key} in the config"
    return None, "not found"


def _hidden_size(source: _Source):
    for key in source.keys:
        if _EMBED.search(key) and len(source.shape(key)) == 2:
            return source.shape(key)[1], key
    dims = [(source.shape(k)[1], k) for k in source.keys if len(source.shape(k)) == 2 and re.search(r"(?:qkv|query_key_value|query|q_proj|Wqkv|c_attn|\.q)\.weight$", k)]
    return max(dims) if dims else (None, None)


def _layer_ids(source: _Source):
    return sorted({source.layer(k, -1) for k in source.keys if source.layer(k, -1) >= 0})


def _bounded_heads(H, source, where, what):
    hidden, key = _hidden_size(source)
    if hidden is None:
        raise CheckpointError(f"{where}: {what} = {H}, but no embedding or attention weight bounds the head count; refused")
    if H > hidden or hidden % H:
        raise CheckpointError(f"{where}: {what} = {H} heads do not divide the hidden size {hidden} of {key!r}; refused")
    return hidden // H


def _refuse_family(family, cfg, where):
    """Families with no relative prior to read (``architectures``): a refusal that says why and what can still be said."""
    arch = architectures.lookup(family)
    if arch is not None and arch.refusal is not None:
        raise CheckpointError(f"{where}: " + arch.refusal.format(family=family))


def _build(source, config, where, record, scheme, mapping, num_heads, implementation="transformers") -> Checkpoint:
    from ._structure import text_layout

    outer = config
    config, family, layout_note = text_layout(config)
    from ._structure import TEXT_CONFIG_FAMILIES

    if not layout_note and family in TEXT_CONFIG_FAMILIES and config.get("text_config") is None and config.get("num_hidden_layers") is None:
        raise CheckpointError(f"{where}: a {family} (multimodal) config without its text_config: the language model's settings "
                              "(layers, heads, positions) are missing")
    cfg = _Config(config, where)
    family = cfg.value(["model_type"], "str", "") or family or ""
    _refuse_family(family, cfg, where)
    if layout_note:
        # the language model's tensors only (the vision tower has layers of its own)
        lm = [k for k in source.keys if "language_model" in k]
        if lm:
            source = source.restricted(lm)
    keys = source.keys
    present, found = _tensor_schemes(keys)
    config_scheme, enc_params, config_note = _config_scheme(cfg, family, implementation)
    absolute = None
    arch = architectures.lookup(family)
    if arch is not None and arch.absolute is not None and mapping is None and config_scheme is None and not present:
        key, kind = arch.absolute
        P = cfg.value([key], "int")
        absolute = (P, key, kind)
        config_scheme, enc_params = "nope", {}
        config_note = (
            f"{family}: {kind} absolute positions ({key} = {P}) added to the input: no relative bias, read as NoPE "
            "with the 'absolute' structure (no relative prior; nothing beyond the position table)"
        )

    if mapping is not None:
        if scheme is None:
            raise DomainError("scheme", None, "a scheme name when a mapping is given")
        found = _mapped(mapping, keys, source, num_heads)
        note = f"scheme {scheme!r} with a user mapping"
        if scheme == "alibi" and "variant" not in enc_params:
            enc_params = {"variant": "bloom"}
    else:
        if config_scheme is not None:
            detected = config_scheme
            family_of = "kerple" if detected.startswith("kerple") else detected
            if present - {family_of}:
                raise CheckpointError(
                    f"{where}: the config says {detected} ({config_note}) but the tensors hold "
                    f"{', '.join(sorted(present - {family_of}))} parameters"
                )
            note = f"detected {detected!r} from the config ({config_note})"
        else:
            kinds = present
            if kinds == {"kerple"}:
                power_only = found["wei_p"] or found["wei_a"]
                if scheme in ("kerple-log", "kerple-power") and not (power_only and scheme == "kerple-log"):
                    detected = scheme
                elif power_only or not found["bias_p"] or not found["bias_a"]:
                    detected = "kerple-power"
                else:
                    raise CheckpointError(
                        f"{where}: KERPLE parameters (bias_p, bias_a) found; KERPLE's log and power variants share these "
                        "names: pass scheme='kerple-log' or scheme='kerple-power' (--scheme on the command line)"
                    )
            elif len(kinds) == 1:
                detected = next(iter(kinds))
            elif not kinds and scheme is not None:
                detected = scheme
            elif not kinds:
                raise CheckpointError(
                    f"{where}: no positional parameters recognised among {len(keys)} tensors and no model type in a config; "
                    "pass scheme= and mapping= (or scheme='alibi' with num_heads= for slopes implied by the head count)"
                )
            else:
                raise CheckpointError(f"{where}: parameters of several schemes found ({', '.join(sorted(kinds))}); pass scheme= and mapping=")
            if detected == "alibi":
                enc_params = {"variant": "bloom"}
            note = f"scheme {detected!r} as given" if not kinds else f"detected {detected!r} from the tensor names"
        if scheme is not None and scheme != detected:
            raise CheckpointError(f"{where}: scheme {scheme!r} contradicts the checkpoint, which holds {detected} ({note})")
        scheme = detected

    heads, layers, H = _heads(scheme, source, cfg, found, enc_params, num_heads, where)
    enc_params = dict(enc_params)
    if scheme == "rope" and not enc_params:
        enc_params = _rope_params(cfg, family=family)
    structure_notes = [layout_note] if layout_note else []
    if family == "longt5":
        heads = [h for h in heads if h.stack != "encoder"]
        kind = cfg.value(["encoder_attention_type"], "str", "local")
        structure_notes.append(
            f"LongT5's encoder ({kind} attention: bidirectional blocks of local_radius + 1"
            + (", with transient-global summary tokens (Theorem S5)" if kind == "transient-global" else "")
            + ") is not modelled; the decoder's causal T5 self-attention is read"
        )
        cfg.read.update(["encoder_attention_type", "local_radius", "global_block_size"])
    if absolute is not None and cfg.value(["is_encoder_decoder"], "bool", False):
        # BART-like: the decoder's causal self-attention is read; the encoder is bidirectional
        n_dec = cfg.value(["decoder_layers"], "int", len({h.layer for h in heads}))
        heads = [HeadParameters(layer, h.head, h.params, "decoder") for layer in range(n_dec) for h in heads if h.layer == 0]
        structure_notes.append("the encoder's bidirectional self-attention is not modelled; the decoder's causal self-attention is read")
        cfg.read.update(["decoder_layers", "encoder_layers", "decoder_attention_heads", "encoder_attention_heads"])
    structures, struct_notes, layer_params, limit = _structures_of(cfg, family, source, heads, scheme, enc_params, absolute, where)
    structure_notes += struct_notes
    train_length, train_source = _training_length(cfg, record, enc_params)
    from ._structure import not_modelled

    unmodelled = not_modelled(config, cfg.read, getattr(cfg, "ignored", None))
    checkpoint = Checkpoint(
        path=source.path,
        scheme=scheme,
        heads=heads,
        keys_read=[k for k, _ in source.read],
        bytes_read=sum(b for _, b in source.read),
        note=f"{note}; {source.description}",
        config=config,
        family=family or "tensors",
        encoding_params=enc_params,
        training_length=train_length,
        training_length_source=train_source,
        num_layers=len({h.layer for h in heads}) if family == "longt5" or absolute is not None else layers,
        num_heads=H,
        structures=structures,
        structure_notes=structure_notes,
        not_modelled=unmodelled,
        implementation=implementation,
        layer_encoding_params=layer_params,
        position_limit=limit[0],
        position_limit_source=limit[1],
    )
    if outer is not config:
        checkpoint.config = outer
    for group in layer_groups(heads):
        try:
            layer_encoding(checkpoint, group)  # the registry validates every parameter it is given
        except DomainError as exc:
            h = group[0]
            raise CheckpointError(f"{where}: {(h.stack + ' ') if h.stack else ''}layer {h.layer}: {exc}") from None
    return checkpoint


_SINKS = re.compile(r"(?:^|\.)(?:self_attn|attn|attention)\.sinks$")


def _structures_of(cfg, family, source, heads, scheme, enc_params, absolute, where):
    """``(structures, notes, per-layer encoding params, (position limit, its key))`` (module ``_structure``)."""
    from .. import structures as S
    from ._structure import position_limit, read_structures

    notes = []
    limit = position_limit(cfg.data, family)
    if limit[0] is not None:
        cfg.read.add(limit[1])
    stacks = sorted({h.stack for h in heads})
    out = {}
    layer_params = {}
    if absolute is not None:
        P, key, kind = absolute
        if P is None:
            raise CheckpointError(f"{where}: {family}: {kind} absolute positions, but no {key} in the config to bound them")
        st = S.AbsolutePositions(P, table=kind)
        cfg.read.update([key, "attention_layers", "attention_types", "window_size", "scale_embedding", "embed_scale"])
        win = {}
        if family == "gpt_neo":
            win, _, n2 = read_structures(cfg.data, family, len({h.layer for h in heads}), {}, where)
            notes += n2
        for h in heads:
            extra = win.get(h.layer)
            out[(h.stack, h.layer)] = st if extra is None else S.compose(extra, st)
        beyond = f"nothing is said beyond n = {P}" if kind == "learned" else "the sinusoidal table is computed at any length"
        notes.append(
            f"{kind} absolute positions ({key} = {P}): no term of the logits depends on the distance alone, so no relative "
            f"prior exists and {beyond} (Theorem S6); at constant scores the row is uniform"
        )
        return out, notes, layer_params, (P, key) if kind == "learned" else limit
    if stacks != [""] and absolute is None:
        return {(h.stack, h.layer): None for h in heads}, notes, layer_params, limit
    layers = sorted({h.layer for h in heads})
    sinks = {}
    for key in source.keys:
        if _SINKS.search(key):
            v = np.asarray(source.get(key), dtype=float).reshape(-1)
            sinks[source.layer(key, -1)] = tuple(v)
    if sinks:
        H = max(h.head for h in heads) + 1
        if any(len(v) != H for v in sinks.values()) or not set(sinks) <= set(layers):
            raise CheckpointError(f"{where}: the sinks tensors do not hold one logit per head ({H}) on known layers; refused")
    per_layer, used, more = read_structures(cfg.data, family, len(layers), {layers.index(k): v for k, v in sinks.items()}, where)
    from ._structure import ignored_fields

    cfg.ignored = ignored_fields(cfg.data, family, used)  # fields the model's class does not use: named, not read
    cfg.read.update(used)
    cfg.read.update({"sliding_window", "use_sliding_window", "sliding_window_pattern", "attention_chunk_size", "layer_types",
                     "no_rope_layers", "no_rope_layer_interval", "attn_logit_softcapping", "max_window_layers"} - set(cfg.ignored))
    notes += more
    for i, layer in enumerate(layers):
        out[("", layer)] = per_layer.get(i)
    if scheme == "rope":
        from ._structure import transformers_layer_types

        filled = transformers_layer_types(cfg.data, family, len(layers))[0]
        records, _ = S.layer_structures(filled, len(layers), family) if family != "gpt_neo" else ((), ())
        rope_dicts = {**(cfg.data.get("rope_scaling") or {}), **(cfg.data.get("rope_parameters") or {})}
        per_type = any(k in rope_dicts for k in _LAYER_TYPE_KEYS) or cfg.data.get("rope_local_base_freq") is not None
        for r in records:
            if per_type:
                layer_params[layers[r.layer]] = _rope_params(cfg, r.type, family)
            if not r.rope:
                layer_params[layers[r.layer]] = {"__nope__": True}
        if per_type:
            notes.append("RoPE per layer type: " + "; ".join(
                f"{t}: theta {p.get('rope_theta', 10000.0):g}, {p.get('rope_type', 'default')}"
                for t, p in {r.type: layer_params[layers[r.layer]] for r in records}.items()))
        if any(not r.rope for r in records):
            notes.append(f"NoPE layers (no_rope_layers): {sum(not r.rope for r in records)} of {len(records)}")
    return out, notes, layer_params, limit


def layer_structure(checkpoint: Checkpoint, heads):
    """The :mod:`otprior.structures` object of one layer's heads (``None``: full causal attention)."""
    heads = list(heads)
    if not heads or len({(h.stack, h.layer) for h in heads}) != 1:
        raise DomainError("heads", f"{len(heads)} heads", "a non-empty list of heads of one layer")
    st = checkpoint.structures.get((heads[0].stack, heads[0].layer))
    if st is None or st.heads is None:
        return st
    return st if len(heads) == st.heads else _sinks_for_heads(st, [h.head for h in heads])


def _sinks_for_heads(st, index):
    from .. import structures as S

    parts = [S.AttentionSink(tuple(p.logit[i] for i in index)) if isinstance(p, S.AttentionSink) and isinstance(p.logit, tuple) else p
             for p in st.parts()]
    return S.compose(*parts)


def layer_groups(heads):
    """The heads grouped by ``(stack, layer)`` in the order first met, each group in head order."""
    groups = {}
    for h in heads:
        groups.setdefault((h.stack, h.layer), []).append(h)
    return [sorted(g, key=lambda h: h.head) for g in groups.values()]


def _mapped(mapping, keys, source, num_heads):
    if not isinstance(mapping, dict) or not mapping:
        raise DomainError("mapping", mapping, "a non-empty dict {tensor name or regex: role}")
    found = {role: [] for role in ROLES}
    for pattern, role in mapping.items():
        if role not in ROLES:
            raise DomainError("mapping", f"{pattern}={role}", f"roles among {', '.join(ROLES)}")
        if not isinstance(pattern, str):
            raise DomainError("mapping", pattern, "tensor names or regular expressions (strings)")
        if pattern in source.entries:
            matched = [pattern]
        else:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise DomainError("mapping", pattern, f"a tensor name or a valid regular expression ({exc})") from None
            matched = [k for k in keys if regex.search(k)]
        if not matched:
            raise CheckpointError(f"{source.path}: mapping {pattern!r} -> {role} matches no tensor")
        found[role] += matched
    heads_seen = set() if num_heads is None else {num_heads}
    for role, ks in found.items():
        for k in ks:
            shape = source.shape(k)
            if role in _PER_HEAD_ROLES:
                if not (len(shape) == 1 or (len(shape) == 3 and shape[1:] == (1, 1))):
                    raise CheckpointError(f"{source.path}: {k!r} mapped to {role} has shape {shape}; a per-head role needs (H,) or (H, 1, 1)")
                heads_seen.add(shape[0])
            elif role == "relative_attention_bias":
                if len(shape) != 2:
                    raise CheckpointError(f"{source.path}: {k!r} mapped to {role} has shape {shape}; a bucket table needs (buckets, H)")
                heads_seen.add(shape[1])
            elif role == "alpha_margin" and math.prod(shape) != 1:
                raise CheckpointError(f"{source.path}: {k!r} mapped to {role} has shape {shape}; it needs one value")
    if len(heads_seen) > 1:
        raise CheckpointError(f"{source.path}: the mapped tensors disagree on the head count ({sorted(heads_seen)})")
    return found


def _per_head(values, key, path):
    v = np.asarray(values)
    if v.ndim == 3 and v.shape[1:] == (1, 1):
        v = v[:, 0, 0]
    if v.ndim != 1:
        raise CheckpointError(f"{path}: {key!r} has shape {v.shape}; per-head parameters need (H,) or (H, 1, 1)")
    return v


def _partner(key, candidates):
    prefix = key.rsplit(".", 1)[0]
    for c in candidates:
        if c.rsplit(".", 1)[0] == prefix:
            return c
    return None


def _renumber(heads):
    """Layers numbered 0, 1, ... in the order found (pipeline files count from their index)."""
    order = {layer: i for i, layer in enumerate(sorted({h.layer for h in heads}))}
    return [HeadParameters(order[h.layer], h.head, h.params, h.stack) for h in heads]


def _config_layers(cfg, names, tensor_layers, where):
    n = cfg.value(names, "int")
    if n is not None and tensor_layers and n != len(tensor_layers):
        raise CheckpointError(f"{where}: {names[0]} = {n} but the tensors hold {len(tensor_layers)} layers; refused")
    return len(tensor_layers) or 1


def _heads(scheme, source, cfg, found, enc_params, num_heads, where):
    path = source.path
    heads = []
    if scheme == "log-distance":
        raw_keys = found.get("alpha") or found.get("alpha_raw")
        if not raw_keys:
            raise CheckpointError(f"{where}: missing key for the log-distance exponent (…pos.alpha_raw)")
        direct = bool(found.get("alpha"))
        for order, key in enumerate(raw_keys):
            values = _per_head(source.get(key), key, path)
            if direct:
                alphas = values
            else:
                mk = _partner(key, found.get("alpha_margin", []))
                if mk is not None:
                    margin = float(source.get(mk).reshape(-1)[0])
                else:
                    margin = cfg.value(["alpha_margin"], "float")
                    if margin is None:
                        raise CheckpointError(f"{where}: missing key {key.rsplit('.', 1)[0] + '.alpha_margin'!r} (and no alpha_margin in the config)")
                alphas = 1.0 + margin + np.logaddexp(0.0, values)  # alpha = 1 + margin + softplus(raw)
            heads += [HeadParameters(source.layer(key, order), h, {"alpha": float(a)}) for h, a in enumerate(alphas)]
    elif scheme in ("kerple-log", "kerple-power"):
        heads = _kerple(scheme, source, found, where)
    elif scheme == "alibi":
        slope_keys = found.get("slope", [])
        if slope_keys:
            for order, key in enumerate(slope_keys):
                heads += [HeadParameters(source.layer(key, order), h, {"slope": float(m)}) for h, m in enumerate(_per_head(source.get(key), key, path))]
        else:
            heads = _implied_alibi(source, cfg, enc_params, num_heads, where)
    elif scheme == "t5":
        heads = _t5(source, cfg, found, enc_params, where)
    elif scheme == "fire":
        heads = _fire(source, found, where)
    elif scheme in ("rope", "nope", "cable", "causal-ot"):
        H = num_heads or cfg.value(["n_heads", "num_attention_heads", "n_head", "num_heads", "decoder_attention_heads", "attention_heads"], "int")
        if H is None:
            raise CheckpointError(f"{where}: {scheme}: no head count in the config; pass num_heads=")
        _bounded_heads(H, source, where, "the head count")
        layers = _config_layers(cfg, ["n_layers", "num_hidden_layers", "n_layer", "num_layers"], _layer_ids(source), where)
        params = {}
        if scheme == "cable":
            params = {"min_increment": 0.0}  # softplus increments can come arbitrarily close to 0: the worst case
        if scheme == "causal-ot":
            params = {"rho": float(cfg.value(["ot_rho"], "float", 0.5))}
        heads = [HeadParameters(layer, h, dict(params)) for layer in range(layers) for h in range(H)]
    if not heads:
        raise CheckpointError(f"{where}: scheme {scheme!r} found no heads")
    if source.layer_of:
        heads = _renumber(heads)
    for head in heads:
        for name, value in head.params.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise CheckpointError(f"{where}: layer {head.layer} head {head.head}: {name} = {value} is not finite")
    layers = len({(h.stack, h.layer) for h in heads})
    counts = {}
    for h in heads:
        counts[(h.stack, h.layer)] = counts.get((h.stack, h.layer), 0) + 1
    H = max(counts.values())
    declared = cfg.value(["n_heads", "num_attention_heads", "n_head", "num_heads"], "int")
    if declared is not None and scheme not in ("rope", "nope", "cable", "causal-ot") and declared != H:
        raise CheckpointError(f"{where}: the config says {declared} heads but the tensors hold {H} per layer; refused")
    return heads, layers, H


def _kerple(scheme, source, found, where):
    """KERPLE (``ParallelKerpleLog``, ``ParallelKerplePower``): ``bias_p``, ``bias_a`` (and the power
    variant's ``wei_p``, ``wei_a``) of shape ``(H, 1, 1)``, kept as the forward pass uses them:
    clamped by :func:`otprior.encodings.kerple_clamp`, the registry's one copy of KERPLE's clamps."""
    p_keys, a_keys = found.get("bias_p", []), found.get("bias_a", [])
    wp_keys, wa_keys = found.get("wei_p", []), found.get("wei_a", [])
    anchors = p_keys or a_keys or wa_keys or wp_keys
    if scheme == "kerple-log":
        for have, other, name in ((p_keys, a_keys, "bias_a"), (a_keys, p_keys, "bias_p")):
            for k in have:
                if _partner(k, other) is None:
                    raise CheckpointError(
                        f"{where}: missing key {k.rsplit('.', 1)[0] + '.' + name!r}: KERPLE-log needs both bias_p and bias_a "
                        "(the kernel -bias_p log(1 + bias_a d))"
                    )
    heads = []
    for order, anchor in enumerate(anchors):
        layer = source.layer(anchor, order)
        values = {}
        for name, ks in (("bias_p", p_keys), ("bias_a", a_keys), ("wei_p", wp_keys), ("wei_a", wa_keys)):
            k = _partner(anchor, ks)
            if k is None and ks:
                raise CheckpointError(f"{where}: missing key {anchor.rsplit('.', 1)[0] + '.' + name!r} beside {anchor!r}")
            if k is not None:
                values[name] = (_per_head(source.get(k), k, source.path), k)
        shapes = {name: v.shape for name, (v, _) in values.items()}
        if len(set(shapes.values())) > 1:
            (n1, (_, k1)), (n2, (_, k2)) = list(values.items())[:2]
            raise CheckpointError(f"{where}: key {k1!r} has shape {shapes[n1]} but {k2!r} has shape {shapes[n2]}")
        H = next(iter(shapes.values()))[0]
        variant = scheme.split("-")[1]
        used = {}
        for name, (v, k) in values.items():
            try:
                used[name] = encodings.kerple_clamp(variant, name, v)  # as the forward pass uses them
            except DomainError:
                raise CheckpointError(f"{where}: {k!r} is not a parameter of KERPLE's {variant} variant") from None
        heads += [HeadParameters(layer, h, {name: used[name][h] for name in used}) for h in range(H)]
    return heads


def _implied_alibi(source, cfg, enc_params, num_heads, where):
    """ALiBi slopes implied by the head count (no tensor stores them), from :class:`otprior.encodings.ALiBi`
    (``variant`` and ``alibi_bias_max`` from the config; ``head_dim`` for Falcon)."""
    names = ["n_head", "num_attention_heads", "n_heads"]
    H = num_heads if num_heads is not None else cfg.value(names, "int")
    if H is None:
        raise CheckpointError(f"{where}: no stored ALiBi slopes and no head count in a config; pass num_heads=")
    head_dim = _bounded_heads(H, source, where, "num_heads" if num_heads is not None else "the config's head count")
    layers = _config_layers(cfg, ["n_layer", "num_hidden_layers", "n_layers"], _layer_ids(source), where)
    if enc_params.get("variant") == "falcon":
        enc_params["head_dim"] = head_dim  # Falcon scales the biased logits by 1/sqrt(head_dim)
    # the slopes as the family builds them: the registry's ALiBi for that many heads
    slopes = encodings.get("alibi", heads=H, **enc_params).slope
    enc_params["heads"] = H
    return [HeadParameters(layer, h, {"slope": float(m)}) for layer in range(layers) for h, m in enumerate(slopes)]


def _t5(source, cfg, found, enc_params, where):
    """T5's ``relative_attention_bias`` (``(num_buckets, H)``), in block 0 of each stack and
    shared by every layer of it (a table in every block is read per layer)."""
    keys = found.get("relative_attention_bias", [])
    if not keys:
        raise CheckpointError(f"{where}: missing …relative_attention_bias.weight")
    nb = cfg.value(["relative_attention_num_buckets"], "int", None)
    max_distance = cfg.value(["relative_attention_max_distance"], "int", 128)
    heads = []
    stacks = {}
    for k in keys:
        stack = "encoder" if k.startswith("encoder.") else "decoder" if k.startswith("decoder.") else ""
        stacks.setdefault(stack, []).append(k)
    is_enc_dec = cfg.value(["is_encoder_decoder"], "bool", bool(stacks.keys() & {"encoder", "decoder"}))
    for stack, ks in stacks.items():
        bidirectional = stack == "encoder" or (stack == "" and not is_enc_dec and not cfg.value(["is_decoder"], "bool", True))
        layer_ids = sorted({source.layer(k2, -1) for k2 in source.keys if k2.startswith(stack + ".") and source.layer(k2, -1) >= 0}) if stack else []
        names = ["num_layers"] if stack == "encoder" else ["num_decoder_layers", "num_layers"]
        n_layers = _config_layers(cfg, names, layer_ids, where) if layer_ids else 1
        tables = {}
        for order, k in enumerate(ks):
            table = source.get(k)
            if table.ndim != 2:
                raise CheckpointError(f"{where}: {k!r} has shape {table.shape}; a bucket table needs (num_buckets, heads)")
            if nb is not None and table.shape[0] != nb:
                raise CheckpointError(f"{where}: {k!r} has {table.shape[0]} buckets but relative_attention_num_buckets = {nb}")
            tables[source.layer(k, order)] = table
        geometry = {"num_buckets": next(iter(tables.values())).shape[0], "max_distance": max_distance, "bidirectional": bidirectional}
        try:
            encodings.T5Buckets(**geometry)  # the registry's domain: enough buckets, max_distance above the exact ones
        except DomainError as exc:
            raise CheckpointError(f"{where}: the {stack or 'self'}-attention bucket table is outside T5's domain: {exc}") from None
        enc_params.setdefault("stacks", {})[stack or "self"] = geometry
        for layer in range(n_layers):
            table = tables.get(layer, tables[min(tables)])  # shared from block 0 as T5 shares it
            # the whole column as stored; a bidirectional table's causal half is chosen by T5Buckets
            heads += [HeadParameters(layer, h, {"table": tuple(float(x) for x in table[:, h])}, stack) for h in range(table.shape[1])]
    return heads


def _fire(source, found, where):
    """FIRE (``cramming/architectures/embeddings.py``): ``c``, ``init_L``, ``L_multiplier`` and the
    MLP ``mlp.0`` (1 -> width), ReLU, ``mlp.2`` (width -> H); per head ``c``, ``L = L_multiplier *
    init_L`` and the MLP's weights for :class:`otprior.encodings.FIRE` (``mlp=``)."""
    heads = []
    for order, anchor in enumerate(found.get("fire", [])):
        prefix = anchor[: -len("L_multiplier")]
        names = {"c": "c", "init_L": "init_L", "w0": "mlp.0.weight", "b0": "mlp.0.bias", "w2": "mlp.2.weight", "b2": "mlp.2.bias"}
        missing = [prefix + n for n in names.values() if prefix + n not in source.entries]
        if missing:
            raise CheckpointError(f"{where}: FIRE parameters beside {anchor!r} lack {missing[0]!r}")
        shapes = {k: source.shape(prefix + n) for k, n in names.items()}
        width = shapes["b0"][0] if len(shapes["b0"]) == 1 else -1
        H = shapes["b2"][0] if len(shapes["b2"]) == 1 else -1
        if (
            math.prod(shapes["c"]) != 1
            or math.prod(shapes["init_L"]) != 1
            or math.prod(source.shape(anchor)) != 1
            or shapes["w0"] != (width, 1)
            or shapes["w2"] != (H, width)
            or width < 1
            or H < 1
        ):
            raise CheckpointError(f"{where}: FIRE parameters under {prefix!r} have inconsistent shapes {shapes}")
        # as stored: the registry's FIRE takes |c| and |L| as the reference code does, and refuses c = 0
        c = float(source.get(prefix + "c").reshape(-1)[0])
        L = float(source.get(anchor).reshape(-1)[0]) * float(source.get(prefix + "init_L").reshape(-1)[0])
        w0, b0 = source.get(prefix + "mlp.0.weight")[:, 0], source.get(prefix + "mlp.0.bias")
        w2, b2 = source.get(prefix + "mlp.2.weight"), source.get(prefix + "mlp.2.bias")
        layer = source.layer(anchor, order)
        for h in range(H):
            mlp = (tuple(map(float, w0)), tuple(map(float, b0)), tuple(map(float, w2[h])), float(b2[h]))
            heads.append(HeadParameters(layer, h, {"c": c, "L": L, "mlp": mlp}))
    return heads


# --------------------------------------------------------------------------- encodings


def _columns(heads):
    """``{name: value}`` for one head, ``{name: (value per head)}`` for several (the registry's per-head form)."""
    names = dict.fromkeys(k for h in heads for k in h.params)
    if len(heads) == 1:
        return dict(heads[0].params)
    return {k: tuple(h.params[k] for h in heads) for k in names if all(k in h.params for h in heads)}


def layer_encoding(checkpoint: Checkpoint, heads, *, logit_bound=0.0):
    """The :mod:`otprior.encodings` object for heads of one layer (one stack) of a checkpoint.

    This is the one place where a family's stored parameters become an encoding, and every
    formula is the registry's: ALiBi's ``variant`` (BLOOM, MPT's ``alibi_bias_max``, Falcon's
    :math:`1/\\sqrt{d_{head}}` and bfloat16 rounding), KERPLE's clamps and names
    (:meth:`~otprior.encodings.KerpleLog.from_stored`, :meth:`~otprior.encodings.KerplePower.from_stored`:
    log :math:`-\\text{bias\\_p}\\log(1 + \\text{bias\\_a}\\,d)`, power
    :math:`-\\text{bias\\_a}\\,d^{\\text{bias\\_p}}`; a power checkpoint with neither stores no bias),
    T5's buckets with the learned table, RoPE with the config's ``rope_theta`` and scaling (its
    attention factor enters the logit bound), FIRE's MLP, CABLE, the causal OT operator.

    Parameters
    ----------
    checkpoint : Checkpoint
    heads : sequence of HeadParameters
        Heads of one ``(stack, layer)``, in head order.
    logit_bound : float
        The content bound ``B`` of the encoding.

    Returns
    -------
    Encoding
        Multi-head (a leading head axis in its answers, a tuple of verdicts from
        :func:`otprior.classify`) when several heads carry their own parameters; single-head
        otherwise (one head, or schemes whose heads share every parameter: RoPE, NoPE, CABLE, OT).
    """
    heads = list(heads)
    if not heads or len({(h.stack, h.layer) for h in heads}) != 1:
        raise DomainError("heads", f"{len(heads)} heads", "a non-empty list of heads of one layer")
    s, ep, cols = checkpoint.scheme, checkpoint.encoding_params, _columns(heads)
    B = {"logit_bound": logit_bound}
    if s in ("kerple-log", "kerple-power"):
        if s == "kerple-power" and not cols.keys() & {"bias_p", "bias_a"}:
            return encodings.get("nope", **B)
        return encodings.lookup(s).from_stored(**cols, **B)
    if s == "alibi":
        keep = ("variant", "alibi_bias_max", "head_dim")
        return encodings.get(s, slope=cols["slope"], **{k: ep[k] for k in keep if k in ep}, **B)
    if s == "t5":
        geometry = ep["stacks"][heads[0].stack or "self"]
        return encodings.get(s, values=cols["table"], **geometry, **B)
    if s == "fire":
        mlp = [h.params["mlp"] for h in heads]
        W1, b1 = mlp[0][0], mlp[0][1]
        return encodings.get(s, mlp=(W1, b1, tuple(m[2] for m in mlp), tuple(m[3] for m in mlp)), c=heads[0].params["c"], L=heads[0].params["L"], **B)
    if s == "rope":
        lp = checkpoint.layer_encoding_params.get(heads[0].layer) if not heads[0].stack else None
        if lp is not None and lp.get("__nope__"):
            return encodings.get("nope", **B)  # a no_rope_layers layer: no rotation
        return encodings.get(s, **(lp if lp is not None else ep), **B)
    if s in ("log-distance", "nope", "cable", "causal-ot"):
        shared = {k: v[0] for k, v in cols.items() if isinstance(v, tuple) and len(set(v)) == 1} if len(heads) > 1 else {}
        return encodings.get(s, **{**cols, **shared}, **B)
    raise DomainError("scheme", s, f"one of {', '.join(SCHEMES)}")


def encoding_for(checkpoint: Checkpoint, head: HeadParameters, *, logit_bound=0.0):
    """The :mod:`otprior.encodings` object for one head of a checkpoint (:func:`layer_encoding` of that head)."""
    return layer_encoding(checkpoint, [head], logit_bound=logit_bound)
