"""Resource caps: every allocation proportional to user input is checked here first.

All caps live in this one module, so that they are documented and overridable in one
place. Override one for a block with :func:`caps`::

    with otprior.limits.caps(max_bytes=8 << 30):
        ...

or process-wide (the command line included) with the environment variables
``OTPRIOR_MAX_BYTES``, ``OTPRIOR_MAX_READ_BYTES``, ``OTPRIOR_MAX_JSON_BYTES`` and
``OTPRIOR_MAX_ITEMS`` (one per field of :class:`Caps`), read once, on first use.

Besides the caps, this module holds the checks that use them:

- :func:`check_allocation`: refuse an allocation of ``nbytes`` derived from an input,
  naming the input and the number of bytes it would need;
- :func:`check_count`: refuse a count of repeated items (heads, batches, listed values);
- :func:`regular_file` and :func:`read_bytes`: read a named file as data, only when it is
  a regular file, never more than a cap, never blocking on a FIFO or a device.
"""

from __future__ import annotations

import functools
import math
import os
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace

from ._validation import DomainError

__all__ = ["Caps", "ResourceError", "current", "caps", "check_allocation", "check_count", "regular_file", "read_bytes"]


class ResourceError(DomainError):
    """An input would need more memory or elements than the cap allows."""

    def __init__(self, name: str, value, need: str, cap: str):
        self.need = need
        self.cap = cap
        super().__init__(
            name, value, f"inputs needing at most {cap} (this one needs {need}; raise the cap with otprior.limits.caps or OTPRIOR_* variables)"
        )


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
    max_read_bytes : int
        Largest file, or part of a file, read into memory from a path given by a user
        (default 256 MiB; ``OTPRIOR_MAX_READ_BYTES``): text data for the intervention.
    max_json_bytes : int
        Largest JSON file read (a model's ``config.json``, a shard index, a training
        record); default 4 MiB (``OTPRIOR_MAX_JSON_BYTES``).
    max_header_bytes : int
        Largest safetensors header (the JSON before the data); default 64 MiB
        (``OTPRIOR_MAX_HEADER_BYTES``).
    max_tensor_bytes : int
        Largest single tensor the checkpoint reader materialises, counted at 8 bytes per
        element (float64); positional parameters are small; default 64 MiB
        (``OTPRIOR_MAX_TENSOR_BYTES``).
    max_pickle_bytes : int
        Largest pickle (``data.pkl``) inside a torch zip archive; default 64 MiB
        (``OTPRIOR_MAX_PICKLE_BYTES``).
    max_files : int
        Most files a model folder may name (shards, per-layer files); default 4096
        (``OTPRIOR_MAX_FILES``).
    max_items : int
        Largest count of repeated items one input may ask for (default 1,000,000;
        ``OTPRIOR_MAX_ITEMS``): attention heads, evaluation batches, listed lengths or
        shifts, entries printed.
    """

    max_bytes: int = 2 << 30
    max_read_bytes: int = 256 << 20
    max_json_bytes: int = 4 << 20
    max_header_bytes: int = 64 << 20
    max_tensor_bytes: int = 64 << 20
    max_pickle_bytes: int = 64 << 20
    max_files: int = 4096
    max_items: int = 1_000_000


_local = threading.local()


@functools.lru_cache(maxsize=1)
def _defaults() -> Caps:
    # read on first use, not at import, so that a bad OTPRIOR_* value is refused as a
    # DomainError where it is used (the command line's one-line error), not as a traceback
    return Caps(**{f.name: _env_int("OTPRIOR_" + f.name.upper(), f.default) for f in fields(Caps)})


def current() -> Caps:
    """The caps in force in this thread (the environment's ``OTPRIOR_*`` values, or the
    defaults, unless :func:`caps` overrides them)."""
    caps_now = getattr(_local, "caps", None)
    return _defaults() if caps_now is None else caps_now


@contextmanager
def caps(**changes):
    """Override caps for a block (this thread only)."""
    old = current()
    _local.caps = replace(old, **changes)
    try:
        yield _local.caps
    finally:
        _local.caps = old


def _human(nbytes) -> str:
    """A byte count for a message; any size prints (no float overflow)."""
    if isinstance(nbytes, float) and not math.isfinite(nbytes):
        return f"{nbytes} B"
    nbytes = int(nbytes)
    if nbytes.bit_length() > 1000:
        return f"about 2^{nbytes.bit_length() - 1} B"
    for k, unit in enumerate(("B", "KiB", "MiB", "GiB", "TiB", "PiB")):
        if nbytes < 1024 ** (k + 1) or unit == "PiB":
            return f"{nbytes / 1024**k:.3g} {unit}"
    return f"{nbytes} B"


def check_allocation(nbytes, name: str, value) -> None:
    """Refuse (``ResourceError``) if an allocation of ``nbytes`` derived from parameter
    ``name=value`` would exceed ``current().max_bytes``."""
    cap = current().max_bytes
    if nbytes > cap:
        raise ResourceError(name, value, _human(nbytes), _human(cap))


def check_count(count, name: str, value=None) -> None:
    """Refuse (``ResourceError``) a count of repeated items above ``current().max_items``."""
    cap = current().max_items
    if count > cap:
        raise ResourceError(name, count if value is None else value, f"{count:,} items", f"{cap:,} items")


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode) -> str:
    for test, word in _KINDS:
        if test(mode):
            return word
    return "not a regular file"


def regular_file(path, name: str, *, limit=None) -> os.stat_result:
    """The ``stat`` of ``path`` when it is a regular file of at most ``limit`` bytes.

    Symbolic links are followed (a link to ``/dev/zero`` is refused as a character
    device). Raises ``DomainError`` for a missing file, a directory, FIFO, device or
    socket, and ``ResourceError`` for a file larger than ``limit``. Nothing is opened,
    so a FIFO never blocks.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DomainError(name, os.fspath(path), "an existing file (there is none)") from None
    except (OSError, ValueError) as exc:
        raise DomainError(name, os.fspath(path), f"a readable file ({exc.strerror if isinstance(exc, OSError) else exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise DomainError(name, os.fspath(path), f"a regular file (this is {_kind(st.st_mode)})")
    if limit is not None and st.st_size > limit:
        raise ResourceError(name, os.fspath(path), _human(st.st_size), _human(limit))
    return st


def read_bytes(path, name: str, *, limit=None) -> bytes:
    """The bytes of the regular file ``path``, refused above ``limit`` (default ``max_read_bytes``).

    The file is opened without blocking (``O_NONBLOCK``, so a FIFO swapped in after the
    check cannot hang the call), checked again on the open descriptor (``fstat``), and at
    most ``limit + 1`` bytes are read, so a file that grows is refused too.
    """
    limit = current().max_read_bytes if limit is None else int(limit)
    regular_file(path, name, limit=limit)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise DomainError(name, os.fspath(path), f"a readable file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise DomainError(name, os.fspath(path), f"a regular file (this is {_kind(st.st_mode)})")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ResourceError(name, os.fspath(path), f"more than {_human(limit)}", _human(limit))
    return data
