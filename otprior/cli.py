"""The ``otprior`` command.

Subcommands (``otprior COMMAND --help`` for each)::

    otprior margin --window W --lengths L0 L1 --tol T [--growth G] [--score-bound B] [--offset O]
    otprior classify ENCODING [its flags] [--logit-bound B] [--normaliser NAME [--NAME-PARAM V ...]] [--window W]
    otprior prior --rho R --n N [--full] [--plot FILE [--force]]
    otprior mass [ENCODING] [its flags] --window W --n N [N ...] [--dps D]
    otprior report [--out DIR] [--force]
    otprior checkpoint PATH [--scheme S] [--num-heads H] [--mapping TENSOR=ROLE ...] [--window W]
                       [--lengths L ...] [--tol T] [--measure --text FILE] [--plot DIR [--force]]
    otprior intervene CHECKPOINT ... --eval-length T [--shifts S ...] [--data FILE ...]

each with ``--json``. ``checkpoint`` and ``intervene`` need the torch extra. ``otprior
--version`` prints the version; ``python -m otprior`` is the same command.

The library computes and returns data; this module parses, validates and prints.

Encodings and normalisers
    ``classify`` and ``mass`` take one sub-command per registered encoding
    (:func:`otprior.encodings.names`), whose flags are generated from the registry
    (:func:`otprior.encodings.parameters`): one flag per constructor parameter, ``--r1`` for
    ``r1``, with the parameter's type (:meth:`~otprior._registry.Parameter.convert`), its
    documentation as help, its choices, and required when the class has no default; the
    instance is built by :func:`otprior.encodings.get`. So ``--c`` exists for ``fire`` only,
    and ``otprior classify fire --help`` lists FIRE's flags. A number may be a
    comma-separated list, one value per head, for the parameters a class takes per head
    (``--alpha 1.1,0.9``; ALiBi's ``--heads H`` gives the implementation's slopes); a
    multi-head encoding gets one verdict, or one row per length, per head. Parameters that
    hold Python objects (callables, weight matrices: :data:`LIBRARY_ONLY`) are set from the
    library. The normaliser (:mod:`otprior.normalisers`, default softmax) is chosen with
    ``--normaliser NAME`` and its parameters are spelled ``--NAME-PARAMETER``
    (``--ssmax-s 2``); the encoding's ``--logit-bound B`` is the content bound of the pair's
    verdict (:func:`otprior.classify`; ``classify --score-bound`` is refused as its former name). ``otprior mass`` without an encoding is ``mass log-distance``.

Errors
    Every input is validated before any work: the type and domain of each flag when it is
    parsed, then the combinations, the files and the memory an input would need
    (:mod:`otprior.limits`). A bad input ends the command with exit status 2 and one line
    on stderr, ``otprior: error: --flag: ...``, naming the flag as the command spells it.
    An error the library raises (:class:`~otprior.DomainError` and the package's other
    named errors) is mapped to the flag that carried the value. Flags are never
    abbreviated (``--f`` is not ``--forgetting-f-max``). Anything else is a defect of
    otprior: one line, exit status 1 (``OTPRIOR_DEBUG=1`` shows the traceback). When the
    reader of the output goes away (``otprior ... | head -1``) the command stops quietly
    with status 141, as a process ended by SIGPIPE; ``checkpoint --measure`` prints its report and
    ends with status 3 when a prediction FAILED (the model's own positional attention contradicts it);
    when standard output is closed or
    cannot be written (``>&-``, ``> /dev/full``) it ends with status 2 and one line on
    stderr (nothing when stderr is closed too), never a traceback. Control characters in
    anything printed (a file's fields, a user's text) are escaped (:mod:`otprior._output`).

JSON
    ``--json`` prints strict JSON (RFC 8259): the non-finite numbers that IEEE doubles
    can hold are written as the strings ``"Infinity"``, ``"-Infinity"`` and ``"NaN"``,
    never as the bare tokens Python's ``json`` module would write; a value that is not
    known (a limit no theorem gives) is ``null``.

Files
    Output goes into a new file or folder; an existing file (``prior --plot``) or a folder
    that holds files (``report --out``, ``checkpoint --plot``) is written into only with
    ``--force``, and nothing is written outside the folder (:mod:`otprior._output`). Input
    files must be regular files (no FIFOs, devices or sockets) within the read caps
    (``checkpoint --text`` included).

Expressions
    ``bias --expr`` is handed to :class:`otprior.encodings.Bias`, which parses it with
    :func:`otprior.expression.parse_bias` (a whitelist grammar, never evaluated; limits on
    alphabet, length, depth, nodes, exponents, constants and the size of every exact number,
    checked on the text before sympy runs; sympy then builds and checks the tree in a child
    process within the parse budget, 10 s and 256 MiB, a refusal when it runs out) and decides
    it under ``--time-budget`` seconds and ``--memory-budget`` bytes (the library's defaults),
    answering "undecided" with the reason when either runs out. Every child ends with the
    command.

Resource caps
    Lengths, counts, files and the memory they imply are checked against the caps of
    :class:`otprior.limits.Caps` (default: 2 GiB per allocation, 256 MiB per input file,
    1 MiB per JSON config, a million repeated items, heads included). Raise them with the
    environment variables ``OTPRIOR_MAX_BYTES``, ``OTPRIOR_MAX_READ_BYTES``,
    ``OTPRIOR_MAX_JSON_BYTES`` and ``OTPRIOR_MAX_ITEMS``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import functools
import json
import math
import os
import re
import sys
import threading
import typing
from pathlib import Path

from . import limits
from ._json import to_strict_json
from ._output import (
    OutputError,
    check_folder,
    check_new_file,
    guarded_stderr,
    one_line,
    silence,
    staged_folder,
    terminal_safe,
    write_file_safely,
    write_stderr_line,
    write_stdout,
)
from ._validation import ALPHA, OFFSET, TOL, ConvergenceError, DomainError, FileFormatError, Interval, PrecisionError

__all__ = [
    "main",
    "build_parser",
    "build_encoding",
    "build_normaliser",
    "UsageError",
    "encoding_names",
    "encoding_parameters",
    "normaliser_flag",
    "to_strict_json",
]

#: Largest length the command line accepts (the library's log-distance routines hold to 1e18).
MAX_LENGTH = 10**18
#: Largest magnitude of a real-valued flag (beyond it no routine of the library is checked).
MAX_MAGNITUDE = 1e6
#: Bytes per entry that :func:`otprior.ot_prior` holds at once, with a margin: the Anderson
#: solver keeps 2 x 8 history rows of n doubles besides its iterate, image, residual and
#: output, and the block cumulative sums a few more (``prior`` measured 215 n bytes of
#: peak resident memory at n = 1e6 and 3e6).
PRIOR_BYTES_PER_ENTRY = 8 * 40
#: Sequences per evaluation batch of the intervention, and the float32 tensors of shape
#: (batch, heads, T, T) an attention layer holds at once (content, scores, masked scores,
#: attention weights, and the bias and mask of shape (heads, T, T)): ``intervene``
#: measured 4.8 such tensors of peak resident memory at T = 512 and 1024 on the CPU.
INTERVENE_BATCH = 8
INTERVENE_TENSORS = 6
#: Exit status when stdout is closed early (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


def _did_you_mean(tokens, options) -> str | None:
    """``"unrecognized argument --length (did you mean --lengths?)"`` for the first ``--flag`` of
    ``tokens`` that is not one of ``options`` but close to one (difflib), else None."""
    # a parser's actions: a hidden former spelling close to the token suggests its new spelling
    shown = {o: (action.new if isinstance(action, _Renamed) else o) for o, action in options.items()} if isinstance(options, dict) else {}
    options = [o for o in options if o.startswith("--")]
    for token in tokens:
        flag = token.split("=", 1)[0]
        if not flag.startswith("--") or flag == "--" or flag in options:
            continue
        close = difflib.get_close_matches(flag, options, n=1, cutoff=0.75)
        if close:
            return f"unrecognized argument {flag} (did you mean {shown.get(close[0], close[0])}?)"
    return None


class _Parser(argparse.ArgumentParser):
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
            message = _did_you_mean(tokens, self._option_string_actions) or message
        unknown = re.match(r"ENCODING: invalid choice: (.*?) \(choose from", message)
        if unknown:
            message = f"encoding: unknown encoding {unknown.group(1)}; choose one of {', '.join(encoding_names())}"
        _write_error(message)
        raise SystemExit(2)


class UsageError(Exception):
    """A bad input found by the command line itself (its message names the flag)."""


# --- output ---------------------------------------------------------------------------------------



def _printable(text: str) -> str:
    # control characters from files and users (escape sequences) and bytes that are not UTF-8: escaped
    return terminal_safe(text)


def _one_line(message: str, limit: int = 2000) -> str:
    return one_line(message, limit)


def _write_error(message: str) -> None:
    write_stderr_line(f"otprior: error: {_one_line(message)}")


def _emit(payload, lines, as_json):
    if as_json:
        text = json.dumps(to_strict_json(payload), indent=2, allow_nan=False)
    else:
        text = "\n".join(_printable(str(line)) for line in lines)
    _write_out(text + "\n")


def _write_out(text: str) -> None:
    """Write all of ``text`` to stdout (:func:`otprior._output.write_stdout`): a closed pipe raises
    ``BrokenPipeError``, a closed or failing stdout :class:`~otprior._output.OutputError`."""
    write_stdout(text)


# --- argument types: each refuses a bad value with a message argparse prefixes with the flag ------


def _text_of(text) -> str:
    if not isinstance(text, str):
        raise argparse.ArgumentTypeError(f"{text!r} is not text")
    return text


def _int_type(minimum=1, maximum=MAX_LENGTH):
    """Integers as ``4096`` or ``1e12``; refuses fractions, non-finite values and the out-of-range."""

    def parse(text):
        text = _text_of(text).strip()
        if not text:
            raise argparse.ArgumentTypeError("an empty value is not an integer")
        try:
            value = int(text, 10)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
            if not math.isfinite(number):
                raise argparse.ArgumentTypeError(f"{text!r} is not a finite integer") from None
            if not number.is_integer():
                raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
            value = int(number)
        if value < minimum or (maximum is not None and value > maximum):
            upper = "" if maximum is None else f", at most {maximum:.3g}" if maximum >= 10**6 else f", at most {maximum}"
            raise argparse.ArgumentTypeError(f"{text!r} is outside the valid domain: an integer at least {minimum}{upper}")
        return value

    parse.__name__ = "integer"
    return parse


def _real_type(low=-MAX_MAGNITUDE, high=MAX_MAGNITUDE, *, low_open=False, high_open=False):
    """Finite reals in an interval (closed unless told); refuses NaN, infinities and text."""
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    domain = f"a finite number in {left}{low:g}, {high:g}{right}"

    def parse(text):
        text = _text_of(text).strip()
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is outside the valid domain: {domain}")
        if value < low or value > high or (low_open and value == low) or (high_open and value == high):
            raise argparse.ArgumentTypeError(f"{text!r} is outside the valid domain: {domain}")
        return value

    parse.__name__ = "number"
    return parse


def _domain_type(interval, *, cost=None):
    """Reals in one of the library's shared domains (:class:`otprior._validation.Interval`): the
    command line refuses what the API refuses, with the same domain. ``cost``, an interval
    inside it, is a time limit of the command line (see :data:`MARGIN_COST`): a value of the
    domain beyond it is refused as such, naming both."""

    def parse(text):
        text = _text_of(text).strip()
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a number") from None
        if not math.isfinite(value) or value not in interval:
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is outside the valid domain: a finite number in {interval}")
        if cost is not None and value not in cost:
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is in the valid domain {interval} but beyond the command line's time limit: "
                                             f"a number in {cost} (otprior.margin_for answers it, in seconds to minutes)")
        return value

    parse.__name__ = "number"
    return parse


def _name_type(max_length=64):
    def parse(text):
        text = _text_of(text).strip()
        if not text or len(text) > max_length or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", text):
            raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a name (letters, digits, '-', '_', at most {max_length})")
        return text

    parse.__name__ = "name"
    return parse


def _path_type(text):
    text = _text_of(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    if "\x00" in text:
        raise argparse.ArgumentTypeError("a path with a NUL character")
    return Path(text)


_path_type.__name__ = "path"

# --- encodings and normalisers: flags generated from their registries -----------------------------

#: Constructor parameters that hold Python objects (callables, weight matrices): they are set
#: from the library, and no flag is generated for them.
LIBRARY_ONLY = {"bias": ("asymptotic",), "fire": ("f", "mlp")}
#: Largest magnitude of a real-valued encoding or normaliser parameter on the command line
#: (but those of :data:`SHARED_DOMAINS`).
MAX_PARAMETER_MAGNITUDE = 1e12
#: Parameters whose domain the library defines once (``otprior._validation``): their flags accept
#: exactly that domain, as the API does.
SHARED_DOMAINS = {"alpha": ALPHA, "offset": OFFSET}
#: Time limits of ``margin`` and ``checkpoint``'s margin inside the API's domains of tol and offset:
#: the certified bisection's cost grows with the margin, and beyond these it took 2 to 35 s of CPU
#: (tol = 5e-324 with relative growth: 16-34 s; offset 1e15: 2 s, 1e23: 30 s); within them every
#: corner measured (W = 1, L up to 1e18, B = 100, both growths) took under 0.3 s.
MARGIN_COST = {"tol": Interval(1e-12, 1.0, high_open=True), "offset": Interval(1e-300, 1e6)}
#: Largest content bound B (``--logit-bound`` of every encoding, ``margin --score-bound``): the
#: factor e^(2B) of Theorem 10 is a double up to B of about 354.
MAX_CONTENT_BOUND = 100.0
#: Values beyond which a parameter is "huge" when the library overflows on it (see ``_overflow``).
HUGE = 1e6
#: Longest text one flag takes (a per-head list, a bucket table, an expression).
MAX_FLAG_CHARS = 100_000
#: Encoding of ``otprior mass`` when none is named.
DEFAULT_MASS_ENCODING = "log-distance"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def encoding_names() -> list:
    """The registered encoding names (:func:`otprior.encodings.names`)."""
    from . import encodings as E

    return list(E.names())


def encoding_parameters(name) -> tuple:
    """The registry's :class:`~otprior._registry.Parameter` records of encoding ``name`` that the
    command line offers as flags (all but :data:`LIBRARY_ONLY`)."""
    from . import encodings as E

    skip = LIBRARY_ONLY.get(name, ())
    return tuple(p for p in E.parameters(name) if p.name not in skip)


def normaliser_flag(normaliser: str, parameter: str) -> str:
    """The flag of a normaliser's parameter: ``--NORMALISER-PARAMETER`` (e.g. ``--ssmax-s``)."""
    return f"--{normaliser}-{parameter.replace('_', '-')}"


def _normaliser_dest(normaliser: str, parameter: str) -> str:
    return f"normaliser:{normaliser}:{parameter}"


def _kinds(p) -> set:
    kinds = set(typing.get_args(p.type)) or {p.type}
    kinds.discard(type(None))
    return kinds


def _parameter_type(p, *, per_head: bool):
    """The argparse type of a registry parameter: :meth:`Parameter.convert`, then the command
    line's own guards (finite numbers within :data:`MAX_PARAMETER_MAGNITUDE`, integers also
    written as ``1e6``). With ``per_head``, a number may be a comma-separated list, one value
    per head, handed to the class as a tuple (the class refuses it when it has no heads)."""
    kinds = _kinds(p)
    integer = kinds <= {int}
    numeric = kinds <= {int, float} and not kinds <= {bool}
    whole = _int_type(-MAX_LENGTH, MAX_LENGTH)

    def one(text):
        try:
            value = p.convert(text)
        except DomainError as exc:
            if integer:
                try:
                    return whole(text)
                except argparse.ArgumentTypeError:
                    pass
            if numeric:
                raise argparse.ArgumentTypeError(f"{text.strip()[:80]!r} is not {'an integer' if integer else 'a number'}") from None
            raise argparse.ArgumentTypeError(f"{text.strip()[:80]!r}: {exc.domain}") from None
        shared = SHARED_DOMAINS.get(p.name)
        if shared is not None and numeric and not (math.isfinite(value) and value in shared):
            raise argparse.ArgumentTypeError(f"{text.strip()[:80]!r} is outside the valid domain: a finite number in {shared}")
        if shared is None and numeric and (not math.isfinite(value) or abs(value) > (MAX_LENGTH if integer else MAX_PARAMETER_MAGNITUDE)):
            bound = f"{MAX_LENGTH:.0e}" if integer else f"{MAX_PARAMETER_MAGNITUDE:g}"
            raise argparse.ArgumentTypeError(f"{text.strip()[:80]!r} is outside the valid domain: a finite number within +-{bound}")
        if p.name == "logit_bound" and not 0 <= value <= MAX_CONTENT_BOUND:
            raise argparse.ArgumentTypeError(f"{text.strip()[:80]!r} is outside the valid domain: a content bound B in [0, {MAX_CONTENT_BOUND:g}]")
        return value

    def parse(text):
        text = _text_of(text)
        if len(text) > MAX_FLAG_CHARS:
            raise argparse.ArgumentTypeError(f"a value of {len(text)} characters (at most {MAX_FLAG_CHARS})")
        if "\x00" in text:
            raise argparse.ArgumentTypeError("a value with a NUL character")
        if per_head and numeric and "," in text:
            parts = text.split(",")
            try:
                limits.check_count(len(parts), p.name, f"{len(parts)} values")
            except DomainError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
            return tuple(one(part) for part in parts)
        return one(text)

    parse.__name__ = "integer" if integer else "number" if numeric else "value"
    return parse


def _plain(doc: str) -> str:
    """A docstring line as help text: reST maths and literals unmarked, ``%`` escaped for argparse."""
    doc = re.sub(r":math:`([^`]*)`", r"\1", doc).replace("``", "")
    doc = re.sub(r"\\infty(?![A-Za-z])", "oo", doc)  # D_\infty(W) -> D_oo(W), as the command prints it
    doc = re.sub(r"(?<=[A-Za-z0-9_}])\\([A-Za-z]+)", r" \1", doc)
    doc = re.sub(r"\\[,;!]", " ", re.sub(r"\\([A-Za-z]+)", r"\1", doc))
    return re.sub(r"(?<=\S)  +", " ", doc).replace("%", "%%")


def _help(p, prefix="") -> str:
    text = prefix + _plain(p.doc or p.name)
    if not p.required and p.default is not None and not callable(p.default):
        text += f" (default {p.default})"
    return text


class _Renamed(argparse.Action):
    """A former spelling of a flag: hidden from ``--help``, refused with the one that replaced it."""

    def __init__(self, option_strings, dest, new, why="", **kwargs):
        self.new, self.why = new, why
        super().__init__(option_strings, dest, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string}: a former name, spelled {self.new} now" + (f" ({self.why})" if self.why else ""))


def _add_renamed(parser, renamed: dict, why="") -> None:
    """Hidden flags ``{old flag: new flag}`` that refuse the old spelling and name the new one."""
    for old, new in renamed.items():
        parser.add_argument(old, dest=f"_renamed:{old}", action=_Renamed, new=new, why=why)


def _add_encoding_flags(parser, name) -> None:
    """One flag per parameter of encoding ``name`` (``--r1``, ``--logit-bound``, ...); the class's
    former keyword names (its ``renamed`` table) as refused flags that name the new ones."""
    from . import encodings as E
    from ._registry import renamed_parameters

    cls = E.lookup(name)
    _add_renamed(parser, {_flag(old): _flag(new) for old, new in renamed_parameters(cls).items()}, getattr(cls, "renamed_reason", ""))
    group = parser.add_argument_group(f"parameters of {name}")
    for p in encoding_parameters(name):
        kw = {"dest": p.name, "type": _parameter_type(p, per_head=True), "help": _help(p), "metavar": p.name.upper()}
        if p.choices is not None:
            kw["choices"] = p.choices
            del kw["metavar"]
        if _kinds(p) <= {bool}:
            kw["metavar"] = "{true,false}"
        if p.required:
            kw["required"] = True
        else:
            kw["default"] = None  # absent: the class's default
        group.add_argument(_flag(p.name), **kw)


def _add_normaliser_flags(parser) -> None:
    """``--normaliser NAME`` and each normaliser's parameters as ``--NAME-PARAMETER``."""
    from . import normalisers as N

    names = N.names()
    group = parser.add_argument_group(
        "normaliser", "the normalisation of the attention row (default softmax); its parameters are spelled --NAME-PARAMETER"
    )
    group.add_argument("--normaliser", choices=names, default=None, metavar="NAME", help="one of: " + ", ".join(names))
    for name in names:
        for p in N.parameters(name):
            kw = {"dest": _normaliser_dest(name, p.name), "type": _parameter_type(p, per_head=False), "default": None,
                  "help": _help(p, f"{name}: "), "metavar": p.name.upper()}
            if p.choices is not None:
                kw["choices"] = p.choices
                del kw["metavar"]
            group.add_argument(normaliser_flag(name, p.name), **kw)


def _given(args, params) -> dict:
    return {p.name: getattr(args, p.name) for p in params if getattr(args, p.name, None) is not None}


def build_encoding(name, given: dict):
    """Encoding ``name`` from the flags given (``otprior.encodings.get``); a refusal names the flag."""
    from . import encodings as E

    params = {p.name: p for p in encoding_parameters(name)}
    for key in given:
        if key not in params:
            raise UsageError(f"{name} does not take {_flag(key)}")
    try:
        enc = E.get(name, **given)
    except DomainError as exc:
        if exc.parameter in params and not isinstance(exc, limits.ResourceError):
            raise UsageError(f"{_flag(exc.parameter)}: {exc}") from None
        raise
    if enc.heads is not None:  # one verdict or row per head: a count of printed items
        limits.check_count(enc.heads, "heads", enc.heads)
    return enc


@contextlib.contextmanager
def _overflow(given: dict):
    """An ``OverflowError`` from the library on huge parameters becomes a refusal naming them
    (values beyond :data:`HUGE`); with no huge parameter it is a defect and passes on."""
    try:
        yield
    except OverflowError as exc:
        huge = [k for k, v in given.items() if any(isinstance(x, (int, float)) and abs(x) > HUGE for x in (v if isinstance(v, tuple) else (v,)))]
        if not huge:
            raise
        flags = ", ".join(_flag(k) for k in huge)
        raise UsageError(f"{flags}: values this large overflow double precision here ({exc}); give values within +-{HUGE:g}") from None


def build_normaliser(args):
    """The normaliser of ``--normaliser`` with its ``--NAME-PARAMETER`` flags (None: softmax)."""
    from . import normalisers as N

    chosen = getattr(args, "normaliser", None)
    given = {}
    for name in N.names():
        for p in N.parameters(name):
            value = getattr(args, _normaliser_dest(name, p.name), None)
            if value is None:
                continue
            if name != chosen:
                raise UsageError(f"{normaliser_flag(name, p.name)}: a parameter of --normaliser {name}, not of "
                                 f"{chosen or 'softmax (the default)'}")
            given[p.name] = value
    if chosen is None:
        return None
    missing = [normaliser_flag(chosen, p.name) for p in N.parameters(chosen) if p.required and p.name not in given]
    if missing:
        raise UsageError(f"--normaliser: {chosen} needs {', '.join(missing)}")
    try:
        return N.get(chosen, **given)
    except DomainError as exc:
        if isinstance(exc.parameter, str) and exc.parameter in given:
            raise UsageError(f"{normaliser_flag(chosen, exc.parameter)}: {exc}") from None
        raise UsageError(f"--normaliser: {exc}") from None


# --- margin ---------------------------------------------------------------------------------------


def _cmd_margin(args):
    from .margin import margin_for

    r = margin_for(args.window, tuple(args.lengths), args.tol, growth=args.growth, score_bound=args.score_bound, offset=args.offset)
    L0, L1 = args.lengths
    lines = [
        f"margin   delta = {r.margin:.10f}   (exponent alpha >= {r.exponent:.10f})",
        f"growth   {r.growth_kind} growth of distant mass at the margin: {r.growth:.6g} (tol {args.tol:g})",
        f"distant  D_L0 = {r.distant_mass[0]:.6g}, D_L1 = {r.distant_mass[1]:.6g} (W = {args.window}, L = {L0}..{L1})",
        f"bracket  [{r.bracket[0]:.12f}, {r.bracket[1]:.12f}] (certified: no margin below the left end works, the right end does)",
    ]
    return r.as_dict(), lines


# --- classify -------------------------------------------------------------------------------------


def _limit(verdict, window):
    """:math:`D_\\infty(W)` of a verdict, or None where the pair's constant-score limit is not known
    or does not exist (undecided; content-dependent or with a normaliser, when the library does not
    give it; rows that oscillate with n, such as Falcon's bfloat16 ALiBi)."""
    if verdict.kind == "undecided":
        return None
    try:
        return verdict.limit_distant_mass(window)
    except limits.ResourceError:  # a --window too large to sum: the user's flag, named
        raise
    except (DomainError, PrecisionError):
        return None


def _verdict_lines(v, window, indent=""):
    lines = [f"{indent}reason   {v.reason}"]
    if v.rate:
        lines.append(f"{indent}rate     {v.rate}")
    if v.kind == "content-dependent" and v.threshold is not None:
        lines.append(f"{indent}content  the window keeps its share iff the content advantage Delta {'>' if v.threshold_strict else '>='} {v.threshold:.6g}")
    limit = _limit(v, window)
    if limit is not None:
        lines.append(f"{indent}D_oo(W = {window}) = {limit:.6g}")
    elif v.kind == "oscillating":
        try:
            lo, hi = v.distant_mass_bounds(window)
            lines.append(f"{indent}no limit: liminf D_n(W = {window}) = {lo:.6g}, limsup = {hi:.6g}")
        except (DomainError, PrecisionError):
            lines.append(f"{indent}no limit: D_n(W = {window}) oscillates with n")
    elif v.kind != "undecided":
        lines.append(f"{indent}D_oo(W = {window}) not given: D_n(W) has no limit known to otprior for this pair")
    return lines


def _cmd_classify(args):
    from .classification import classify

    given = _given(args, encoding_parameters(args.encoding))
    enc = build_encoding(args.encoding, given)
    normaliser = build_normaliser(args)
    structure = build_structure(args)
    with _overflow(given):
        result = classify(enc, normaliser, structure=structure)
        return _classify_output(enc, normaliser, result, args.window, structure)


def _classify_output(enc, normaliser, result, window, structure=None):
    pair = repr(enc) + ("" if normaliser is None else f" with {normaliser!r}") + ("" if structure is None else f" under {structure!r}")
    if not isinstance(result, tuple):
        payload = result.as_dict(window) if result.kind == "oscillating" else result.as_dict()
        payload["window"] = window
        payload["limit_distant_mass"] = _limit(result, window)
        return payload, [f"{pair}: {result.kind.upper()}", *_verdict_lines(result, window)]
    rows = []
    lines = [f"{pair}: {len(result)} heads"]
    for head, v in enumerate(result):
        row = {"head": head, **v.as_dict(window if v.kind == "oscillating" else None), "limit_distant_mass": _limit(v, window)}
        rows.append(row)
        lines.append(f"head {head}: {v.kind.upper()}")
        lines += _verdict_lines(v, window, indent="  ")
    counts = {k: sum(r["kind"] == k for r in rows) for k in ("bounded", "diluting", "oscillating", "content-dependent", "undecided")}
    lines.append(", ".join(f"{c} {k}" for k, c in counts.items() if c))
    payload = {"encoding": repr(enc), "normaliser": None if normaliser is None else repr(normaliser), "window": window,
               "counts": counts, "heads": rows}
    return payload, lines


# --- prior, mass ----------------------------------------------------------------------------------


def _plot_suffix_ok(path: Path, flag: str) -> None:
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in kinds:
        raise UsageError(f"{flag}: {str(path)!r} must end in an image suffix: {', '.join('.' + k for k in sorted(kinds))}")


def _save_figure(drawn, path: Path, dpi=150) -> None:
    fig = _figure_of(drawn)
    fmt = path.suffix[1:].lower()
    try:
        write_file_safely(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=fmt), name="plot")
    finally:
        _close([fig])


def _cmd_prior(args):
    from .ot_prior import ot_prior, ot_window_law

    limits.check_allocation(PRIOR_BYTES_PER_ENTRY * args.n, "n", args.n)
    if args.full:
        limits.check_count(args.n, "n")
    if args.plot is not None:
        check_new_file(args.plot, force=args.force, name="plot")
        _plot_suffix_ok(args.plot, "--plot")
    result = ot_prior(args.n, args.rho)
    prior = result.prior
    windows = [w for w in (1, 4, 16, 64, 256, 1024) if w <= args.n]
    # the masses of the prior just solved (sums of positive terms), not a second solve or the bounds route
    rows = [{"window": w, "mass": math.fsum(prior[:w].tolist()), "law": ot_window_law(w, args.n, args.rho)} for w in windows]
    payload = {"n": args.n, "rho": args.rho, "c": result.c, "log_error_bound": result.log_error_bound, "windows": rows}
    lines = [
        f"constant-score prior of causal OT attention, n = {args.n}, rho = {args.rho}",
        f"(certified log error of the scalings: {result.log_error_bound:.1e})",
        "window   exact mass      window law H_W (Z_q/n)^(1-rho)",
    ]
    lines += [f"{r['window']:>6}   {r['mass']:.6e}   {r['law']:.6e}" for r in rows]
    if args.full:
        payload["prior"] = prior
        lines += ["distance d   pi_n(d)"] + [f"{d:>10}   {p:.16e}" for d, p in enumerate(prior.tolist())]
    if args.plot is not None:
        from .plots import plot_ot_prior

        _save_figure(plot_ot_prior(args.n, args.rho), args.plot)
        payload["plot"] = str(args.plot)
        lines.append(f"plot written to {args.plot}")
    return payload, lines


def _show_length(n):
    """A length as printed: exact below 1e18, else as a double (the exact integer is in the JSON)."""
    return str(n) if n < 10**18 else f"{float(n):.6g}"


MASS_ROW_WEIGHT = 100  # items of the item cap one row of `otprior mass` counts for


def _cmd_mass(args):

    name = args.encoding
    given = _given(args, encoding_parameters(name))
    enc = build_encoding(name, given)
    with _overflow(given):
        return _masses(args, name, enc)


def _masses(args, name, enc):
    from . import log_distance as ld

    lengths = list(args.n)
    count = enc.heads or 1
    # the work, checked before the per-head instances are built: each row is a mass computation and a
    # printed line, weighed as MASS_ROW_WEIGHT items against the item cap (10^4 rows at the default cap)
    flag = "--n" if not enc.heads else ("--heads" if name == "alibi" and getattr(args, "slope", None) is None
                                        else "--slope" if name == "alibi" else "heads (per-head values)")
    limits.check_count(len(lengths) * count * MASS_ROW_WEIGHT, flag,
                       f"{count} heads x {len(lengths)} lengths, at most {limits.current().max_items // MASS_ROW_WEIGHT} rows")
    heads = enc.per_head()
    multi = heads is not None
    heads = heads if multi else (enc,)
    if name == "causal-ot":
        limits.check_allocation(PRIOR_BYTES_PER_ENTRY * max(lengths), "n", max(lengths))
    dps = getattr(args, "dps", None)
    more = f" and {len(heads) - 1} more heads" if len(heads) > 1 else ""
    rows, lines = [], [f"{heads[0]!r}{more}, window W = {args.window}"]
    for head, h in enumerate(heads):
        for n in lengths:
            row = {"n": n, "parameters": repr(h)}
            if multi:
                row["head"] = head
            if name == "log-distance":
                a, o = h.alpha, h.offset
                row["window_mass"] = ld.window_mass(args.window, n, a, offset=o)
                row["distant_mass"] = ld.distant_mass(args.window, n, a, offset=o)
                row["window_mass_bounds"] = list(ld.window_mass_bounds(args.window, n, a, offset=o))
                if dps is not None:
                    import mpmath

                    row["window_mass_digits"] = mpmath.nstr(ld.window_mass(args.window, n, a, offset=o, dps=dps), dps)
            else:
                D = float(h.distant_mass(args.window, n))
                row["distant_mass"] = D
                row["window_mass"] = 1.0 - D
            if h.score_bound:
                row["distant_mass_range"] = [float(x) for x in h.distant_mass_range(args.window, n)]
            rows.append(row)
            text = f"{'head ' + str(head) + '  ' if multi else ''}n = {_show_length(n):<8} window mass {row['window_mass']:.16g}   distant mass {row['distant_mass']:.16g}"
            if "window_mass_bounds" in row:
                lo, hi = row["window_mass_bounds"]
                text += f"\n{'':8}certified {lo:.16g} <= m <= {hi:.16g}"
            if "window_mass_digits" in row:
                text += f"\n{'':8}{dps} digits  m = {row['window_mass_digits']}"
            if "distant_mass_range" in row:
                text += f"\n{'':8}content within +-{h.score_bound:g}: {row['distant_mass_range'][0]:.6g} <= D <= {row['distant_mass_range'][1]:.6g}"
            lines.append(text)
    payload = {"encoding": name, "parameters": repr(enc), "window": args.window, "heads": len(heads) if multi else None, "rows": rows}
    return payload, lines


# --- report ---------------------------------------------------------------------------------------


def _cmd_report(args):
    from .report import build_report

    check_folder(args.out, force=args.force, name="out")  # before a minute of work
    out = build_report(args.out, progress=not args.json, force=args.force)
    return {"report": str(out)}, [f"report written to {out}"]


# --- checkpoint, intervene (torch extra) ----------------------------------------------------------


def _torch_api(command):
    try:
        from . import torch as api
    except ImportError as exc:
        raise UsageError(f"the {command} command needs the torch extra (pip install 'otprior[torch]'): {exc}") from None
    return api


def _input_path(path: Path, flag: str, *, directory_ok=False):
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


def _mapping_type(text):
    """``TENSOR=ROLE``: a tensor name (or a regular expression over the names) and its role."""
    text = _text_of(text)
    tensor, sep, role = text.rpartition("=")
    if not sep or not tensor.strip() or not re.fullmatch(r"[a-z_]{1,64}", role.strip()):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not TENSOR=ROLE (a tensor name or pattern, '=', a role such as slope)")
    if len(tensor) > 1000 or "\x00" in tensor:
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: a tensor name of at most 1000 characters, without NUL")
    return tensor.strip(), role.strip()


_mapping_type.__name__ = "mapping"


def _save_figures(figures, folder: Path, force: bool) -> list:
    """Write ``{file name: Figure}`` into ``folder`` under :mod:`otprior._output`'s rules; return the paths."""
    written = []
    with staged_folder(folder, force=force, name="plot") as staging:
        for name, fig in figures.items():
            fig.savefig(staging / name, dpi=150)
            written.append(str(Path(folder) / name))
    return written


def _figure_of(drawn):
    """The figure of what a plot function returned (a Figure, or the Axes it drew on)."""
    return drawn if hasattr(drawn, "savefig") else drawn.figure


def _close(figures) -> None:
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for fig in figures:
        pyplot.close(fig)  # a no-op for figures made without pyplot


MEASURE_DEFAULT_MAX = 4096  # longest length --measure runs without --lengths (attention maps are n x n per head)


def _cmd_checkpoint(args):
    _input_path(args.path, "path", directory_ok=True)
    if args.plot is not None:
        check_folder(args.plot, force=args.force, name="plot")
    mapping = None
    if args.mapping is not None:
        limits.check_count(len(args.mapping), "mapping", len(args.mapping))
        if args.scheme is None:
            raise UsageError("--mapping: give the scheme the mapped tensors belong to with --scheme")
        mapping = {}
        for tensor, role in args.mapping:
            if tensor in mapping:
                raise UsageError(f"--mapping: {tensor!r} is mapped twice")
            mapping[tensor] = role
    lengths = None
    if args.lengths is not None:
        lengths = tuple(args.lengths)
        if not 2 <= len(lengths) <= 64 or list(lengths) != sorted(set(lengths)) or lengths[0] < 2:
            raise UsageError(f"--lengths: {' '.join(map(str, lengths))[:200]} must be 2 to 64 increasing lengths >= 2")
    if args.window is not None and lengths is not None and args.window >= lengths[0]:
        raise UsageError(f"--window: {args.window} must be below the shortest length {lengths[0]} (--lengths)")
    text = None
    if args.measure:
        if args.text is None:
            raise UsageError("--measure: give the text to run the model on with --text FILE")
        text = limits.read_bytes(args.text, "text")
    elif args.text is not None:
        raise UsageError("--text: used with --measure only")
    api = _torch_api("checkpoint")
    args._context = str(args.path)
    try:
        ckpt = api.load_checkpoint(args.path, args.scheme, mapping, num_heads=args.num_heads, implementation=args.implementation)
    except (DomainError, FileFormatError, MemoryError):
        raise
    except Exception as exc:  # a file is data: whatever the reader trips on is a bad input
        raise UsageError(f"{args.path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    report = api.analyse_checkpoint(ckpt, window=args.window, lengths=lengths, tol=args.tol)
    payload = report.as_dict()
    lines = report.format_text().splitlines()
    measurement = None
    if text is not None:
        from .torch.measurement import measure_checkpoint

        measure_lengths = tuple(report.lengths)
        if lengths is None:
            # no --lengths: the analysis' lengths a CPU run can afford (at most MEASURE_DEFAULT_MAX), else 256 and 1024; said
            layers = max(h.layer for h in ckpt.heads) + 1

            def fits(n):  # the attention maps measure_attention holds (4 samples, attention and content, float32)
                return 2 * 4 * layers * 4 * ckpt.num_heads * n * n <= limits.current().max_bytes

            affordable = tuple(n for n in report.lengths if n <= MEASURE_DEFAULT_MAX and fits(n))
            if ckpt.training_length is None or not affordable:
                affordable = tuple(n for n in (256, 1024) if n > report.window and fits(n)) or (report.lengths[0],)
            if affordable != measure_lengths:
                why = "no training length found" if ckpt.training_length is None else f"the analysis' lengths exceed {MEASURE_DEFAULT_MAX}"
                lines.append(f"--measure: {why} and no --lengths: measured at {', '.join(map(str, affordable))}")
            measure_lengths = affordable
        try:
            measurement = measure_checkpoint(args.path, text, lengths=measure_lengths, window=report.window, checkpoint=ckpt,
                                             tol=args.measure_tol)
        except DomainError as exc:
            raise UsageError(f"--measure: {exc} (give a longer --text or shorter --lengths)") from None
        payload["measurement"] = measurement.as_dict()
        lines += ["", *measurement.format_text().splitlines()]
        if measurement.failed:
            args.exit_status = EXIT_PREDICTION_FAILED  # the output is printed in full, then the status says FAILED
    if args.plot is not None:
        figures = {"parameters.png": _figure_of(report.plot())}
        if measurement is not None:
            from .torch.measurement import plot_measurement

            for stack, layer in sorted({(r["stack"], r["layer"]) for r in measurement.rows}):
                name = f"measured_{stack + '_' if stack else ''}layer{layer}.png"
                figures[name] = _figure_of(plot_measurement(measurement, layer, stack=stack))
        try:
            paths = _save_figures(figures, args.plot, args.force)
        finally:
            _close(figures.values())
        payload["plots"] = paths
        lines += [f"plot written to {p}" for p in paths]
    return payload, lines


def _reference_config(path: Path) -> dict:
    """The JSON config beside a reference-model checkpoint, read with a size cap and checked."""
    cfg_path = Path(path).with_suffix(".json")
    if not cfg_path.exists():
        raise UsageError(f"checkpoints: {path}: not a reference-model checkpoint (no JSON config {cfg_path.name} beside it)")
    try:
        raw = limits.read_bytes(cfg_path, "config", limit=limits.current().max_json_bytes)
    except DomainError as exc:
        raise UsageError(f"checkpoints: config {cfg_path}: must be {exc.domain}") from None

    def refuse(token):
        raise ValueError(f"{token} is not JSON")

    try:
        cfg = json.loads(raw.decode("utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(f"checkpoints: config {cfg_path}: not JSON in UTF-8 ({exc})") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"checkpoints: config {cfg_path}: not a JSON object")
    for key in ("n_heads", "n_layers", "train_length", "d_model"):
        value = cfg.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limits.current().max_items:
            raise UsageError(f"checkpoints: config {cfg_path}: {key} = {str(value)[:40]!r} is not a count in [1, {limits.current().max_items}]")
    if cfg.get("scheme") != "log-distance":
        raise UsageError(f"checkpoints: {path}: the intervention acts on the log-distance bias (this model's scheme is {str(cfg.get('scheme'))[:40]!r})")
    return cfg


def _cmd_intervene(args):
    limits.check_count(len(args.shifts), "shifts", f"{len(args.shifts)} values")
    limits.check_count(len(args.checkpoints), "checkpoints", len(args.checkpoints))
    configs = []
    T = args.eval_length
    for path in args.checkpoints:
        _input_path(path, "checkpoints")
        cfg = _reference_config(path)
        if T <= cfg["train_length"]:
            raise UsageError(f"--eval-length: {T} must exceed the training length {cfg['train_length']} of {path}")
        need = INTERVENE_TENSORS * INTERVENE_BATCH * cfg["n_heads"] * T * T * 4
        limits.check_allocation(need, "eval_length", T)
        configs.append(cfg)
    cap = limits.current().max_read_bytes
    if args.max_bytes > cap:
        raise UsageError(f"--max-bytes: {args.max_bytes} is above the cap on bytes read, {cap} (OTPRIOR_MAX_READ_BYTES)")
    available = args.max_bytes
    if args.data:
        limits.check_count(len(args.data), "data", len(args.data))
        total = sum(limits.regular_file(p, "data", limit=cap).st_size for p in args.data)
        if total < 10_000:
            raise UsageError(f"--data: the files hold {total} bytes; the corpus needs at least 10000")
        available = min(total, args.max_bytes)
    held_out = available - int(available * 0.9)
    if held_out < T + 2:
        raise UsageError(f"--eval-length: {T} needs {T + 2} held-out bytes; the data gives {held_out} (the last tenth of --max-bytes)")
    api = _torch_api("intervene")
    data = api.byte_corpus([str(p) for p in args.data] if args.data else None, max_bytes=args.max_bytes)[1]
    results = []
    for path in args.checkpoints:
        args._context = str(path)
        try:
            model = api.load_model(path)
        except (DomainError, FileFormatError, MemoryError):
            raise
        except Exception as exc:  # a file is data: whatever the reader trips on is a bad input
            raise UsageError(f"{path}: not a readable reference-model checkpoint ({type(exc).__name__}: {exc})") from None
        rows = api.intervene(model, data, eval_length=T, shifts=tuple(args.shifts), batches=args.batches)
        results.append({"checkpoint": str(path), "train_length": model.cfg.train_length, "rows": rows})
    agree = sum(r["agree"] for res in results for r in res["rows"])
    total = sum(len(res["rows"]) for res in results)
    lines = []
    for res in results:
        lines.append(f"{res['checkpoint']} (trained at {res['train_length']}, evaluated at {T}):")
        for r in res["rows"]:
            low, high = r["interval"]
            lines.append(
                f"  shift {r['shift']:+.2f}: prior mass beyond L {r['prior_far_mass_before']:.4f} -> {r['prior_far_mass_after']:.4f}, "
                f"predicted loss direction {r['predicted_loss_direction']:+d}; loss change {r['loss_change']:+.5f} "
                f"[{low:+.5f}, {high:+.5f}] ({r['level']:.0%} bootstrap over {r['sequences']} sequences): {r['verdict']}"
            )
    lines.append(f"in the predicted direction (interval excludes zero): {agree} of {total}")
    return {"results": results, "agree": agree, "total": total}, lines


# --- the parser -----------------------------------------------------------------------------------
#
# Each subcommand is a function ``_cmd_NAME(args) -> (payload, lines)`` (the library computes;
# ``payload`` is printed as JSON with --json, ``lines`` as text otherwise) and a function
# ``_add_NAME(command)`` that declares its flags; ``_COMMANDS`` lists them in the order of
# ``otprior --help``. A new subcommand is one entry there and its two functions (and a valid
# command line in the baselines of tests/test_adversarial_cli.py, which fuzzes its flags).

_JSON_HELP = 'strict JSON output (non-finite numbers as the strings "Infinity", "-Infinity", "NaN")'
_LENGTH = _int_type(1, MAX_LENGTH)
# `otprior mass`: every length up to the double 1e300 as an exact integer (the library answers them all)
_ANY_LENGTH = _int_type(1, int(1e300))


def _add_margin(command):
    p = command("margin", _cmd_margin, help="smallest exponent margin keeping distant-mass growth within tol (Theorem 9)",
                description="Smallest delta >= 0 such that every log-distance exponent alpha >= 1 + delta keeps the "
                "growth of distant mass D_L(W) between the two lengths within tol.")
    p.add_argument("--window", type=_LENGTH, required=True, help="window W: the W nearest keys (d < W)")
    p.add_argument("--lengths", type=_LENGTH, nargs=2, required=True, metavar=("L0", "L1"), help="the two context lengths, L0 < L1")
    p.add_argument("--tol", type=_domain_type(TOL, cost=MARGIN_COST["tol"]), required=True,
                   help=f"allowed growth of distant mass, in {TOL} (command line: {MARGIN_COST['tol']})")
    p.add_argument("--growth", choices=["absolute", "relative"], default="absolute", help="D_L1 - D_L0 (default) or D_L1/D_L0 - 1")
    p.add_argument("--score-bound", type=_real_type(0.0, 100.0), default=0.0, help="bound B in [0, 100] on content scores around a constant (Theorem 10)")
    p.add_argument("--offset", type=_domain_type(OFFSET, cost=MARGIN_COST["offset"]), default=1.0,
                   help=f"offset o in {OFFSET} of the bias -alpha log(d + o) (command line: {MARGIN_COST['offset']})")
    p.add_argument("--json", action="store_true", help=_JSON_HELP)


def _encoding_commands(command, name, func, help, description, add_common):
    """A subcommand with one sub-parser per registered encoding (its own flags, then ``add_common``)."""
    p = command(name, None, help=help, description=description,
                epilog=f"Each encoding's own flags: otprior {name} ENCODING --help. Every encoding also takes --json: {_JSON_HELP}.")
    encodings = p.add_subparsers(dest="encoding", required=True, parser_class=_Parser, metavar="ENCODING", title="encodings")
    from . import encodings as E

    for enc in encoding_names():
        doc = _plain((E.lookup(enc).__doc__ or enc).strip().split("\n")[0])
        e = encodings.add_parser(enc, help=doc, description=f"otprior {name} {enc}: {doc}")
        e.set_defaults(func=func, _spec=e)
        _add_encoding_flags(e, enc)
        add_common(e, enc)
    return p


def _add_structure_flags(parser) -> None:
    """The attention structure (``otprior.structures``) as flags; several combine on one row."""
    g = parser.add_argument_group("structure", "which keys the query sees and what joins its softmax (default: full causal)")
    g.add_argument("--sliding-window", type=_LENGTH, default=None, metavar="WIDTH", help="keep the WIDTH nearest keys (Theorem S1)")
    g.add_argument("--chunk", type=_LENGTH, default=None, metavar="SIZE", help="chunked attention of SIZE positions (Theorem S2)")
    g.add_argument("--sink", type=_real_type(-1e4, 1e4), nargs="+", default=None, metavar="S",
                   help="sink logit joining the denominator only, one or one per head (Theorem S3)")
    g.add_argument("--softcap", type=_real_type(0.0, 1e6, low_open=True), default=None, metavar="C", help="logits c tanh(z / c) (Theorem S4)")
    g.add_argument("--global-block", type=_LENGTH, default=None, metavar="K", help="one summary token per K tokens (Theorem S5)")
    g.add_argument("--absolute-positions", type=_LENGTH, default=None, metavar="P", help="learned absolute positions, table of P (Theorem S6)")


def build_structure(args):
    """The structure the flags describe (``None``: full causal)."""
    from . import structures as S

    parts = []
    if getattr(args, "sliding_window", None) is not None:
        parts.append(S.SlidingWindow(args.sliding_window))
    if getattr(args, "chunk", None) is not None:
        parts.append(S.Chunked(args.chunk))
    if getattr(args, "sink", None) is not None:
        parts.append(S.AttentionSink(args.sink[0] if len(args.sink) == 1 else tuple(args.sink)))
    if getattr(args, "softcap", None) is not None:
        parts.append(S.SoftCap(args.softcap))
    if getattr(args, "global_block", None) is not None:
        parts.append(S.GlobalTokens(args.global_block))
    if getattr(args, "absolute_positions", None) is not None:
        parts.append(S.AbsolutePositions(args.absolute_positions))
    return S.compose(*parts) if parts else None


def _add_classify(command):
    def common(e, enc):
        _add_normaliser_flags(e)
        _add_structure_flags(e)
        g = e.add_argument_group("classification")
        # the content bound is the encoding's own --logit-bound: one flag for one quantity
        _add_renamed(e, {"--score-bound": "--logit-bound"}, "the content bound B is the encoding's parameter")
        g.add_argument("--window", type=_LENGTH, default=64, help="window W for D_oo(W) (default 64)")
        g.add_argument("--json", action="store_true", help=_JSON_HELP)

    _encoding_commands(command, "classify", _cmd_classify, "bounded, diluting or content-dependent? (Theorem 11; normalisers: proofs/normalisers.md)",
                       "Classify a positional encoding, with a normaliser (default softmax), as bounded (distant attention mass "
                       "stays away from one), diluting (it tends to one) or content-dependent, with the reason, the rate and "
                       "D_oo(W); one verdict per head for a multi-head encoding.", common)


def _add_mass(command):
    def common(e, enc):
        g = e.add_argument_group("masses")
        g.add_argument("--window", type=_ANY_LENGTH, required=True, help="window W")
        g.add_argument("--n", type=_ANY_LENGTH, nargs="+", required=True, help="context lengths n >= W (1e12 and up to 1e300 accepted)")
        if enc == "log-distance":
            g.add_argument("--dps", type=_int_type(1, 10_000), help="also print the window mass to this many digits (mpmath)")
        g.add_argument("--json", action="store_true", help=_JSON_HELP)

    _encoding_commands(command, "mass", _cmd_mass, "window and distant mass of an encoding at given lengths (log-distance: certified bounds, Theorems 7, 8)",
                       "Window mass m_n(W) and distant mass D_n(W) = 1 - m_n(W) of the constant-content prior of an encoding "
                       f"(default {DEFAULT_MASS_ENCODING}, the first argument otherwise), at each length n; one row per head "
                       "and length for a multi-head encoding (per-head values as comma-separated lists, or alibi's --heads). "
                       "For log-distance, certified bounds and digits on demand.", common)


def _add_prior(command):
    q = command("prior", _cmd_prior, help="constant-score prior of causal OT attention and its window masses (Theorems 2, 4)",
                description="The prior pi_n(d) of causal optimal-transport attention with balancing strength rho when every "
                "content score is equal (Theorem 2), for a query with n keys: its normaliser c and error bound, and the "
                "exact window mass m_n(W) of the W nearest keys beside the window law H_W (Z_q/n)^(1-rho) (Theorem 4) "
                "for W = 1, 4, 16, 64, 256, 1024 (those up to n); --full prints pi_n(d) at every distance, --plot draws it.")
    q.add_argument("--rho", type=_real_type(0.0, 1.0, high_open=True), required=True, help="balancing strength rho in [0, 1) (0 = causal softmax)")
    q.add_argument("--n", type=_LENGTH, required=True, help=f"query position (context length) n >= 1 (memory about {PRIOR_BYTES_PER_ENTRY} n bytes)")
    q.add_argument("--full", action="store_true", help="also print pi_n(d) for every distance d = 0 .. n-1")
    q.add_argument("--plot", type=_path_type, help="also draw the prior into this new image file (.png, .pdf, .svg, ...)")
    q.add_argument("--force", action="store_true", help="replace the --plot file if it exists")
    q.add_argument("--json", action="store_true", help=_JSON_HELP)


def _add_report(command):
    r = command("report", _cmd_report, help="the main job: tables and figures on built-in defaults",
                description="Compute the tables (log-distance window masses with certified brackets, margins, the "
                "classification of encodings, the dilution of causal OT attention, the limits in rho) and draw the "
                "figures, on built-in defaults, into one folder: index.html to read, tables.json and parameters.json "
                "(versions, commit, every parameter) to reuse, and each figure as PNG and PDF; tens of seconds.")
    r.add_argument("--out", type=_path_type, default=Path("report"), help="output folder, new or empty (default: report); index.html goes there")
    r.add_argument("--force", action="store_true", help="write into an existing folder that holds files (files of the report's names are replaced)")
    r.add_argument("--json", action="store_true", help=_JSON_HELP)


def _add_checkpoint(command):
    k = command("checkpoint", _cmd_checkpoint, help="per-head positional parameters of a checkpoint against the theory (torch extra)",
                description="Read the positional parameters of a checkpoint (a model folder: config.json with safetensors, "
                "sharded or not, or pytorch_model.bin; a single .safetensors/.pt/.pth/.bin/.ckpt file; a per-layer "
                "pipeline folder) and give per layer and head the verdict, the parameter that decides it, its distance "
                "to the boundary and the predicted distant masses; with --measure, the running model's masses beside "
                "them. The scheme and the lengths come from the config and the tensors; flags override.")
    k.add_argument("path", type=_path_type, help="a model folder or a checkpoint file")
    k.add_argument("--scheme", type=_name_type(), help="confirm the positional scheme (an encoding name; refused when the tensors or config contradict it)")
    k.add_argument("--num-heads", type=_int_type(1, MAX_LENGTH), help="head count where no tensor stores one per head (ALiBi with implied slopes)")
    k.add_argument("--mapping", type=_mapping_type, nargs="+", metavar="TENSOR=ROLE",
                   help="tensor names (or patterns) and their roles, for layouts the names do not reveal (shape-checked; needs --scheme)")
    k.add_argument("--window", type=_LENGTH, help="window W (default min(64, L0/2))")
    k.add_argument("--lengths", type=_int_type(2, MAX_LENGTH), nargs="+", metavar="L",
                   help="2 to 64 increasing context lengths (default: the training length found and 8 times it)")
    k.add_argument("--tol", type=_domain_type(TOL, cost=MARGIN_COST["tol"]), default=0.05,
                   help=f"growth tolerance for the margin (power-law schemes), in {TOL} (command line: {MARGIN_COST['tol']}; default 0.05)")
    k.add_argument("--implementation", choices=("transformers", "original"), default="transformers",
                   help="whose code to model where they differ: transformers' class (default) or the family's original (MPT)")
    k.add_argument("--measure", action="store_true", help="also run the model on --text and measure each head's masses (reference model or transformers folder)")
    k.add_argument("--measure-tol", type=_real_type(1e-12, 1.0, high_open=True), default=1e-4,
                   help="largest |model's positional part - prediction| accepted by --measure (the positional part runs in float32); "
                   "above it the prediction FAILED and the exit status is 3")
    k.add_argument("--text", type=_path_type, help="text file the model reads with --measure (bytes, within the read cap)")
    k.add_argument("--plot", type=_path_type, help="write figures into this new or empty folder")
    k.add_argument("--force", action="store_true", help="write figures into an existing folder that holds files")
    k.add_argument("--json", action="store_true", help=_JSON_HELP)


def _add_intervene(command):
    v = command("intervene", _cmd_intervene, help="change only the bias beyond the training length; predicted vs measured loss (torch extra)",
                description="For reference-model checkpoints with the log-distance bias: set every head's exponent beyond "
                "the training length to alpha + shift, predict from the prior whether long-context loss rises or falls, "
                "measure it, and report the agreement.")
    v.add_argument("checkpoints", type=_path_type, nargs="+", help="reference-model .safetensors files (JSON config beside them)")
    v.add_argument("--eval-length", type=_int_type(2, MAX_LENGTH), required=True,
                   help=f"evaluation length, beyond the training length (memory about {INTERVENE_TENSORS * INTERVENE_BATCH * 4} H T^2 bytes)")
    v.add_argument("--shifts", type=_real_type(-100.0, 100.0), nargs="+", default=[-0.5, 0.5], help="exponent changes beyond the training length, in [-100, 100]")
    v.add_argument("--data", type=_path_type, nargs="+", help="text files to evaluate on (default: the Python standard library)")
    v.add_argument("--max-bytes", type=_int_type(10_000, MAX_LENGTH), default=2_000_000, help="bytes of data to read (at least 10000)")
    v.add_argument("--batches", type=_int_type(1, 1_000_000), default=8, help="evaluation batches of 8 sequences")
    v.add_argument("--json", action="store_true", help=_JSON_HELP)


def _cmd_study(args):
    from . import study

    _input_path(args.plan, "plan")
    kw = {"resume": not args.fresh, "dry_run": args.dry_run, "max_runs": args.max_runs, "time_budget_s": args.budget,
          "spread": args.spread, "time_steps": args.time_steps}
    out = None if args.out is None else str(args.out)
    if args.out is not None:  # a dry run checks the folder too (check_folder creates nothing)
        out = str(check_folder(args.out, force=True, name="out"))
    result = study.run_study(str(args.plan), out, log=(lambda *_: None) if args.json else _progress_line, **kw)
    if args.spread and os.environ.get("RANK", "0") not in ("", "0"):
        return result, []  # under torchrun, process 0 prints the summary
    lines = [f"plan {result['plan_sha256'][:12]}: {result['runs']} runs"]
    if args.dry_run:
        mem = result.get("memory", {})
        lines.append(f"dry run: nothing trained; memory estimate {mem}")
        lines.append(f"data: {result['data_bytes_available']} bytes in {result['data_files']} files; optimiser reach "
                     f"{result['optimiser_reach']:.3g} (move of one raw parameter at steps of typical size)")
        est = result.get("time_estimate")
        if est:
            total = est["total_seconds"]
            lines.append(f"time estimate here ({est['threads']} thread(s) per process): {total / 3600:.2f} h in one "
                         f"process, {total / 7200:.2f} h spread over two")
        lines.append("plan as validated (every default filled in):")
        lines.append(json.dumps(result["plan"], indent=1))
        return result, lines
    lines.append(f"done: {result['done']} of {result['runs']}")
    for d in result.get("decisions", []):
        interval = d.get("interval")
        shown = "" if not interval else f" [{interval[0]:+.4g}, {interval[1]:+.4g}]"
        lines.append(f"  {d['id']}: {d['outcome']}{shown}  {d['claim']}")
    return result, lines


def _progress_line(*parts):
    write_stderr_line(_printable(" ".join(str(p) for p in parts)))


def _add_study(command):
    s = command("study", _cmd_study, help="run a preregistered study plan and decide its hypotheses (torch extra)",
                description="Run every training and evaluation a plan file states, write results after each run "
                "(with the plan's SHA-256), resume where a previous call stopped, and decide each hypothesis by its "
                "preregistered rule: supported / not supported / not run, with its interval.")
    s.add_argument("plan", type=_path_type, help="the plan file (.toml or .json), e.g. plans/cpu-130k.toml")
    s.add_argument("--out", type=_path_type, help="results folder (default study-<plan name>); an existing one is resumed")
    s.add_argument("--fresh", action="store_true", help="refuse a results folder that already holds runs instead of resuming")
    s.add_argument("--dry-run", action="store_true", help="validate the plan and list its runs; train nothing")
    s.add_argument("--max-runs", type=_int_type(1, 1_000_000), help="stop after this many new runs")
    s.add_argument("--budget", type=_real_type(1.0, 1e7), help="start no new run after this many seconds; a run in progress "
                   "stops at its next state save (rerun the same command to resume)")
    s.add_argument("--time-steps", type=_int_type(1, 1000), help="with --dry-run: time this many training steps of "
                   "every arm and length here and extrapolate the study's time")
    s.add_argument("--spread", action="store_true", help="under torchrun: deal whole runs out to the processes instead of "
                   "data-parallel training (e.g. torchrun --standalone --nproc_per_node 2 -m otprior study PLAN --spread)")
    s.add_argument("--json", action="store_true", help=_JSON_HELP)


_COMMANDS = (_add_margin, _add_classify, _add_prior, _add_mass, _add_report, _add_checkpoint, _add_intervene, _add_study)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="otprior",
        description="Positional priors of causal attention: dilution, certified window-mass bounds, margins. "
        "Every result is stated in proofs/ with its status. Bad input: one line on stderr, exit status 2.",
    )
    parser.add_argument("--version", action="version", version=f"otprior {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="command")

    def command(name, func, **kw):
        p = sub.add_parser(name, **kw)
        if func is not None:
            p.set_defaults(func=func, _spec=p)
        return p

    for add in _COMMANDS:
        add(command)
    return parser


def _parser():
    # parsing leaves a parser unchanged, so one serves every call in a process while the
    # registries stay as they are (an encoding registered later gets its sub-command)
    from . import normalisers as N

    return _parser_for(tuple(encoding_names()), tuple(N.names()))


@functools.lru_cache(maxsize=1)
def _parser_for(_encodings, _normalisers):
    return build_parser()


# --- errors to flags ------------------------------------------------------------------------------

# library parameter names that a command spells differently
_ALIASES = {
    None: {"Lrange": "--lengths", "asymptotic": "--expr"},
    "classify": {"n": "--window", "num_heads": "--heads"},
    "mass": {"num_heads": "--heads"},
    "checkpoint": {"Lrange": "--lengths", "checkpoint": "path", "model": "path", "tokens": "--text", "num_heads": "--num-heads"},
    "intervene": {"paths": "--data"},
}


def _flag_of(args, parameter):
    command = getattr(args, "command", None)
    for table in (_ALIASES.get(command, {}), _ALIASES[None]):
        if parameter in table:
            return table[parameter]
    spec = getattr(args, "_spec", None)
    if spec is None:
        return None
    for action in spec._actions:
        if action.dest == parameter:
            if action.option_strings:
                return max(action.option_strings, key=len)
            return action.dest
    return None


def _message(args, exc) -> str:
    message = str(exc)
    if isinstance(exc, DomainError):
        flag = _flag_of(args, exc.parameter) if isinstance(exc.parameter, str) else None
        if flag is not None:
            return f"{flag}: {message}"
        context = getattr(args, "_context", None)
        if context:
            return f"{context}: {message}"
    return message


def _with_default_encoding(argv: list) -> list:
    """``otprior mass --window ...`` is ``otprior mass log-distance --window ...``."""
    if argv and argv[0] == "mass" and (len(argv) == 1 or (argv[1].startswith("-") and argv[1] not in ("-h", "--help"))):
        return ["mass", DEFAULT_MASS_ENCODING, *argv[1:]]
    return argv


#: options whose value is an expression and may start with '-' (``--expr -log(d+1)``)
_EXPRESSION_OPTIONS = ("--expr",)


def _join_expression_values(argv: list) -> list:
    """``--expr -log(d+1)`` as ``--expr=-log(d+1)``: argparse would take a value starting with '-' for an option."""
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            out.extend(argv[i:])
            break
        if token in _EXPRESSION_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-") and argv[i + 1] not in ("-h", "--help"):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _unrecognized(args, extra) -> str:
    spec = getattr(args, "_spec", None)
    hint = _did_you_mean(extra, spec._option_string_actions if spec is not None else ())
    if hint is not None:
        return hint
    flags = [x.split("=", 1)[0] for x in extra if x.startswith("--")]
    encoding = getattr(args, "encoding", None)
    if encoding is not None and flags:
        own = " ".join(_flag(p.name) for p in encoding_parameters(encoding)) or "none"
        return f"{encoding} does not take {', '.join(dict.fromkeys(flags))} (its parameters: {own}; all its flags: otprior {args.command} {encoding} --help)"
    return f"unrecognized arguments: {' '.join(extra)}"


def _silence_stdout():
    silence("stdout")


#: Exit status of ``checkpoint --measure`` when the model's own positional attention contradicts the
#: prediction (``"prediction": "FAILED"``); the report is printed in full first.
EXIT_PREDICTION_FAILED = 3

#: Exit status when standard output is closed or cannot be written (``>&-``, ``> /dev/full``).
EXIT_OUTPUT_FAILED = 2


def main(argv=None) -> int:
    """Run the command; return its exit status (0, 2 for bad input or an output that cannot be written,
    1 for a defect, 3 for a FAILED ``checkpoint --measure`` prediction, 141 on a closed pipe)."""
    args = None
    try:
        argv = _join_expression_values(_with_default_encoding(list(sys.argv[1:] if argv is None else argv)))
        try:
            args, extra = _parser().parse_known_args(argv)
        except SystemExit as exc:  # --help, --version (0) and argparse's one-line errors (2)
            return exc.code if isinstance(exc.code, int) else 2
        if extra:
            raise UsageError(_unrecognized(args, extra))
        with guarded_stderr():  # progress lines and warnings on a closed or full stderr are dropped, not raised
            payload, lines = args.func(args)
        _emit(payload, lines, args.json)
        return getattr(args, "exit_status", 0)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OutputError as exc:
        _silence_stdout()
        _write_error(str(exc))
        return EXIT_OUTPUT_FAILED
    except KeyboardInterrupt:
        return 130
    except (DomainError, UsageError, PrecisionError, ConvergenceError, FileFormatError) as exc:
        _write_error(_message(args, exc))
        return 2
    except MemoryError:
        _write_error("out of memory: an allocation escaped the caps of otprior.limits (please report it)")
        return 1
    except Exception as exc:
        if os.environ.get("OTPRIOR_DEBUG"):
            raise
        write_stderr_line(f"otprior: internal error: {_one_line(f'{type(exc).__name__}: {exc}')} (OTPRIOR_DEBUG=1 shows the traceback)")
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
