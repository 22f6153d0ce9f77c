"""Output that loses nothing of the user's and cannot harm the terminal: folders, files, streams.

Streams
    Every line otprior prints passes :func:`terminal_safe`: control characters that a
    terminal would obey (escape sequences that clear the screen or set the title, carriage
    returns, bells, the C1 controls, bidirectional overrides), from a file (a checkpoint's
    ``model_type``) or from the user, are written as visible escapes (``\\x1b``); text that is
    not valid UTF-8 is written with backslash escapes. :func:`write_stdout` writes a command's
    output and raises :class:`OutputError` when standard output is closed (``>&-``) or fails
    (``> /dev/full``), a broken pipe excepted (``BrokenPipeError``, the reader left);
    :func:`write_stderr_line` writes one line of diagnostics and never raises. After a
    failure the stream's descriptor is pointed at ``/dev/null`` (:func:`silence`), so that
    the interpreter's last flush cannot fail again and print a traceback.

Folders

A command that writes several files (the report, a checkpoint's figures) writes them into
one folder, ``out``, under three rules:

1. ``out`` is a new folder, or an existing empty one; an existing folder that holds
   anything is written into only when the caller says so (``force=True``, ``--force``).
2. Nothing is written outside ``out``. The files are first written into a fresh staging
   folder created inside ``out`` (``tempfile.mkdtemp``, mode 0700, a name no one else
   holds), then moved into place one by one with ``os.replace``, which replaces a
   symbolic link found at a target name instead of following it: a link
   ``out/index.html -> ~/.bashrc`` is replaced by the report's file, ``~/.bashrc`` is
   untouched.
3. A failure leaves ``out`` as it was, except for files already moved; the staging folder
   is removed.

:func:`check_folder` runs the checks without creating anything (a command calls it
before a long computation); :func:`staged_folder` is the context manager that writes.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ._validation import DomainError

__all__ = [
    "check_folder",
    "staged_folder",
    "check_new_file",
    "write_file_safely",
    "terminal_safe",
    "one_line",
    "write_stdout",
    "write_stderr_line",
    "silence",
    "guarded_stderr",
    "OutputError",
]

# C0 controls but tab and newline, DEL, C1 controls (0x9b is an 8-bit CSI), and the Unicode
# format characters that reorder or hide text (bidirectional embeddings, overrides, isolates)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_CONTROL_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text, *, newlines: bool = True) -> str:
    """``text`` with every character a terminal would act on written as a visible escape.

    Escaped: the C0 controls except tab and (when ``newlines``) newline, DEL, the C1 controls
    and the bidirectional format characters, as ``\\xNN`` / ``\\uNNNN``; lone surrogates
    (bytes that were not UTF-8 in a file name) as backslash escapes. Printable text, accented
    letters included, is unchanged.

    Examples
    --------
    >>> terminal_safe("model_type \x1b]0;owned\x07")
    'model_type \\\\x1b]0;owned\\\\x07'
    """
    text = str(text)
    text = (_CONTROL if newlines else _CONTROL_LINE).sub(_escape, text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def one_line(message, limit: int = 2000) -> str:
    """``message`` on one terminal-safe line: runs of blanks and line breaks become one space,
    other controls are escaped (:func:`terminal_safe`), and the middle of a line longer than
    ``limit`` characters is cut."""
    line = terminal_safe(re.sub("[ \t\n\r\v\f]+", " ", str(message)).strip(), newlines=False)
    if len(line) > limit:
        line = line[: limit // 2] + " ... " + line[-limit // 2 :]
    return line


class OutputError(Exception):
    """Standard output (``stream``) is closed or cannot be written (``reason``); a broken pipe is not this."""

    def __init__(self, stream: str, reason: str):
        super().__init__(f"{stream}: the output cannot be written ({reason})")
        self.stream = stream
        self.reason = reason


def silence(stream_name: str) -> None:
    """Point the descriptor of ``sys.stdout`` or ``sys.stderr`` at ``/dev/null`` (after a failure),
    and drop what its buffer holds, so that no later flush fails."""
    stream = getattr(sys, stream_name, None)
    if stream is None:  # closed at start-up: nothing is buffered, nothing will be flushed
        return
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, stream.fileno())
        finally:
            os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass
    try:
        stream.flush()  # now into /dev/null: the buffer empties
    except (OSError, ValueError, AttributeError):
        pass


def write_stdout(text: str) -> None:
    """Write all of ``text`` (made :func:`terminal_safe` by the caller) to ``sys.stdout``.

    A closed pipe raises ``BrokenPipeError``; a closed or failing standard output raises
    :class:`OutputError`. With an unbuffered stdout (``PYTHONUNBUFFERED``, ``python -u``)
    Python's text layer drops what a partial write to a pipe leaves over, so the bytes are
    written in a loop.
    """
    stream = sys.stdout
    if stream is None:  # the interpreter started with descriptor 1 closed
        raise OutputError("stdout", "standard output is closed")
    try:
        buffer = getattr(stream, "buffer", None)
        if buffer is None:  # an in-memory stream
            stream.write(text)
            stream.flush()
            return
        stream.flush()
        data = memoryview(text.encode(stream.encoding or "utf-8", "backslashreplace"))
        while data:
            written = buffer.write(data)
            if written is None:  # a non-blocking stream that is full
                continue
            data = data[written:]
        buffer.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: the stream was closed from Python
        raise OutputError("stdout", getattr(exc, "strerror", None) or str(exc) or type(exc).__name__) from None


def write_stderr_line(line: str) -> bool:
    """Write ``line`` and a newline to ``sys.stderr``; ``False`` (never an exception) when it cannot."""
    stream = sys.stderr
    if stream is None:
        return False
    try:
        stream.write(line + "\n")
        stream.flush()
        return True
    except (OSError, ValueError, AttributeError):
        silence("stderr")
        return False

_STAGING_PREFIX = ".otprior-staging-"


# --- folders and files ---------------------------------------------------------------------------


def _as_path(out, name: str) -> Path:
    if out is None or (isinstance(out, str) and not out.strip()):
        raise DomainError(name, out, "a folder path (an empty path would write into the current folder)")
    try:
        path = Path(out)
    except TypeError:
        raise DomainError(name, out, "a folder path") from None
    if "\x00" in str(path):
        raise DomainError(name, out, "a folder path without NUL characters")
    return path


def _storage(folder: Path, path: Path, name: str) -> None:
    # proc, sysfs and their kind report no blocks: files cannot be created there
    try:
        blocks = os.statvfs(folder).f_blocks
    except (OSError, AttributeError):
        return
    if blocks == 0:
        raise DomainError(name, str(path), f"a folder on a storage file system ({folder} is on a virtual one, such as /proc)")


def check_folder(out, *, force: bool = False, name: str = "out") -> Path:
    """Check that ``out`` can receive files under the rules of this module; create nothing.

    Returns the path. Raises ``DomainError`` (parameter ``name``) when ``out`` is empty,
    names a file or anything but a folder, is a non-empty folder and ``force`` is false,
    is not writable, or when a parent of a new folder is not a folder.
    """
    path = _as_path(out, name)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise DomainError(name, str(path), f"a folder that can be inspected ({exc.strerror})") from None
    if st is None:
        # a new folder: its nearest existing ancestor must be a writable folder
        parent = path.absolute().parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise DomainError(name, str(path), f"a folder path ({parent} is not a folder)")
        _storage(parent, path, name)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise DomainError(name, str(path), f"a path in a writable folder ({parent} is not writable)")
        return path
    if not stat.S_ISDIR(st.st_mode):
        raise DomainError(name, str(path), "a folder (this path is a file or a device)")
    try:
        with os.scandir(path) as entries:
            occupied = next(entries, None) is not None
    except OSError as exc:
        raise DomainError(name, str(path), f"a readable folder ({exc.strerror})") from None
    _storage(path, path, name)
    if occupied and not force:
        raise DomainError(name, str(path), "a new or empty folder (this one holds files; force writing into it with --force / force=True)")
    if not os.access(path, os.W_OK | os.X_OK):
        raise DomainError(name, str(path), "a writable folder")
    return path


def _publish(staging: Path, final: Path, name: str) -> None:
    moves = sorted(staging.iterdir())
    for item in moves:
        target = final / item.name
        if target.is_dir() and not target.is_symlink():
            raise DomainError(name, str(final), f"a folder where {item.name} can be written (a folder of that name is in the way)")
    for item in moves:
        os.replace(item, final / item.name)


@contextmanager
def staged_folder(out, *, force: bool = False, name: str = "out"):
    """Yield a fresh staging folder inside ``out``; on success move its files into ``out``.

    Parameters
    ----------
    out : path-like
        The destination folder (created if new, parents included).
    force : bool
        Allow an existing folder that already holds files; files of the same names are
        replaced (links at those names are replaced, not followed).
    name : str
        The parameter name used in errors.

    Yields
    ------
    pathlib.Path
        The staging folder; write plain files into it (no sub-folders).

    Raises
    ------
    DomainError
        As :func:`check_folder`, and when the folder cannot be created or written.
    """
    path = check_folder(out, force=force, name=name)
    try:
        path.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=path))
    except OSError as exc:
        raise DomainError(name, str(path), f"a folder where files can be created ({exc.strerror or exc})") from None
    try:
        yield staging
        try:
            _publish(staging, path, name)
        except OSError as exc:
            raise DomainError(name, str(path), f"a folder where files can be written ({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, which another
    thread could observe); 0o022 where the kernel does not report it."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def check_new_file(path, *, force: bool = False, name: str = "plot") -> Path:
    """Check a single output file: not empty, not a folder, absent unless ``force``, in a writable folder."""
    path = _as_path(path, name)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise DomainError(name, str(path), f"a file path that can be used ({exc.strerror})") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise DomainError(name, str(path), "a file path (this is a folder)")
        if not force:
            raise DomainError(name, str(path), "a new file (this one exists; replace it with --force / force=True)")
        if not stat.S_ISREG(st.st_mode):
            raise DomainError(name, str(path), "a regular file path (this is a device, FIFO or socket)")
    elif os.path.islink(path) and not force:
        raise DomainError(name, str(path), "a new file (a link of this name exists; replace it with --force / force=True)")
    parent = path.absolute().parent
    if not parent.is_dir():
        raise DomainError(name, str(path), f"a path in an existing folder ({parent} is not one)")
    _storage(parent, path, name)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DomainError(name, str(path), f"a path in a writable folder ({parent} is not writable)")
    return path


def write_file_safely(path, write, *, name: str = "plot") -> Path:
    """Write a single file through a temporary name in its folder and ``os.replace``.

    ``write(tmp_path)`` writes the content; a link at ``path`` is replaced, not followed.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=_STAGING_PREFIX, suffix=path.suffix, dir=path.absolute().parent)
    os.close(fd)
    try:
        write(Path(tmp))
        # mkstemp creates the file with mode 0600; give it the mode a new file gets under the umask
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        raise DomainError(name, str(path), f"a file that can be written ({exc.strerror or exc})") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


class _GuardedStream:
    """A text stream that stops writing, instead of raising, once its file is closed or full."""

    def __init__(self, stream):
        self._stream = stream
        self._dead = stream is None

    def _fail(self):
        self._dead = True
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(fd, self._stream.fileno())
            finally:
                os.close(fd)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text):
        if not self._dead:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self._fail()
        return len(text)

    def flush(self):
        if not self._dead:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._fail()

    def isatty(self):
        try:
            return not self._dead and self._stream.isatty()
        except (OSError, ValueError, AttributeError):
            return False

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextmanager
def guarded_stderr():
    """Within the block, ``sys.stderr`` never raises: a closed (``2>&-``) or full (``2> /dev/full``)
    standard error swallows what is written to it (progress bars, warnings, log lines)."""
    previous = sys.stderr
    sys.stderr = _GuardedStream(previous)
    try:
        yield
    finally:
        if isinstance(sys.stderr, _GuardedStream):
            sys.stderr = previous
