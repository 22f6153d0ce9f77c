"""Resource caps: every allocation proportional to user input is checked here first.

All caps live in this one module, so that they are documented and overridable in one
place. Override one for a block with :func:`caps`::

    with otprior.limits.caps(max_bytes=8 << 30):
        ...

or process-wide with the environment variable ``OTPRIOR_MAX_BYTES`` (and the others
named in :class:`Caps`), read once at import.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace

from ._validation import DomainError

__all__ = ["Caps", "ResourceError", "current", "caps", "check_allocation"]


class ResourceError(DomainError):
    """An input would need more memory or elements than the cap allows."""

    def __init__(self, name: str, value, need: str, cap: str):
        self.need = need
        self.cap = cap
        super().__init__(name, value, f"inputs needing at most {cap} (this one needs {need}; raise the cap with otprior.limits.caps)")


def _env_int(key: str, default: int) -> int:
    raw = os.environ.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DomainError(key, raw, "a positive integer (environment variable)") from None
    if value <= 0:
        raise DomainError(key, raw, "a positive integer (environment variable)")
    return value


@dataclass(frozen=True)
class Caps:
    """The caps in force.

    Attributes
    ----------
    max_bytes : int
        Largest single allocation a call may make from an input (default 2 GiB;
        ``OTPRIOR_MAX_BYTES``).
    """

    max_bytes: int = 2 << 30


_DEFAULT = Caps(**{f.name: _env_int("OTPRIOR_" + f.name.upper(), f.default) for f in fields(Caps)})
_local = threading.local()


def current() -> Caps:
    """The caps in force in this thread."""
    return getattr(_local, "caps", _DEFAULT)


@contextmanager
def caps(**changes):
    """Override caps for a block (this thread only)."""
    old = current()
    _local.caps = replace(old, **changes)
    try:
        yield _local.caps
    finally:
        _local.caps = old


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} PiB"


def check_allocation(nbytes, name: str, value) -> None:
    """Refuse (``ResourceError``) if an allocation of ``nbytes`` derived from parameter
    ``name=value`` would exceed ``current().max_bytes``."""
    cap = current().max_bytes
    if nbytes > cap:
        raise ResourceError(name, value, _human(float(nbytes)), _human(float(cap)))


@dataclass(frozen=True)
class CheckpointCaps:
    """Caps on what the checkpoint reader (:mod:`otprior.torch`) reads or materialises.

    Attributes
    ----------
    max_json_bytes : int
        Largest JSON file read (a model's ``config.json``, a shard index, a training
        record); default 4 MiB (``OTPRIOR_MAX_JSON_BYTES``).
    max_header_bytes : int
        Largest safetensors header (the JSON before the data); default 64 MiB
        (``OTPRIOR_MAX_HEADER_BYTES``).
    max_tensor_bytes : int
        Largest single tensor materialised, counted at 8 bytes per element (float64);
        positional parameters are small; default 64 MiB (``OTPRIOR_MAX_TENSOR_BYTES``).
    max_pickle_bytes : int
        Largest pickle (``data.pkl``) inside a torch zip archive; default 64 MiB
        (``OTPRIOR_MAX_PICKLE_BYTES``).
    max_files : int
        Most files a model folder may name (shards, per-layer files); default 4096
        (``OTPRIOR_MAX_FILES``).
    """

    max_json_bytes: int = 4 << 20
    max_header_bytes: int = 64 << 20
    max_tensor_bytes: int = 64 << 20
    max_pickle_bytes: int = 64 << 20
    max_files: int = 4096


_CHECKPOINT_DEFAULT = CheckpointCaps(**{f.name: _env_int("OTPRIOR_" + f.name.upper(), f.default) for f in fields(CheckpointCaps)})


def current_checkpoint_caps() -> CheckpointCaps:
    """The checkpoint-reading caps in force in this thread."""
    return getattr(_local, "checkpoint_caps", _CHECKPOINT_DEFAULT)


@contextmanager
def checkpoint_caps(**changes):
    """Override checkpoint-reading caps for a block (this thread only)."""
    old = current_checkpoint_caps()
    _local.checkpoint_caps = replace(old, **changes)
    try:
        yield _local.checkpoint_caps
    finally:
        _local.checkpoint_caps = old

