"""Reading positional parameters out of checkpoints, safely.

Supported layouts (per layer, per head):

* ``log-distance`` (the reference model): ``...pos.alpha_raw`` (shape ``(H,)``), with the
  exponent ``alpha = 1 + margin + softplus(raw)``; the margin from ``...pos.alpha_margin``
  or the JSON config beside the file;
* ``kerple-log`` / ``kerple-power`` (KERPLE's code): ``...bias_p`` (r1) and ``...bias_a``
  (r2), shape ``(H, 1, 1)``; both variants use these names, so ``scheme`` must say which;
* ``alibi``: stored ``...slopes`` (shape ``(H,)``), or none with ``num_heads`` given: the
  standard slopes are implied by the head count;
* anything else through ``mapping``: ``{regex on key: role}`` with roles ``alpha``,
  ``alpha_raw``, ``alpha_margin``, ``r1``, ``r2``, ``slope``.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .._validation import DomainError, FileFormatError

_LAYER = re.compile(r"(?:^|\.)(?:layers|blocks|layer|h|block)\.(\d+)\.")

_PATTERNS = {
    "log-distance": {"alpha_raw": re.compile(r"(?:^|\.)pos\.alpha_raw$"), "alpha_margin": re.compile(r"(?:^|\.)pos\.alpha_margin$")},
    "kerple": {"r1": re.compile(r"(?:^|\.)bias_p$"), "r2": re.compile(r"(?:^|\.)bias_a$")},
    "alibi": {"slope": re.compile(r"(?:^|\.)(?:alibi_)?slopes$")},
}
SCHEMES = ("log-distance", "kerple-log", "kerple-power", "alibi")
_ROLES = ("alpha", "alpha_raw", "alpha_margin", "r1", "r2", "slope")


class CheckpointError(FileFormatError):
    """A checkpoint that cannot be read, is refused, or lacks what its scheme needs."""


@dataclass(frozen=True)
class HeadParameters:
    """The positional parameters of one head: ``layer``, ``head`` and ``params`` (floats)."""

    layer: int
    head: int
    params: dict


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` read.

    Attributes
    ----------
    path : Path
    scheme : str
    heads : list of HeadParameters
    keys_read : list of str
        The only tensors materialised.
    bytes_read : int
        Their total size.
    note : str
        How the scheme was chosen.
    config : dict
        The JSON config beside the file, if any.
    """

    path: Path
    scheme: str
    heads: list
    keys_read: list
    bytes_read: int
    note: str
    config: dict = field(default_factory=dict)


class _Reader:
    """Key listing and single-tensor access, without loading the whole file."""

    def __init__(self, path: Path):
        self.path = path
        self.suffix = path.suffix.lower()
        if self.suffix == ".safetensors":
            from safetensors import safe_open

            try:
                self._handle = safe_open(str(path), framework="pt")
                self.keys = list(self._handle.keys())
            except Exception as exc:  # safetensors raises its own error types
                raise CheckpointError(f"{path}: not a readable safetensors file ({exc})") from None
            self._dict = None
        elif self.suffix in (".pt", ".pth", ".bin"):
            state = _load_pickle(path)
            self._dict = _find_state_dict(state, path)
            self.keys = list(self._dict)
        else:
            raise CheckpointError(f"{path}: unsupported suffix {path.suffix!r}; expected .safetensors, .pt, .pth or .bin")

    def get(self, key) -> torch.Tensor:
        if key not in self.keys:
            raise CheckpointError(f"{self.path}: missing key {key!r}")
        if self._dict is not None:
            return self._dict[key].detach().to("cpu")
        return self._handle.get_tensor(key)


def _load_pickle(path: Path):
    try:
        with warnings.catch_warnings():
            # informational: torch notes protocols other than 2; the weights-only unpickler decides
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            try:
                return torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as exc:
                if "mmap" not in str(exc).lower() and "zip" not in str(exc).lower():
                    raise
                return torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"{path}: refused: the pickle holds objects other than tensors and plain containers "
            f"(weights_only load failed: {first}); nothing in it was executed"
        ) from None
    except (EOFError, OSError, RuntimeError, ValueError) as exc:
        raise CheckpointError(f"{path}: not a readable torch checkpoint ({type(exc).__name__}: {exc})") from None


def _find_state_dict(state, path):
    if isinstance(state, dict) and state and all(isinstance(v, torch.Tensor) for v in state.values()):
        return state
    if isinstance(state, dict):
        for key in ("state_dict", "model", "module", "model_state_dict"):
            inner = state.get(key)
            if isinstance(inner, dict) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
                return inner
    raise CheckpointError(f"{path}: no state dict of tensors found (top-level type {type(state).__name__})")


def _layer_of(key, order):
    match = _LAYER.search(key)
    return int(match.group(1)) if match else order


def _match(keys, pattern):
    return [k for k in keys if pattern.search(k)]


def _config_beside(path: Path) -> dict:
    for candidate in (path.with_suffix(".json"), path.parent / "config.json"):
        if candidate.exists():
            try:
                return json.loads(candidate.read_text())
            except json.JSONDecodeError as exc:
                raise CheckpointError(f"{candidate}: not valid JSON ({exc})") from None
    return {}


def load_checkpoint(path, scheme=None, mapping=None, *, num_heads=None) -> Checkpoint:
    """Read the per-layer, per-head positional parameters of a checkpoint.

    Parameters
    ----------
    path : str or Path
        ``.safetensors`` (read key by key) or ``.pt``/``.pth``/``.bin`` (``torch.load``
        with ``weights_only=True``; a pickle that would run code is refused).
    scheme : {"log-distance", "kerple-log", "kerple-power", "alibi"}, optional
        Detected from parameter names when omitted; KERPLE's two variants share names,
        so for them it must be given.
    mapping : dict, optional
        ``{regex: role}`` for other layouts; roles: ``alpha``, ``alpha_raw``,
        ``alpha_margin``, ``r1``, ``r2``, ``slope``. Requires ``scheme``.
    num_heads : int, optional
        For ALiBi without stored slopes: the slopes implied by the head count.

    Returns
    -------
    Checkpoint
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such file")
    if scheme is not None and scheme not in SCHEMES:
        raise DomainError("scheme", scheme, f"one of {', '.join(SCHEMES)}")
    reader = _Reader(path)
    config = _config_beside(path)
    keys = reader.keys

    if mapping is not None:
        if scheme is None:
            raise DomainError("scheme", None, "a scheme name when a mapping is given")
        patterns = {}
        for regex, role in mapping.items():
            if role not in _ROLES:
                raise DomainError("mapping", mapping, f"roles among {', '.join(_ROLES)}")
            patterns[role] = re.compile(regex)
        note = f"scheme {scheme!r} with a user mapping"
    else:
        found = {name: {role: _match(keys, p) for role, p in pats.items()} for name, pats in _PATTERNS.items()}
        present = [name for name, roles in found.items() if any(roles.values())]
        if scheme is None:
            if "kerple" in present:
                raise CheckpointError(
                    f"{path}: KERPLE parameters (bias_p, bias_a) found; KERPLE's log and power variants share these "
                    "names: pass scheme='kerple-log' or scheme='kerple-power' (--scheme on the command line)"
                )
            if len(present) == 1:
                scheme = present[0]
            elif not present and num_heads is not None:
                scheme = "alibi"
            elif not present:
                raise CheckpointError(
                    f"{path}: no positional parameters recognised among {len(keys)} keys; pass scheme= and mapping= "
                    "(or num_heads= for ALiBi with implied slopes)"
                )
            else:
                raise CheckpointError(f"{path}: parameters of several schemes found ({', '.join(present)}); pass scheme=")
            note = f"detected scheme {scheme!r} from parameter names"
        else:
            note = f"scheme {scheme!r} as given"
        family = "kerple" if scheme.startswith("kerple") else scheme
        patterns = _PATTERNS[family]

    role_keys = {role: _match(keys, p) for role, p in patterns.items()}
    read = []

    def tensor(key):
        t = reader.get(key)
        read.append((key, t.numel() * t.element_size()))
        return t.detach().to(torch.float64).reshape(-1).numpy()

    heads = []
    if scheme == "log-distance":
        raw_keys = role_keys.get("alpha_raw") or role_keys.get("alpha")
        if not raw_keys:
            raise CheckpointError(f"{path}: missing key for the log-distance exponent (…pos.alpha_raw)")
        margin_keys = role_keys.get("alpha_margin", [])
        for order, key in enumerate(raw_keys):
            values = tensor(key)
            layer = _layer_of(key, order)
            if "alpha" in role_keys and role_keys["alpha"]:
                alphas = values
            else:
                margin = _margin_for_key(key, margin_keys, tensor, config, path)
                alphas = 1.0 + margin + np.logaddexp(0.0, values)  # softplus
            heads += [HeadParameters(layer, h, {"alpha": float(a)}) for h, a in enumerate(alphas)]
    elif scheme in ("kerple-log", "kerple-power"):
        r1_keys, r2_keys = role_keys.get("r1", []), role_keys.get("r2", [])
        if not r1_keys:
            raise CheckpointError(f"{path}: missing key for KERPLE r1 (…bias_p)")
        for order, k1 in enumerate(r1_keys):
            k2 = _partner(k1, r2_keys, path, "r2 (…bias_a)")
            p, a = tensor(k1), tensor(k2)
            if p.shape != a.shape:
                raise CheckpointError(f"{path}: key {k1!r} has shape {tuple(p.shape)} but {k2!r} has shape {tuple(a.shape)}")
            # KERPLE clamps both at 0.01 in its forward pass
            p, a = np.maximum(p, 0.01), np.maximum(a, 0.01)
            heads += [HeadParameters(_layer_of(k1, order), h, {"r1": float(x), "r2": float(y)}) for h, (x, y) in enumerate(zip(p, a, strict=True))]
    elif scheme == "alibi":
        slope_keys = role_keys.get("slope", [])
        if slope_keys:
            for order, key in enumerate(slope_keys):
                heads += [HeadParameters(_layer_of(key, order), h, {"slope": float(m)}) for h, m in enumerate(tensor(key))]
        else:
            H = num_heads or config.get("n_heads")
            if not H:
                raise CheckpointError(f"{path}: no stored ALiBi slopes; pass num_heads= to use the slopes implied by the head count")
            from ..encodings import ALiBi

            n_layers = int(config.get("n_layers", 1))
            heads = [HeadParameters(layer, h, {"slope": m}) for layer in range(n_layers) for h, m in enumerate(ALiBi.slopes(int(H)))]
            note += f"; slopes implied by {H} heads"
    if not heads:
        raise CheckpointError(f"{path}: scheme {scheme!r} found no heads")
    for head in heads:
        for name, value in head.params.items():
            if not math.isfinite(value):
                raise CheckpointError(f"{path}: layer {head.layer} head {head.head}: {name} = {value} is not finite")
    return Checkpoint(
        path=path,
        scheme=scheme,
        heads=heads,
        keys_read=[k for k, _ in read],
        bytes_read=sum(b for _, b in read),
        note=note,
        config=config,
    )


def _margin_for_key(key, margin_keys, tensor, config, path):
    prefix = key.rsplit(".", 1)[0]
    for mk in margin_keys:
        if mk.rsplit(".", 1)[0] == prefix:
            return float(tensor(mk)[0])
    if "alpha_margin" in config:
        return float(config["alpha_margin"])
    raise CheckpointError(f"{path}: missing key {prefix + '.alpha_margin'!r} (and no alpha_margin in the JSON config)")


def _partner(key, candidates, path, what):
    prefix = key.rsplit(".", 1)[0]
    for c in candidates:
        if c.rsplit(".", 1)[0] == prefix:
            return c
    raise CheckpointError(f"{path}: missing key {prefix + '.bias_a'!r} for {what}")
