"""Reading and writing the files of a study folder without surprises.

Rules (the same as :mod:`otprior._output` for the report's folder):

* **Regular files only, size checked before reading.** :func:`read_regular` opens with
  ``O_NONBLOCK`` (a FIFO cannot hang the open), checks ``fstat`` on the open descriptor
  (a regular file, at most ``limit`` bytes) and then reads at most ``limit + 1`` bytes, so
  ``/dev/zero``, a FIFO or a 3 GiB sparse file is refused without being read.
* **No link followed inside an output folder.** Files the program itself keeps in a folder
  (``results.jsonl``) are opened with ``O_NOFOLLOW``: a link planted at that name is
  refused, not followed; files it writes go through :func:`otprior._output.write_file_safely`
  (a temporary name and ``os.replace``, which replaces a link instead of writing through it).
* **One writer per folder.** :func:`folder_lock` takes an exclusive ``flock`` on a lock
  file inside the folder (created with ``O_NOFOLLOW``) and refuses when another process
  holds it.
* **Names from data stay inside the folder.** :func:`safe_name` admits letters, digits and
  ``. _ + -`` only (no separator, no NUL, no leading dot), at most 100 characters.
"""

from __future__ import annotations

import json
import os
import re
import stat
from contextlib import contextmanager
from pathlib import Path

from ._validation import DomainError

__all__ = ["read_regular", "regular_size", "folder_lock", "safe_name", "write_text_atomic", "write_json_atomic",
           "dumps_strict"]

_NAME = re.compile(r"[A-Za-z0-9_+\-][A-Za-z0-9._+\-]{0,99}")


def safe_name(value, name: str, error=DomainError) -> str:
    """``value`` if it can be a file name inside a folder (letters, digits, ``. _ + -``; no
    leading dot; 1 to 100 characters), else ``error`` (a ``DomainError`` class) naming ``name``."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        shown = value if not isinstance(value, str) else value[:60].encode("unicode_escape").decode("ascii")
        raise error(name, shown, "1 to 100 of the characters A-Z a-z 0-9 . _ + - (not starting with '.')")
    return value


def _kind(mode) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def regular_size(path, name: str, *, follow: bool = True, error=DomainError) -> int:
    """Size of the regular file at ``path`` by ``stat`` (nothing opened); ``DomainError`` naming
    ``name`` when it is missing, a link (``follow=False``), or not a regular file."""
    try:
        st = os.stat(path, follow_symlinks=follow)
    except FileNotFoundError:
        raise error(name, str(path), "an existing file") from None
    except (OSError, ValueError) as exc:
        raise error(name, str(path), f"a readable file ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        raise error(name, str(path), "a regular file (this is a symbolic link)")
    if not stat.S_ISREG(st.st_mode):
        raise error(name, str(path), f"a regular file (this is {_kind(st.st_mode)})")
    return st.st_size


def read_regular(path, limit: int, name: str, *, follow: bool = True, prefix: bool = False, error=DomainError) -> bytes:
    """The bytes of the regular file at ``path``, refused (``DomainError`` naming ``name``) when
    it is not a regular file, is a link and ``follow`` is false, or holds more than ``limit``
    bytes (checked by ``fstat`` before reading, and again by the bounded read).
    ``prefix=True`` reads the first ``limit`` bytes of a larger file instead of refusing it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(name, str(path), "an existing file") from None
    except (OSError, ValueError) as exc:
        if not follow and os.path.islink(path):
            raise error(name, str(path), "a regular file (this is a symbolic link)") from None
        raise error(name, str(path), f"a readable file ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(name, str(path), f"a regular file (this is {_kind(st.st_mode)})")
        if st.st_size > limit and not prefix:
            raise error(name, str(path), f"a file of at most {limit} bytes (this one holds {st.st_size})")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        data = b"".join(chunks)
        if total > limit:
            if prefix:
                return data[:limit]
            raise error(name, str(path), f"a file of at most {limit} bytes (it grew while being read)")
        return data
    finally:
        os.close(fd)


def dumps_strict(value, **kw) -> str:
    """Strict JSON text (no bare NaN or infinities: :func:`otprior._json.to_strict_json`)."""
    from ._json import to_strict_json

    return json.dumps(to_strict_json(value), allow_nan=False, **kw)


def write_text_atomic(path, text: str, name: str) -> Path:
    """Write ``text`` to ``path`` through a temporary name and ``os.replace`` (a link at ``path``
    is replaced, never followed); readers see the old file or the new one, never a part."""
    from ._output import write_file_safely

    return write_file_safely(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), name=name)


def write_json_atomic(path, value, name: str, **kw) -> Path:
    """:func:`write_text_atomic` of :func:`dumps_strict` ``(value)``."""
    return write_text_atomic(path, dumps_strict(value, **kw), name)


@contextmanager
def folder_lock(folder, name: str = "out", lock_name: str = ".otprior-study.lock"):
    """Hold an exclusive lock on ``folder`` for the duration of the block.

    The lock is ``flock`` on ``folder/lock_name`` (created with ``O_NOFOLLOW``: a link there is
    refused). A second process asking for the same lock is refused with a ``DomainError``
    naming ``name``; the lock is released when the block ends or the process dies.
    """
    import fcntl

    path = Path(folder) / lock_name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0), 0o600)
    except OSError as exc:
        raise DomainError(name, str(folder), f"a folder where a lock file can be created ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DomainError(name, str(folder), f"a folder whose {lock_name} is a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DomainError(name, str(folder), "a folder no other study is writing (it is locked by another process)") from None
        yield path
    finally:
        os.close(fd)
