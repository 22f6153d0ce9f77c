"""Safe readers of checkpoint formats: safetensors (single and sharded), torch zip archives (single,
sharded, GPT-NeoX per-layer pipeline files), JSON configs; bare and legacy pickles refused.

Only regular files are opened (a FIFO, device or socket is refused before any read). JSON files are
read up to a cap and must be UTF-8 objects. Safetensors headers are parsed here, each entry's
declared size checked against the file's size, and only the tensors asked for read (``pread`` of
their bytes). Torch archives are checked entry by entry before ``torch.load``: every entry stored
uncompressed inside the file, ``data.pkl`` below its cap; the load runs with ``weights_only=True``
and ``mmap=True``. Every tensor materialised is checked first (plain strided real floating point,
elements within its storage, its float64 copy below the cap). The architectures (which tensors and
config keys mean what) live in ``_checkpoint`` and ``_structure``; this module knows only files.

Caps are counted on the real quantity before the work: a zip's entries and directory bytes from
its End Of Central Directory records (every candidate, zip64 included) before ``zipfile`` parses
the directory; safetensors entries whose bytes overlap are refused (so every declared element is
backed by distinct bytes of the file); a sharded checkpoint's headers and pickles together within
``OTPRIOR_MAX_HEADER_BYTES``, and a file named twice (hard links) refused; the rows of all
positional tensors read (heads, positions) together within ``OTPRIOR_MAX_ITEMS``. A file of a
model folder that is a link out of the folder is refused unread (a Hugging Face cache snapshot's
links into its ``blobs`` are followed).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import stat
import struct
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .._validation import FileFormatError
from ..limits import current as current_caps

__all__ = ["CheckpointError", "open_source", "source_of_state_dict"]

_LAYER = re.compile(r"(?:^|\.)(?:layers|blocks|layer|h|block)\.(\d+)\.")
_PER_LAYER_FILE = re.compile(r"^layer_(\d+)-model_(\d+)-model_states\.pt$")
_RECORDS = ("training_record.json", "train_record.json")


class CheckpointError(FileFormatError):
    """A checkpoint that cannot be read, is refused, or lacks what its scheme needs."""


# --------------------------------------------------------------------------- files


def _open_regular(path: Path, what: str):
    """Open ``path`` read-only without blocking (a FIFO opens at once) and refuse anything
    but a regular file; returns ``(fd, size)``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot open the {what} ({exc.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise CheckpointError(f"{path}: the {what} is not a regular file (a FIFO, device, socket or folder); refused unread")
    return fd, st.st_size


def _pread(fd, size, offset):
    out = bytearray()
    while len(out) < size:
        chunk = os.pread(fd, size - len(out), offset + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _refuse_constant(name):
    raise ValueError(f"the non-JSON constant {name}")


def _read_json(path: Path, what: str) -> dict:
    """A JSON object of bounded size from a regular file, UTF-8, without NaN or Infinity."""
    cap = current_caps().max_json_bytes
    fd, size = _open_regular(path, what)
    try:
        if size > cap:
            raise CheckpointError(f"{path}: the {what} is {size} bytes, above the cap of {cap} (OTPRIOR_MAX_JSON_BYTES); refused unread")
        raw = _pread(fd, size + 1, 0)
    finally:
        os.close(fd)
    if len(raw) > cap:
        raise CheckpointError(f"{path}: the {what} grew beyond the cap of {cap} bytes while read; refused")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: the {what} is not UTF-8 text (byte {exc.start}); refused") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"{path}: the {what} is not valid JSON ({str(exc)[:200]})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: the {what} holds a JSON {type(data).__name__}, not an object")
    return data


# --------------------------------------------------------------------------- tensors


@dataclass
class _Entry:
    key: str
    shape: tuple
    dtype: str
    file: Path
    offset: int = 0  # safetensors: absolute offset of the data
    nbytes: int = 0
    tensors: tuple = ()  # torch archives: the loaded tensors (one per model-parallel rank)


_ST_ITEMSIZE = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2,
    "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "C64": 8, "C128": 16,
}  # fmt: skip
_ST_FLOATS = {"F64": "<f8", "F32": "<f4", "F16": "<f2"}


def _check_elements(numel, key, path):
    need = 8 * numel
    cap = current_caps().max_tensor_bytes
    if need > cap:
        raise CheckpointError(
            f"{path}: tensor {key!r} would need {need} bytes as float64, above the cap of {cap} (OTPRIOR_MAX_TENSOR_BYTES); refused"
        )


def _safetensors_entries(path: Path) -> dict:
    """Parse a safetensors header and check every entry against the file's size."""
    fd, size = _open_regular(path, "safetensors file")
    try:
        if size < 8:
            raise CheckpointError(f"{path}: not a safetensors file ({size} bytes, shorter than its 8-byte header length)")
        (n,) = struct.unpack("<Q", _pread(fd, 8, 0))
        if n > size - 8:
            # n is whatever the first 8 bytes hold (text, if the file is not safetensors): never printed
            raise CheckpointError(f"{path}: not a safetensors file (its first 8 bytes are no header length that fits its {size} bytes)")
        cap = current_caps().max_header_bytes
        if n > cap:
            raise CheckpointError(f"{path}: safetensors header of {n} bytes, above the cap of {cap} (OTPRIOR_MAX_HEADER_BYTES)")
        raw = _pread(fd, n, 8)
    finally:
        os.close(fd)
    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CheckpointError(f"{path}: not a safetensors file (its header is not a UTF-8 JSON object)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: not a safetensors file (its header is not a JSON object)")
    start, data_len = 8 + n, size - 8 - n
    items_cap = current_caps().max_items
    if len(header) > items_cap + 1:
        raise CheckpointError(f"{path}: {len(header)} entries in the safetensors header, above the cap of {items_cap} (OTPRIOR_MAX_ITEMS)")
    entries = {}
    for key, meta in header.items():
        if key == "__metadata__":
            continue
        bad = f"{path}: malformed safetensors entry {key!r}"
        if not isinstance(meta, dict):
            raise CheckpointError(f"{bad} (not an object)")
        dtype, shape, offsets = meta.get("dtype"), meta.get("shape"), meta.get("data_offsets")
        if dtype not in _ST_ITEMSIZE:
            raise CheckpointError(f"{bad} (dtype {dtype!r} unknown)")
        if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape) or len(shape) > 64:
            raise CheckpointError(f"{bad} (shape {shape!r} is not a list of non-negative integers)")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
            raise CheckpointError(f"{bad} (data_offsets {offsets!r} are not two integers)")
        begin, end = offsets
        if not 0 <= begin <= end <= data_len:
            raise CheckpointError(f"{bad} (bytes {begin}..{end} lie outside the {data_len} bytes of data in the file)")
        numel = math.prod(shape)
        if numel * _ST_ITEMSIZE[dtype] != end - begin:
            raise CheckpointError(f"{bad} (shape {shape} of {dtype} needs {numel * _ST_ITEMSIZE[dtype]} bytes, the entry holds {end - begin})")
        entries[key] = _Entry(key, tuple(shape), dtype, path, start + begin, end - begin)
    _refuse_aliases(entries, path)
    return entries


def _refuse_aliases(entries, path):
    """Refuse entries whose bytes overlap (the safetensors format lays its tensors out contiguously
    without overlap): every declared element is then backed by distinct bytes of the file, so the
    elements declared in all tensors together are at most the file's size."""
    spans = sorted((e.offset, e.offset + e.nbytes, e.key) for e in entries.values() if e.nbytes)
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:], strict=False):
        if begin < end:
            raise CheckpointError(
                f"{path}: malformed safetensors entries {first!r} and {second!r}: their bytes overlap "
                "(tensors aliasing the same bytes are refused: the format lays tensors out without overlap)"
            )


def _read_safetensors(entry: _Entry) -> np.ndarray:
    if entry.dtype not in _ST_FLOATS and entry.dtype != "BF16":
        raise CheckpointError(f"{entry.file}: tensor {entry.key!r} has dtype {entry.dtype}, not a real floating-point type; refused")
    _check_elements(math.prod(entry.shape), entry.key, entry.file)
    fd, _ = _open_regular(entry.file, "safetensors file")
    try:
        raw = _pread(fd, entry.nbytes, entry.offset)
    finally:
        os.close(fd)
    if len(raw) != entry.nbytes:
        raise CheckpointError(f"{entry.file}: tensor {entry.key!r} is cut short (the file shrank while read)")
    if entry.dtype == "BF16":
        # bfloat16 is the upper half of a float32
        values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        values = np.frombuffer(raw, dtype=_ST_FLOATS[entry.dtype])
    return values.astype(np.float64).reshape(entry.shape)


_ZIP_MAGIC = b"PK\x03\x04"


def _weights_only_reason(exc) -> str:
    """The offending global from torch's weights-only refusal, without its advice."""
    text = str(exc)
    match = re.search(r"(Unsupported (?:global|operand)[^\n]*?)(?: was not an allowed global|\.\s|$)", text)
    if match:
        return match.group(1).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and "weights_only" not in line and "trust" not in line.lower() and not line.startswith("("):
            return line[:200]
    return type(exc).__name__


_EOCD = struct.Struct("<4s4H2LH")  # End Of Central Directory record (APPNOTE 4.3.16)
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # zip64 EOCD locator (4.3.15)
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # zip64 EOCD record (4.3.14)


def _zip_entry_cap():
    return 16 * current_caps().max_files + 64


def _zip_directory(fd, size, path):
    """Refuse a zip whose End Of Central Directory records (classic and zip64) declare more
    entries or directory bytes than the caps, read with bounded reads from the end of the file
    before anything parses the directory (``zipfile`` reads every directory byte it is given,
    whatever count is declared). Every record candidate in the file's last 64 KiB is checked,
    and each zip64 record where either reader looks for it (``zipfile`` just before its locator,
    torch's reader at the locator's offset), so no reader can be pointed at an unchecked one."""
    tail_len = min(size, _EOCD.size + 0xFFFF)
    start = size - tail_len
    tail = _pread(fd, tail_len, start)
    cap = _zip_entry_cap()
    cd_cap = min(256 * cap, size)
    found = False
    at = tail.rfind(b"PK\x05\x06")
    while at >= 0:
        if len(tail) - at >= _EOCD.size:
            found = True
            _, _, _, on_disk, entries, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
            declared = []
            loc = at - _ZIP64_LOCATOR.size
            if (0xFFFF in (entries, on_disk) or 0xFFFFFFFF in (cd_size, cd_offset)) and loc >= 0:
                sig, _, z64_offset, _ = _ZIP64_LOCATOR.unpack_from(tail, loc)
                if sig == b"PK\x06\x07":
                    for where in {start + loc - _ZIP64_EOCD.size, z64_offset}:
                        rec = _pread(fd, _ZIP64_EOCD.size, where) if 0 <= where <= size - _ZIP64_EOCD.size else b""
                        if len(rec) == _ZIP64_EOCD.size and rec[:4] == b"PK\x06\x06":
                            fields = _ZIP64_EOCD.unpack(rec)
                            declared.append((max(fields[6], fields[7]), fields[8]))
            # the classic values count where no zip64 record replaces them (their 0xFFFF... included)
            for count, nbytes in declared or [(max(entries, on_disk), cd_size)]:
                if count > cap:
                    raise CheckpointError(
                        f"{path}: the zip directory declares {count} entries, above the cap of {cap} (16 x OTPRIOR_MAX_FILES + 64); refused unparsed"
                    )
                if nbytes > cd_cap:
                    raise CheckpointError(f"{path}: the zip directory declares {nbytes} bytes, above the cap of {cd_cap} bytes; refused unparsed")
        at = tail.rfind(b"PK\x05\x06", 0, at)
    if not found:
        raise CheckpointError(f"{path}: not a readable torch checkpoint (no zip End Of Central Directory record)")


def _torch_archive(path: Path, budget=None):
    """Check a torch zip archive entry by entry, then load it with ``weights_only=True``."""
    fd, size = _open_regular(path, "torch checkpoint")
    try:
        head = _pread(fd, 4, 0)
        if head == _ZIP_MAGIC:
            _zip_directory(fd, size, path)
    finally:
        os.close(fd)
    if head != _ZIP_MAGIC:
        if head[:1] == b"\x80":
            raise CheckpointError(
                f"{path}: refused: a bare or legacy pickle, whose storage sizes cannot be checked before they are allocated; "
                "nothing in it was executed (re-save it with torch.save, or as safetensors)"
            )
        raise CheckpointError(f"{path}: not a torch checkpoint (neither a zip archive nor a pickle: starts with {head!r})")
    caps = current_caps()
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise CheckpointError(f"{path}: not a readable torch checkpoint (broken zip archive: {exc})") from None
    if len(infos) > _zip_entry_cap():
        raise CheckpointError(f"{path}: {len(infos)} entries in the archive, above the cap; refused")
    pickles = [i for i in infos if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
    if len(pickles) != 1:
        raise CheckpointError(f"{path}: not a torch checkpoint ({len(pickles)} data.pkl entries in the archive)")
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise CheckpointError(
                f"{path}: refused: entry {info.filename!r} is compressed (torch.save stores entries uncompressed; "
                "a compressed entry can expand far beyond the file); nothing in it was read"
            )
        if info.header_offset + info.file_size > size:
            raise CheckpointError(f"{path}: entry {info.filename!r} declares {info.file_size} bytes beyond the end of the file; refused")
    if pickles[0].file_size > caps.max_pickle_bytes:
        raise CheckpointError(
            f"{path}: data.pkl of {pickles[0].file_size} bytes, above the cap of {caps.max_pickle_bytes} (OTPRIOR_MAX_PICKLE_BYTES)"
        )
    if budget is not None:
        _charge(budget, pickles[0].file_size, path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on protocols and storages; the unpickler decides
            return torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{path}: refused: the pickle asks for more than tensors and plain containers ({_weights_only_reason(exc)}); "
            "nothing in it was executed"
        ) from None
    except Exception as exc:  # torch raises many types on malformed archives; all mean "unreadable"
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise CheckpointError(f"{path}: not a readable torch checkpoint ({type(exc).__name__}: {first})") from None


def _is_tensor_dict(obj):
    # dict's own methods, never the loaded object's (an OrderedDict's state could shadow them)
    return isinstance(obj, dict) and obj and all(type(k) is str for k in dict.keys(obj)) and any(isinstance(v, torch.Tensor) for v in dict.values(obj))


def _find_state_dict(state, path):
    """The dict of tensors in a loaded archive: the top level or one of the usual wrappers."""
    if _is_tensor_dict(state) and all(isinstance(v, torch.Tensor) for v in dict.values(state)):
        return dict(dict.items(state))
    if isinstance(state, dict):
        for key in ("state_dict", "model", "module", "model_state_dict", "model_states"):
            inner = dict.get(state, key)
            if _is_tensor_dict(inner):
                return {k: v for k, v in dict.items(inner) if isinstance(v, torch.Tensor)}
        if _is_tensor_dict(state):
            return {k: v for k, v in dict.items(state) if isinstance(v, torch.Tensor)}
    raise CheckpointError(f"{path}: no state dict of tensors found (top-level type {type(state).__name__})")


def _tensor_entries(state_dict, path) -> dict:
    entries = {}
    for key, t in dict.items(state_dict):
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            raise CheckpointError(f"{path}: {key!r} is a {type(t).__name__}, not a plain tensor; refused")
        shape = tuple(int(s) for s in torch.Tensor.size(t))
        entries[key] = _Entry(key, shape, str(t.dtype).replace("torch.", ""), path, tensors=(t,))
    return entries


def _checked_array(t, key, path) -> np.ndarray:
    """A float64 copy of a loaded tensor, after checking it is what it claims (methods are
    called through ``torch.Tensor``: instance state cannot shadow them)."""
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise CheckpointError(f"{path}: {key!r} is a {type(t).__name__}, not a plain tensor; refused")
    if t.layout != torch.strided:
        raise CheckpointError(f"{path}: tensor {key!r} has layout {t.layout} (sparse or other); only dense tensors are read")
    if torch.Tensor.is_complex(t) or not torch.Tensor.is_floating_point(t):
        raise CheckpointError(f"{path}: tensor {key!r} has dtype {t.dtype}, not a real floating-point type; refused")
    if t.device.type != "cpu":
        raise CheckpointError(f"{path}: tensor {key!r} lives on {t.device}, not the CPU")
    shape = tuple(torch.Tensor.size(t))
    numel = math.prod(shape)
    if numel:
        item = torch.Tensor.element_size(t)
        stored = torch.UntypedStorage.nbytes(torch.Tensor.untyped_storage(t)) // item
        strides = torch.Tensor.stride(t)
        extent = torch.Tensor.storage_offset(t) + sum((s - 1) * st for s, st in zip(shape, strides, strict=True)) + 1
        if numel > stored or extent > stored or min(strides, default=1) < 0:
            raise CheckpointError(
                f"{path}: tensor {key!r} is a view of {numel} elements over a storage of {stored}; refused "
                "(a view larger than its storage would be materialised from nothing)"
            )
    _check_elements(numel, key, path)
    with torch.no_grad():
        out = torch.Tensor.to(torch.Tensor.detach(t), dtype=torch.float64, copy=True)
    return torch.Tensor.numpy(out).reshape(shape)


class _Source:
    """Tensor names, shapes and single-tensor reads over one or several files."""

    def __init__(self, entries: dict, description: str, path: Path, *, layer_of=None):
        self.entries = entries
        self.description = description
        self.path = path
        self.layer_of = layer_of or {}
        self.read = []
        self.rows = {}  # leading dimension of each tensor read (heads, positions), counted before reading

    @property
    def keys(self):
        return list(self.entries)

    def shape(self, key):
        return self.entries[key].shape

    def get(self, key) -> np.ndarray:
        entry = self.entries.get(key)
        if entry is None:
            raise CheckpointError(f"{self.path}: missing key {key!r}")
        if entry.tensors:
            parts = [_checked_array(t, key, entry.file) for t in entry.tensors]
            value = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
            nbytes = sum(p.size for p in parts) * torch.Tensor.element_size(entry.tensors[0])
        else:
            value = _read_safetensors(entry)
            nbytes = entry.nbytes
        # per-head parameters of every layer (or a position table) together: what is built from them
        # grows with their rows, so their rows are capped together (each tensor is capped on its own)
        self.rows[key] = entry.shape[0] if entry.shape else 1
        cap = current_caps().max_items
        if sum(self.rows.values()) > cap:
            raise CheckpointError(
                f"{entry.file}: the positional tensors read declare more than {cap} rows together (heads or positions, "
                f"{len(self.rows)} tensors up to {key!r}), above the cap (OTPRIOR_MAX_ITEMS); refused"
            )
        if not np.all(np.isfinite(value)):
            raise CheckpointError(f"{entry.file}: tensor {key!r} holds non-finite values")
        self.read.append((key, int(nbytes)))
        return value

    def restricted(self, keys):
        """The same files, only ``keys`` visible (a multimodal checkpoint's language model)."""
        out = _Source({k: self.entries[k] for k in keys}, self.description, self.path, layer_of=self.layer_of)
        out.read = self.read
        out.rows = self.rows
        return out

    def layer(self, key, order):
        if key in self.layer_of:
            return self.layer_of[key]
        match = _LAYER.search(key)
        return int(match.group(1)) if match else order


def _plain_name(name, folder, what):
    if not isinstance(name, str) or "/" in name or "\\" in name or name in ("", ".", "..") or "\x00" in name:
        raise CheckpointError(f"{folder}: the {what} names {name!r}, not a file inside the folder; refused")
    return _inside(folder, name, f"file named by the {what}")


def _inside(folder: Path, name: str, what: str) -> Path:
    """``folder / name``, refused if it is a link whose target lies outside the folder (a
    Hugging Face cache snapshot's links into its own ``blobs`` folder are followed)."""
    target = folder / name
    if os.path.islink(target):
        real = Path(os.path.realpath(target))
        root = Path(os.path.realpath(folder))
        roots = [root]
        if root.parent.name == "snapshots" and root.parent.parent.name.startswith("models--"):
            roots.append(root.parent.parent / "blobs")
        if not any(real.is_relative_to(r) for r in roots):
            raise CheckpointError(f"{target}: the {what} is a link out of the model folder; refused unread")
    return target


def _shard_budget(path: Path, seen: dict, left: list, safetensors: bool):
    """Refuse a shard that is the same file as another (hard link or duplicate), and charge its
    safetensors header against the budget ``left[0]`` of all shards' header bytes together."""
    fd, size = _open_regular(path, "shard")
    try:
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino)
        if ident in seen:
            raise CheckpointError(f"{path}: the same file as shard {seen[ident]} (a hard link or duplicate); refused")
        seen[ident] = path.name
        if safetensors and size >= 8:
            (n,) = struct.unpack("<Q", _pread(fd, 8, 0))
            if n <= size - 8:
                _charge(left, n, path)
    finally:
        os.close(fd)


def _charge(left, nbytes, path):
    left[0] -= nbytes
    if left[0] < 0:
        cap = current_caps().max_header_bytes
        raise CheckpointError(
            f"{path}: the shards' headers and pickles together exceed the cap of {cap} bytes (OTPRIOR_MAX_HEADER_BYTES, "
            "counted over all shards); refused"
        )


def _sharded(folder: Path, index_name: str, reader):
    index = _read_json(_inside(folder, index_name, "shard index"), "shard index")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{folder / index_name}: no weight_map object in the shard index")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise CheckpointError(f"{folder / index_name}: the weight_map's values are not all file names")
    files = sorted(set(weight_map.values()))
    if len(files) > current_caps().max_files:
        raise CheckpointError(f"{folder / index_name}: {len(files)} shards, above the cap of {current_caps().max_files}")
    # every shard checked (inside the folder, distinct, headers within the budget together) before any is parsed
    shards, seen, left = [], {}, [current_caps().max_header_bytes]
    for name in files:
        shards.append(_plain_name(name, folder, "shard index"))
        _shard_budget(shards[-1], seen, left, reader is _safetensors_entries)
    entries = {}
    for name, shard in zip(files, shards, strict=True):
        part = reader(shard) if reader is _safetensors_entries else reader(shard, left)
        for key, entry in part.items():
            if weight_map.get(key) == name:
                entries[key] = entry
    missing = [k for k in weight_map if k not in entries]
    if missing:
        raise CheckpointError(f"{folder / index_name}: {len(missing)} keys of the weight_map are not in their shards (first: {missing[0]!r})")
    return entries, files


def _archive_entries(path: Path, budget=None) -> dict:
    return _tensor_entries(_find_state_dict(_torch_archive(path, budget), path), path)


def _per_layer(folder: Path, names):
    """GPT-NeoX pipeline folders: ``layer_XX-model_YY-model_states.pt``, one file per layer and
    model-parallel rank; per-head tensors of the ranks are concatenated in rank order."""
    groups = {}
    for name in names:
        m = _PER_LAYER_FILE.match(name)
        groups.setdefault(int(m.group(1)), []).append((int(m.group(2)), name))
    entries, layer_of = {}, {}
    files, seen, left = {}, {}, [current_caps().max_header_bytes]  # pickles of all files together within the header cap
    for name in sorted(names):
        files[name] = _inside(folder, name, "per-layer file")
        _shard_budget(files[name], seen, left, False)
    for pipe_index in sorted(groups):
        ranks = sorted(groups[pipe_index])
        parts = [_archive_entries(files[name], left) for _, name in ranks]
        for key, entry in parts[0].items():
            pieces = [p.get(key) for p in parts]
            if any(p is None for p in pieces):
                raise CheckpointError(f"{folder}: {key!r} is missing from some model-parallel ranks of layer file {pipe_index}")
            shape = (sum(p.shape[0] for p in pieces), *entry.shape[1:]) if entry.shape else entry.shape
            full = f"layers.{pipe_index}.{key}"
            entries[full] = _Entry(full, shape, entry.dtype, entry.file, tensors=tuple(t for p in pieces for t in p.tensors))
            layer_of[full] = pipe_index
    return entries, layer_of, len(names)


def _open_source(path: Path):
    """``(source, config, config_path)`` for a folder or a file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file or folder") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc.strerror})") from None
    caps = current_caps()
    layer_of = None
    if stat.S_ISDIR(st.st_mode):
        try:
            with os.scandir(path) as it:
                names = []
                for e in it:
                    names.append(e.name)
                    if len(names) > 16 * caps.max_files:
                        raise CheckpointError(f"{path}: more than {16 * caps.max_files} entries in the folder; refused")
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot list the folder ({exc.strerror})") from None
        names = sorted(names)
        layer_files = [n for n in names if _PER_LAYER_FILE.match(n)]
        singles = [n for n in names if n.endswith((".safetensors", ".pt", ".pth", ".bin", ".ckpt"))]
        if "model.safetensors.index.json" in names:
            entries, files = _sharded(path, "model.safetensors.index.json", _safetensors_entries)
            what = f"sharded safetensors ({len(files)} shards)"
        elif "model.safetensors" in names:
            entries, what = _safetensors_entries(_inside(path, "model.safetensors", "model file")), "model.safetensors"
        elif "pytorch_model.bin.index.json" in names:
            entries, files = _sharded(path, "pytorch_model.bin.index.json", _archive_entries)
            what = f"sharded pytorch_model.bin ({len(files)} shards, weights_only)"
        elif "pytorch_model.bin" in names:
            entries, what = _archive_entries(_inside(path, "pytorch_model.bin", "model file")), "pytorch_model.bin (weights_only)"
        elif layer_files:
            if len(layer_files) > caps.max_files:
                raise CheckpointError(f"{path}: {len(layer_files)} per-layer files, above the cap of {caps.max_files}")
            entries, layer_of, count = _per_layer(path, layer_files)
            what = f"per-layer pipeline files ({count})"
        elif len(singles) == 1:
            return _open_source(_inside(path, singles[0], "checkpoint file"))
        else:
            found = ", ".join(singles[:5]) or "none"
            raise CheckpointError(
                f"{path}: no model found in the folder (expected model.safetensors, a shard index, pytorch_model.bin, "
                f"per-layer layer_XX-model_YY-model_states.pt files, or one checkpoint file; checkpoint files: {found})"
            )
        config_path = _inside(path, "config.json", "config") if "config.json" in names else None
        description = f"model folder: {what}"
        folder = path
    elif stat.S_ISREG(st.st_mode):
        suffix = path.suffix.lower()
        if suffix == ".safetensors":
            entries = _safetensors_entries(path)
        elif suffix in (".pt", ".pth", ".bin", ".ckpt"):
            entries = _archive_entries(path)
        else:
            raise CheckpointError(f"{path}: unsupported suffix {path.suffix!r}; expected a model folder, .safetensors, .pt, .pth, .bin or .ckpt")
        description = f"file: {path.name}"
        folder = path.parent
        config_path = next((c for c in (path.with_suffix(".json"), folder / "config.json") if os.path.lexists(c)), None)
        config_path = _inside(folder, config_path.name, "config") if config_path is not None else None
    else:
        raise CheckpointError(f"{path}: not a regular file or folder (a FIFO, device or socket); refused unread")
    config = _read_json(config_path, "config") if config_path is not None else {}
    record = {}
    for name in _RECORDS:
        if os.path.lexists(folder / name):
            record = _read_json(_inside(folder, name, "training record"), "training record")
            break
    return _Source(entries, description, path, layer_of=layer_of), config, config_path, record




def open_source(path):
    """``(source, config, config_path, training record)`` for a folder or a file."""
    return _open_source(Path(path))


def source_of_state_dict(state_dict, name):
    """A source over a state dict in memory."""
    return _Source(_tensor_entries(dict(state_dict), Path(name)), "state dict in memory", Path(name))
