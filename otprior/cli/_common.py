"""What every command shares: the parser class, the argument types, the one-line errors, the output.

A bad value is refused while it is parsed, by the argument type of its flag, with a message that
argparse prefixes with the flag; every other refusal is a :class:`UsageError` whose message names
the flag. Either way the command ends with one line on stderr (:func:`write_error`) and exit
status 2. A flag that is not the command's own is named with its closest spelling
(:func:`did_you_mean`). What a command prints goes through :func:`emit`: its payload as strict
JSON with ``--json``, its lines as terminal-safe text otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import sys
import threading
from pathlib import Path

from .. import limits
from .._json import to_strict_json
from .._output import (
    one_line,
    staged_folder,
    terminal_safe,
    write_file_safely,
    write_stderr_line,
    write_stdout,
)

#: Largest length the command line accepts (the library's log-distance routines hold to 1e18).
MAX_LENGTH = 10**18
#: Largest magnitude of a real-valued flag (beyond it no routine of the library is checked).
MAX_MAGNITUDE = 1e6


#: Exit status when stdout is closed early (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


#: Exit status of ``checkpoint --measure`` when the model's own positional attention contradicts the
#: prediction (``"prediction": "FAILED"``); the report is printed in full first.
EXIT_PREDICTION_FAILED = 3

#: Exit status when standard output is closed or cannot be written (``>&-``, ``> /dev/full``).
EXIT_OUTPUT_FAILED = 2


def did_you_mean(tokens, options) -> str | None:
    """``"unrecognized argument --length (did you mean --lengths?)"`` for the first ``--flag`` of
    ``tokens`` that is not one of ``options`` but close to one (difflib), else None."""
    # a parser's actions: a hidden former spelling close to the token suggests its new spelling
    shown = {o: (action.new if isinstance(action, Renamed) else o) for o, action in options.items()} if isinstance(options, dict) else {}
    options = [o for o in options if o.startswith("--")]
    for token in tokens:
        flag = token.split("=", 1)[0]
        if not flag.startswith("--") or flag == "--" or flag in options:
            continue
        close = difflib.get_close_matches(flag, options, n=1, cutoff=0.75)
        if close:
            return f"unrecognized argument {flag} (did you mean {shown.get(close[0], close[0])}?)"
    return None


class Parser(argparse.ArgumentParser):
    _seen = threading.local()  # the arguments each parser is parsing, per thread (one parser serves every call)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # a prefix of a flag is not the flag (--f is not --forgetting-f-max)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        seen = self._seen.__dict__.setdefault("argv", {})
        seen[id(self)] = list(sys.argv[1:] if args is None else args)
        try:
            return super().parse_known_args(args, namespace)
        finally:
            seen.pop(id(self), None)

    def _print_message(self, message, file=None):
        # --help and --version through the one output layer: a closed or full stdout is an OutputError
        if message and (file is None or file is sys.stdout):
            write_stdout(message)
            return
        super()._print_message(message, file)

    def error(self, message):  # argparse's own errors: one line, status 2
        message = message[len("argument ") :] if message.startswith("argument ") else message
        if message.startswith("the following arguments are required"):
            # a misspelled flag is the likely cause: name it and its closest spelling
            tokens = self._seen.__dict__.get("argv", {}).get(id(self), ())
            message = did_you_mean(tokens, self._option_string_actions) or message
        unknown = re.match(r"ENCODING: invalid choice: (.*?) \(choose from", message)
        if unknown:
            from ._registry_flags import encoding_names

            message = f"encoding: unknown encoding {unknown.group(1)}; choose one of {', '.join(encoding_names())}"
        write_error(message)
        raise SystemExit(2)


class UsageError(Exception):
    """A bad input found by the command line itself (its message names the flag)."""


class Renamed(argparse.Action):
    """A former spelling of a flag: hidden from ``--help``, refused with the one that replaced it."""

    def __init__(self, option_strings, dest, new, why="", **kwargs):
        self.new, self.why = new, why
        super().__init__(option_strings, dest, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string}: a former name, spelled {self.new} now" + (f" ({self.why})" if self.why else ""))


def add_renamed(parser, renamed: dict, why="") -> None:
    """Hidden flags ``{old flag: new flag}`` that refuse the old spelling and name the new one."""
    for old, new in renamed.items():
        parser.add_argument(old, dest=f"_renamed:{old}", action=Renamed, new=new, why=why)


# --- output ---------------------------------------------------------------------------------------


def printable(text: str) -> str:
    # control characters from files and users (escape sequences) and bytes that are not UTF-8: escaped
    return terminal_safe(text)


def write_error(message: str) -> None:
    write_stderr_line(f"otprior: error: {one_line(message)}")


def emit(payload, lines, as_json):
    if as_json:
        text = json.dumps(to_strict_json(payload), indent=2, allow_nan=False)
    else:
        text = "\n".join(printable(str(line)) for line in lines)
    write_out(text + "\n")


def show_length(n: int) -> str:
    """A length as printed: exact below 1e18, else as a double (the exact integer is in the JSON)."""
    return str(n) if n < 10**18 else f"{float(n):.6g}"


def write_out(text: str) -> None:
    """Write all of ``text`` to stdout (:func:`otprior._output.write_stdout`): a closed pipe raises
    ``BrokenPipeError``, a closed or failing stdout :class:`~otprior._output.OutputError`."""
    write_stdout(text)


# --- argument types: each refuses a bad value with a message argparse prefixes with the flag ------


def text_of(text) -> str:
    if not isinstance(text, str):
        raise argparse.ArgumentTypeError(f"{text!r} is not text")
    return text


#: An integer flag: plain ASCII decimal digits with an optional sign, or the exponent form ``1e12`` /
#: ``2.5E6`` (read as the double it names). Python's own ``int`` and ``float`` also take ``1_0``,
#: non-ASCII digits and ``4096.0``; none of those is an integer as written.
_INTEGER = re.compile(r"[+-]?[0-9]+")
_EXPONENT = re.compile(r"([+-]?)([0-9]+)(?:\.([0-9]+))?[eE][+]?([0-9]+)")
_ASCII_SPACE = " \t\r\n"


def _exact_integer(text, limit_digits):
    """The integer a digit string or an exponent form names, exactly (no rounding through a
    double: ``9007199254740993e0`` is 2^53 + 1); ``None`` if it is not an integer; ``math.inf``
    (with its sign) if it has more than ``limit_digits`` digits, before any big integer is made."""
    sign = "-" if text[0] == "-" else ""
    m = _EXPONENT.fullmatch(text)
    if m is None:  # plain digits
        digits, frac, exp = text.lstrip("+-"), "", 0
    else:
        digits, frac, exp = m.group(2), m.group(3) or "", m.group(4)
        exp = int(exp) if len(exp) <= 6 else 10**6
    frac = frac.rstrip("0")
    digits = (digits + frac).lstrip("0")
    shift = exp - len(frac)
    if not digits:
        return 0
    if shift < 0:
        if digits[len(digits) + shift:].strip("0"):
            return None  # a fraction
        digits, shift = digits[:len(digits) + shift], 0
    if len(digits) + shift > limit_digits:
        return -math.inf if sign else math.inf
    return int(sign + digits) * 10**shift


def int_type(minimum=1, maximum=MAX_LENGTH):
    """Integers as ``4096`` or ``1e12`` (plain ASCII digits, optionally one exponent); refuses fractions,
    underscores, other digits, non-finite values and the out-of-range."""

    limit = max(len(str(abs(minimum))), len(str(maximum)) if maximum is not None else 400) + 1

    def parse(text):
        text = text_of(text).strip(_ASCII_SPACE)
        if not text:
            raise argparse.ArgumentTypeError("an empty value is not an integer")
        if not (_INTEGER.fullmatch(text) or _EXPONENT.fullmatch(text)):
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is not an integer (decimal digits, or an exponent form such as 1e12)")
        value = _exact_integer(text, limit)
        if value is None:
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is not an integer") from None
        if isinstance(value, float) and maximum is None:
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is outside the valid domain: an integer of at most {limit} digits")
        if value < minimum or (maximum is not None and value > maximum):
            upper = "" if maximum is None else f", at most {maximum:.3g}" if maximum >= 10**6 else f", at most {maximum}"
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is outside the valid domain: an integer at least {minimum}{upper}")
        return value

    parse.__name__ = "integer"
    return parse


def real_type(low=-MAX_MAGNITUDE, high=MAX_MAGNITUDE, *, low_open=False, high_open=False):
    """Finite reals in an interval (closed unless told); refuses NaN, infinities and text
    (:func:`domain_type` on that interval)."""
    from .._validation import Interval

    return domain_type(Interval(low, high, low_open=low_open, high_open=high_open))


def domain_type(interval):
    """Reals in one of the library's shared domains (:class:`otprior._validation.Interval`): the
    command line accepts exactly what the API accepts, and refuses the rest with the same domain
    and the reason the domain ends there. The command line adds no limits of its own: the time
    and memory of every value of the domain are bounded by the library."""
    why = f" ({interval.reason})" if getattr(interval, "reason", "") else ""

    def parse(text):
        text = text_of(text).strip()
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a number") from None
        if not math.isfinite(value) or value not in interval:
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is outside the valid domain: a finite number in {interval}{why}")
        return value

    parse.__name__ = "number"
    return parse


def name_type(max_length=64):
    def parse(text):
        text = text_of(text).strip()
        if not text or len(text) > max_length or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", text):
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a name (letters, digits, '-', '_', at most {max_length})")
        return text

    parse.__name__ = "name"
    return parse


def path_type(text):
    text = text_of(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    if "\x00" in text:
        raise argparse.ArgumentTypeError("a path with a NUL character")
    return Path(text)


path_type.__name__ = "path"


def as_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


JSON_HELP = 'strict JSON output (non-finite numbers as the strings "Infinity", "-Infinity", "NaN")'
LENGTH = int_type(1, MAX_LENGTH)
# `otprior mass`: every length up to the double 1e300 as an exact integer (the library answers them all)
ANY_LENGTH = int_type(1, int(1e300))


def torch_api(command):
    try:
        from .. import torch as api
    except ImportError as exc:
        raise UsageError(f"the {command} command needs the torch extra (pip install 'otprior[torch]'): {exc}") from None
    return api


def input_path(path: Path, flag: str, *, directory_ok=False):
    """A path given as input: it exists and is a regular file (or a folder when meant)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"{flag}: {str(path)!r}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{flag}: {str(path)!r}: {exc.strerror}") from None
    if directory_ok and Path(path).is_dir():
        return st
    limits.regular_file(path, flag)  # refuses FIFOs, devices, sockets (and folders) without opening them
    return st


def check_image_suffix(path: Path, flag: str) -> None:
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in kinds:
        raise UsageError(f"{flag}: {str(path)!r} must end in an image suffix: {', '.join('.' + k for k in sorted(kinds))}")


def save_figure(drawn, path: Path, dpi=150) -> None:
    fig = figure_of(drawn)
    fmt = path.suffix[1:].lower()
    try:
        write_file_safely(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=fmt), name="plot")
    finally:
        close_figures([fig])


def save_figures(figures, folder: Path, force: bool) -> list:
    """Write ``{file name: Figure}`` into ``folder`` under :mod:`otprior._output`'s rules; return the paths."""
    written = []
    with staged_folder(folder, force=force, name="plot") as staging:
        for name, fig in figures.items():
            fig.savefig(staging / name, dpi=150)
            written.append(str(Path(folder) / name))
    return written


def figure_of(drawn):
    """The figure of what a plot function returned (a Figure, or the Axes it drew on)."""
    return drawn if hasattr(drawn, "savefig") else drawn.figure


def close_figures(figures) -> None:
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for fig in figures:
        pyplot.close(fig)  # a no-op for figures made without pyplot
