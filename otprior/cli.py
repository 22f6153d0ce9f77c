"""The ``otprior`` command.

Subcommands: ``margin``, ``classify``, ``prior``, ``mass``, ``report`` (the main job),
``checkpoint`` and ``intervene`` (the last two with the torch extra). ``otprior --version``
prints the version; ``python -m otprior`` is the same command.

The library computes and returns data; this module parses, validates and prints.

Errors
    Every input is validated before any work: the type and domain of each flag when it is
    parsed, then the combinations, the files and the memory an input would need
    (:mod:`otprior.limits`). A bad input ends the command with exit status 2 and one line
    on stderr, ``otprior: error: --flag: ...``, naming the flag as the command spells it.
    An error the library raises (:class:`~otprior.DomainError` and the package's other
    named errors) is mapped to the flag that carried the value. Anything else is a defect
    of otprior: one line, exit status 1 (``OTPRIOR_DEBUG=1`` shows the traceback).
    When the reader of the output goes away (``otprior ... | head -1``) the command stops
    quietly with status 141, as a process ended by SIGPIPE.

JSON
    ``--json`` prints strict JSON (RFC 8259): the non-finite numbers that IEEE doubles
    can hold are written as the strings ``"Infinity"``, ``"-Infinity"`` and ``"NaN"``,
    never as the bare tokens Python's ``json`` module would write.

Files
    Output goes into a new file or folder; an existing file (``prior --plot``) or a folder
    that holds files (``report --out``, ``checkpoint --plot``) is written into only with
    ``--force``, and nothing is written outside the folder (:mod:`otprior._output`). Input
    files must be regular files (no FIFOs, devices or sockets) within the read caps.

Expressions
    ``--expr`` is tokenised and parsed against a grammar of numbers, ``d``, ``+ - * / ^``,
    parentheses and the functions log, exp, sqrt, sin, cos, abs, min, max, with limits on
    length, depth, node count and exponents; towers of powers are refused. Only text that
    passes is handed to :class:`otprior.encodings.Bias`.

Resource caps
    Lengths, counts, files and the memory they imply are checked against the caps of
    :class:`otprior.limits.Caps` (default: 2 GiB per allocation, 256 MiB per input file,
    1 MiB per JSON config, a million repeated items). Raise them with the environment
    variables ``OTPRIOR_MAX_BYTES``, ``OTPRIOR_MAX_READ_BYTES``,
    ``OTPRIOR_MAX_CONFIG_BYTES`` and ``OTPRIOR_MAX_ITEMS``.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import json
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from . import limits
from ._output import check_folder, check_new_file, staged_folder, write_file_safely
from ._validation import ConvergenceError, DomainError, FileFormatError, PrecisionError

__all__ = ["main", "build_parser", "build_encoding", "UsageError", "Parameter", "encoding_parameters", "to_strict_json"]

#: Largest length the command line accepts (the library's log-distance routines hold to 1e18).
MAX_LENGTH = 10**18
#: Largest magnitude of a real-valued flag (beyond it no routine of the library is checked).
MAX_MAGNITUDE = 1e6
#: Smallest growth tolerance of ``margin``: below it the growth of distant mass is under
#: the resolution of double precision around the margin.
MIN_TOL = 1e-12
#: Bytes per entry that :func:`otprior.ot_prior` holds at once, with a margin: the Anderson
#: solver keeps 2 x 8 history rows of n doubles besides its iterate, image, residual and
#: output, and the block cumulative sums a few more (``prior`` measured 215 n bytes of
#: peak resident memory at n = 1e6 and 3e6).
PRIOR_BYTES_PER_ENTRY = 8 * 40
#: Bytes per unit of an integer encoding parameter (T5 builds tables of 4 max_distance
#: distances, and a few float arrays of that size while bucketing them).
TABLE_BYTES_PER_UNIT = 256
#: Sequences per evaluation batch of the intervention, and the float32 tensors of shape
#: (batch, heads, T, T) an attention layer holds at once (content, scores, masked scores,
#: attention weights, and the bias and mask of shape (heads, T, T)): ``intervene``
#: measured 4.8 such tensors of peak resident memory at T = 512 and 1024 on the CPU.
INTERVENE_BATCH = 8
INTERVENE_TENSORS = 6
#: Exit status when stdout is closed early (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, status 2
        _write_error(message[len("argument ") :] if message.startswith("argument ") else message)
        raise SystemExit(2)


class UsageError(Exception):
    """A bad input found by the command line itself (its message names the flag)."""


# --- output ---------------------------------------------------------------------------------------

_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def to_strict_json(value):
    """``value`` as plain JSON data: dicts, lists, strings, finite numbers, booleans, null.

    Non-finite floats become the strings ``"Infinity"``, ``"-Infinity"``, ``"NaN"``;
    numpy scalars and arrays, mpmath numbers, paths and objects with ``as_dict`` are
    converted; anything else becomes its ``str``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return _NONFINITE.get(value, value)
    if isinstance(value, dict):
        return {str(k): to_strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_strict_json(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "as_dict"):
        return to_strict_json(value.as_dict())
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return to_strict_json(value.tolist())
    if type(value).__module__.startswith("mpmath"):
        try:
            return to_strict_json(float(value))
        except (TypeError, ValueError):
            return str(value)
    if hasattr(value, "__float__") and not isinstance(value, complex):
        try:
            return to_strict_json(float(value))
        except (TypeError, ValueError, OverflowError):
            return str(value)
    return str(value)


def _printable(text: str) -> str:
    # file names may hold bytes that are not UTF-8 (surrogate escapes): show them escaped
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _one_line(message: str, limit: int = 2000) -> str:
    line = _printable(" ".join(str(message).split()))
    if len(line) > limit:
        line = line[: limit // 2] + " ... " + line[-limit // 2 :]
    return line


def _write_error(message: str) -> None:
    sys.stderr.write(f"otprior: error: {_one_line(message)}\n")
    sys.stderr.flush()


def _emit(payload, lines, as_json):
    if as_json:
        text = json.dumps(to_strict_json(payload), indent=2, allow_nan=False)
    else:
        text = "\n".join(_printable(str(line)) for line in lines)
    _write_out(text + "\n")


def _write_out(text: str) -> None:
    """Write all of ``text`` to stdout; a closed pipe raises ``BrokenPipeError``.

    With an unbuffered stdout (``PYTHONUNBUFFERED``, ``python -u``) Python's text layer
    drops what a partial write to a pipe leaves over, so the bytes are written in a loop.
    """
    stream = sys.stdout
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

# Bias expressions: the command line lets through only a grammar of numbers, the distance d,
# + - * / ** ^, parentheses and named functions; the text is tokenised and parsed (Python's
# ast, which parses without evaluating) before the library sees it.
_EXPR_MAX_LENGTH = 1000
_EXPR_MAX_DEPTH = 40
_EXPR_MAX_NODES = 400
_EXPR_MAX_EXPONENT = 1000.0
_EXPR_FUNCTIONS = {"log": "log", "exp": "exp", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "abs": "Abs", "Abs": "Abs",
                   "min": "Min", "max": "Max", "Min": "Min", "Max": "Max"}
_EXPR_CONSTANTS = {"d": "d", "pi": "pi", "E": "E"}
_EXPR_TOKEN = re.compile(r"\s+|(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z]+)|(?P<op>\*\*|[-+*/^(),])")


def _expression(text):
    text = _text_of(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty expression")
    if len(text) > _EXPR_MAX_LENGTH:
        raise argparse.ArgumentTypeError(f"an expression of {len(text)} characters (at most {_EXPR_MAX_LENGTH})")
    out, pos = [], 0
    while pos < len(text):
        m = _EXPR_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise argparse.ArgumentTypeError(
                f"character {text[pos]!r} at position {pos} is not allowed: use numbers, d, + - * / ^ ( ) and "
                f"{', '.join(sorted(set(_EXPR_FUNCTIONS.values())))}"
            )
        if m.group("name"):
            name = m.group("name")
            if name not in _EXPR_FUNCTIONS and name not in _EXPR_CONSTANTS:
                raise argparse.ArgumentTypeError(
                    f"name {name!r} is not allowed: the distance is d; functions are {', '.join(sorted(_EXPR_FUNCTIONS))}"
                )
            out.append(_EXPR_FUNCTIONS.get(name) or _EXPR_CONSTANTS[name])
        elif m.group("num") or m.group("op"):
            out.append("**" if m.group(0) == "^" else m.group(0))
        pos = m.end()
    normal = " ".join(out)
    try:
        tree = ast.parse(normal, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not an expression in d") from None
    _check_expression_tree(tree.body, text)
    return normal


def _check_expression_tree(root, text):
    """Walk the parsed tree: only the grammar's nodes, bounded size, no power inside a power.

    A power nested in the base or the exponent of another (``(9**1000)**1000``,
    ``d**d**d``) is refused, since sympy evaluates constant powers eagerly and towers grow
    beyond any memory; numeric exponents are at most ``_EXPR_MAX_EXPONENT`` in size.
    """
    allowed_ops = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.UAdd, ast.USub)
    count = 0
    short = repr(text[:80])

    def walk(node, depth, in_power, in_exponent):
        nonlocal count
        count += 1
        if depth > _EXPR_MAX_DEPTH or count > _EXPR_MAX_NODES:
            raise argparse.ArgumentTypeError(f"expression too large (depth at most {_EXPR_MAX_DEPTH}, at most {_EXPR_MAX_NODES} nodes)")
        if isinstance(node, ast.Constant):
            value = node.value
            if not isinstance(value, (int, float)) or isinstance(value, bool) or abs(value) > 1e300 or value != value:
                raise argparse.ArgumentTypeError(f"{short}: numbers must be finite and at most 1e300 in size")
            if in_exponent and abs(value) > _EXPR_MAX_EXPONENT:
                raise argparse.ArgumentTypeError(f"{short}: exponents are at most {_EXPR_MAX_EXPONENT:g} in size")
            return
        if isinstance(node, ast.Name):
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, allowed_ops):
            walk(node.operand, depth + 1, in_power, in_exponent)
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, allowed_ops):
            if isinstance(node.op, ast.Pow):
                if in_power:
                    raise argparse.ArgumentTypeError(f"{short}: a power inside a power (a tower) is not allowed")
                walk(node.left, depth + 1, True, False)
                walk(node.right, depth + 1, True, True)
            else:
                walk(node.left, depth + 1, in_power, in_exponent)
                walk(node.right, depth + 1, in_power, in_exponent)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords and node.args:
            if node.func.id not in _EXPR_FUNCTIONS.values():
                raise argparse.ArgumentTypeError(f"{short}: {node.func.id} is not a function")
            for arg in node.args:
                walk(arg, depth + 1, in_power, in_exponent)
            return
        raise argparse.ArgumentTypeError(f"{short} is not an expression in d")

    walk(root, 0, False, False)


_expression.__name__ = "expression"


# --- encodings: their parameters ------------------------------------------------------------------


@dataclass(frozen=True)
class Parameter:
    """One parameter of an encoding, as the command line exposes it (``--name``)."""

    name: str
    type: type
    default: object
    doc: str
    choices: tuple | None = None
    required: bool = False


# Flags and help texts of the encodings' constructor parameters; the parameters an encoding
# takes are read from its constructor.
_ENCODING_OPTIONS = {
    "logit_bound": (float, "bound B on |content logit - constant| (RoPE, YaRN; optional elsewhere)"),
    "scale": (float, "YaRN context scale factor s >= 1"),
    "slope": (float, "ALiBi slope m >= 0 (bias -m d)"),
    "r1": (float, "KERPLE r1 >= 0 (log: -r1 log(1 + r2 d); power: -r1 d^r2)"),
    "r2": (float, "KERPLE r2 (> 0; power variant: in (0, 2])"),
    "num_buckets": (int, "T5 number of buckets"),
    "max_distance": (int, "T5 max_distance"),
    "c": (float, "FIRE log-transform parameter c > 0"),
    "L": (float, "FIRE threshold L > 0"),
    "min_increment": (float, "CABLE smallest softplus increment epsilon >= 0"),
    "alpha": (float, "log-distance exponent alpha > 0 (bias -alpha log(d + offset))"),
    "offset": (float, "log-distance offset o > 0"),
    "rho": (float, "causal OT balancing strength rho in [0, 1)"),
    "expr": (str, "a bias b(d): numbers, d, + - * / ^, log exp sqrt sin cos abs min max; write --expr='-1.2*log(d+1)'"),
}


def _encoding_classes():
    from . import encodings as E

    return {
        cls.name: cls
        for cls in (E.NoPE, E.RoPE, E.YaRN, E.ALiBi, E.KerpleLog, E.KerplePower, E.T5Buckets, E.FIRE, E.CABLE, E.LogDistance, E.CausalOT, E.Bias)
    }


def encoding_names() -> list:
    """The names of the encodings the command line can build."""
    from . import encodings as E

    names = getattr(E, "names", None)
    return list(names()) if callable(names) else list(_encoding_classes())


def encoding_parameters(name) -> list:
    """The parameters of encoding ``name`` as :class:`Parameter` (from the registry when it has them)."""
    from . import encodings as E

    registry = getattr(E, "parameters", None)
    if callable(registry):
        return [
            Parameter(p.name, p.type, p.default, p.doc, getattr(p, "choices", None),
                      bool(getattr(p, "required", p.default is inspect.Parameter.empty)))
            for p in registry(name)
        ]
    cls = _encoding_classes()[name]
    out = []
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.name in _ENCODING_OPTIONS:
            typ, doc = _ENCODING_OPTIONS[p.name]
            out.append(Parameter(p.name, typ, p.default, doc, None, p.default is inspect.Parameter.empty))
    return out


def _all_encoding_parameters() -> dict:
    seen = {}
    for name in encoding_names():
        for p in encoding_parameters(name):
            seen.setdefault(p.name, p)
    return seen


def _flag_type(p: Parameter):
    if p.type is int:
        return _int_type(minimum=-MAX_LENGTH, maximum=MAX_LENGTH)
    if p.type is float:
        return _real_type()
    if p.name == "expr":
        return _expression
    return _name_type()


def _add_encoding_flags(parser):
    for p in _all_encoding_parameters().values():
        parser.add_argument("--" + p.name.replace("_", "-"), dest=p.name, type=_flag_type(p), default=None, choices=p.choices, help=p.doc)


def build_encoding(name, given: dict):
    """Build encoding ``name`` from the flags given (``None`` = absent); refuse others and missing ones."""
    names = encoding_names()
    if name not in names:
        raise UsageError(f"unknown encoding {name!r}; choose one of {', '.join(names)}")
    params = {p.name: p for p in encoding_parameters(name)}
    present = {k: v for k, v in given.items() if v is not None}
    extra = sorted(set(present) - set(params))
    if extra:
        raise UsageError(f"{name} does not take --{', --'.join(e.replace('_', '-') for e in extra)}")
    missing = [k for k, p in params.items() if p.required and k not in present]
    if missing:
        raise UsageError(f"{name} needs --{', --'.join(m.replace('_', '-') for m in missing)}")
    for key, value in present.items():
        if params[key].type is int:
            # integer parameters size tables (T5 buckets distances up to 4 max_distance)
            limits.check_allocation(TABLE_BYTES_PER_UNIT * abs(value), key, value)
    return _encoding_classes()[name](**present)


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


def _given_encoding_flags(args) -> dict:
    return {k: getattr(args, k) for k in _all_encoding_parameters()}


def _cmd_classify(args):
    from .encodings import classify

    enc = build_encoding(args.encoding, _given_encoding_flags(args))
    v = classify(enc)
    payload = v.as_dict(window=args.window if v.kind != "undecided" else None)
    lines = [f"{enc!r}: {v.kind.upper()}", f"reason   {v.reason}"]
    if v.rate:
        lines.append(f"rate     {v.rate}")
    if v.kind != "undecided":
        lines.append(f"D_oo(W = {args.window}) = {payload['limit_distant_mass']:.6g}")
    return payload, lines


# --- prior, mass ----------------------------------------------------------------------------------


def _plot_suffix_ok(path: Path, flag: str) -> None:
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in kinds:
        raise UsageError(f"{flag}: {str(path)!r} must end in an image suffix: {', '.join('.' + k for k in sorted(kinds))}")


def _save_figure(fig, path: Path, dpi=150) -> None:
    fmt = path.suffix[1:].lower()
    write_file_safely(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=fmt), name="plot")
    import matplotlib.pyplot as plt

    plt.close(fig)


def _cmd_prior(args):
    from .ot_prior import ot_prior, ot_window_law, ot_window_mass

    limits.check_allocation(PRIOR_BYTES_PER_ENTRY * args.n, "n", args.n)
    if args.full:
        limits.check_count(args.n, "n")
    if args.plot is not None:
        check_new_file(args.plot, force=args.force, name="plot")
        _plot_suffix_ok(args.plot, "--plot")
    prior, info = ot_prior(args.n, args.rho, return_info=True)
    windows = [w for w in (1, 4, 16, 64, 256, 1024) if w <= args.n]
    rows = [{"window": w, "mass": ot_window_mass(w, args.n, args.rho), "law": ot_window_law(w, args.n, args.rho)} for w in windows]
    payload = {"n": args.n, "rho": args.rho, "c": info.c, "log_error_bound": info.log_error_bound, "windows": rows}
    lines = [
        f"constant-score prior of causal OT attention, n = {args.n}, rho = {args.rho}",
        f"(certified log error of the scalings: {info.log_error_bound:.1e})",
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


def _per_head(name, heads, given):
    """The encodings of ``heads`` heads: ALiBi's standard slopes 2^(-8h/H) (``ALiBi.slopes``)."""
    from . import encodings as E

    limits.check_count(heads, "heads")
    if name != "alibi":
        raise UsageError(f"--heads: only alibi defines parameters per head (its standard slopes); {name} takes them from its flags")
    if given.get("slope") is not None:
        raise UsageError("--heads: the heads' slopes are ALiBi's standard ones; leave out --slope")
    rest = {k: v for k, v in given.items() if k != "slope"}
    return [build_encoding(name, {**rest, "slope": s}) for s in E.ALiBi.slopes(heads)]


def _cmd_mass(args):
    from . import log_distance as ld

    name = args.encoding
    given = _given_encoding_flags(args)
    lengths = list(args.n)
    if args.heads is not None:
        limits.check_count(args.heads, "heads")
    limits.check_count(len(lengths) * (args.heads or 1), "n", f"{len(lengths)} lengths")
    if args.dps is not None and name != "log-distance":
        raise UsageError(f"--dps: digits on demand exist for log-distance only, not {name}")
    encs = _per_head(name, args.heads, given) if args.heads is not None else [build_encoding(name, given)]
    if name == "causal-ot":
        limits.check_allocation(PRIOR_BYTES_PER_ENTRY * max(lengths), "n", max(lengths))
    rows, lines = [], [f"{encs[0]!r}{f' and {len(encs) - 1} more heads' if len(encs) > 1 else ''}, window W = {args.window}"]
    for head, enc in enumerate(encs):
        for n in lengths:
            row = {"n": n, "parameters": repr(enc)}
            if args.heads is not None:
                row["head"] = head
            if name == "log-distance":
                a, o = enc.alpha, enc.offset
                row["window_mass"] = ld.window_mass(args.window, n, a, offset=o)
                row["distant_mass"] = ld.distant_mass(args.window, n, a, offset=o)
                row["window_mass_bounds"] = list(ld.window_mass_bounds(args.window, n, a, offset=o))
                if args.dps is not None:
                    import mpmath

                    row["window_mass_digits"] = mpmath.nstr(ld.window_mass(args.window, n, a, offset=o, dps=args.dps), args.dps)
            else:
                D = enc.distant_mass(args.window, n)
                row["distant_mass"] = D
                row["window_mass"] = 1.0 - D
            if enc.score_bound:
                row["distant_mass_range"] = list(enc.distant_mass_range(args.window, n))
            rows.append(row)
            text = f"{'head ' + str(head) + '  ' if args.heads is not None else ''}n = {n:<8} window mass {row['window_mass']:.16g}   distant mass {row['distant_mass']:.16g}"
            if "window_mass_bounds" in row:
                lo, hi = row["window_mass_bounds"]
                text += f"\n{'':8}certified {lo:.16g} <= m <= {hi:.16g}"
            if "window_mass_digits" in row:
                text += f"\n{'':8}{args.dps} digits  m = {row['window_mass_digits']}"
            if "distant_mass_range" in row:
                text += f"\n{'':8}content within +-{enc.score_bound:g}: {row['distant_mass_range'][0]:.6g} <= D <= {row['distant_mass_range'][1]:.6g}"
            lines.append(text)
    payload = {"encoding": name, "window": args.window, "heads": args.heads, "rows": rows}
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


def _cmd_checkpoint(args):
    _input_path(args.path, "path", directory_ok=True)
    if args.plot is not None:
        check_folder(args.plot, force=args.force, name="plot")
    api = _torch_api("checkpoint")
    args._context = str(args.path)
    try:
        ckpt = api.load_checkpoint(args.path, args.scheme)
    except (DomainError, FileFormatError, MemoryError):
        raise
    except Exception as exc:  # a file is data: whatever the reader trips on is a bad input
        raise UsageError(f"{args.path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    report = api.analyse_checkpoint(ckpt, window=args.window, lengths=tuple(args.lengths), tol=args.tol)
    payload = report.as_dict()
    lines = report.table().splitlines()
    if args.plot is not None:
        import matplotlib.pyplot as plt

        before = set(plt.get_fignums())
        try:
            with staged_folder(args.plot, force=args.force, name="plot") as staging:
                written = report.plots(staging)
        finally:
            for number in set(plt.get_fignums()) - before:
                plt.close(number)
        paths = [str(Path(args.plot) / Path(p).name) for p in written]
        payload["plots"] = paths
        lines += [f"plot written to {p}" for p in paths]
    return payload, lines


def _reference_config(path: Path) -> dict:
    """The JSON config beside a reference-model checkpoint, read with a size cap and checked."""
    cfg_path = Path(path).with_suffix(".json")
    if not cfg_path.exists():
        raise UsageError(f"checkpoints: {path}: not a reference-model checkpoint (no JSON config {cfg_path.name} beside it)")
    try:
        raw = limits.read_bytes(cfg_path, "config", limit=limits.current().max_config_bytes)
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
            lines.append(
                f"  shift {r['shift']:+.2f}: prior mass beyond L {r['prior_far_mass_before']:.4f} -> {r['prior_far_mass_after']:.4f}, "
                f"loss {r['loss_before']:.4f} -> {r['loss_after']:.4f}: predicted {r['predicted_loss_direction']:+d}, "
                f"measured {r['measured_loss_direction']:+d} {'agree' if r['agree'] else 'DISAGREE'}"
            )
    lines.append(f"agreement: {agree} of {total}")
    return {"results": results, "agree": agree, "total": total}, lines


# --- the parser -----------------------------------------------------------------------------------

_JSON_HELP = 'strict JSON output (non-finite numbers as the strings "Infinity", "-Infinity", "NaN")'


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="otprior",
        description="Positional priors of causal attention: dilution, certified window-mass bounds, margins. "
        "Every result is proved in proofs/. Bad input: one line on stderr, exit status 2.",
    )
    parser.add_argument("--version", action="version", version=f"otprior {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="command")
    length = _int_type(1, MAX_LENGTH)

    def command(name, func, **kw):
        p = sub.add_parser(name, **kw)
        p.set_defaults(func=func, _spec=p)
        return p

    p = command("margin", _cmd_margin, help="smallest exponent margin keeping distant-mass growth within tol (Theorem 9)",
                description="Smallest delta >= 0 such that every log-distance exponent alpha >= 1 + delta keeps the "
                "growth of distant mass D_L(W) between the two lengths within tol.")
    p.add_argument("--window", type=length, required=True, help="window W: the W nearest keys (d < W)")
    p.add_argument("--lengths", type=length, nargs=2, required=True, metavar=("L0", "L1"), help="the two context lengths, L0 < L1")
    p.add_argument("--tol", type=_real_type(MIN_TOL, 1.0, high_open=True), required=True, help=f"allowed growth of distant mass, in [{MIN_TOL:g}, 1)")
    p.add_argument("--growth", choices=["absolute", "relative"], default="absolute", help="D_L1 - D_L0 (default) or D_L1/D_L0 - 1")
    p.add_argument("--score-bound", type=_real_type(0.0, 100.0), default=0.0, help="bound B in [0, 100] on content scores around a constant (Theorem 10)")
    p.add_argument("--offset", type=_real_type(1e-6, MAX_MAGNITUDE), default=1.0, help="offset o in [1e-6, 1e6] of the bias -alpha log(d + o)")
    p.add_argument("--json", action="store_true", help=_JSON_HELP)

    c = command("classify", _cmd_classify, help="bounded or diluting? (Theorem 11)",
                description="Classify a positional encoding as bounded (distant attention mass stays away from one) "
                "or diluting (it tends to one), with the reason, the rate and D_oo(W).")
    c.add_argument("encoding", type=_name_type(), help="one of: " + ", ".join(encoding_names()))
    _add_encoding_flags(c)
    c.add_argument("--window", type=length, default=64, help="window W for D_oo(W) (default 64)")
    c.add_argument("--json", action="store_true", help=_JSON_HELP)

    q = command("prior", _cmd_prior, help="constant-score prior of causal OT attention and its window masses (Theorems 2, 4)")
    q.add_argument("--rho", type=_real_type(0.0, 1.0, high_open=True), required=True, help="balancing strength rho in [0, 1) (0 = causal softmax)")
    q.add_argument("--n", type=length, required=True, help=f"query position (context length) n >= 1 (memory about {PRIOR_BYTES_PER_ENTRY} n bytes)")
    q.add_argument("--full", action="store_true", help="also print pi_n(d) for every distance d = 0 .. n-1")
    q.add_argument("--plot", type=_path_type, help="also draw the prior into this new image file (.png, .pdf, .svg, ...)")
    q.add_argument("--force", action="store_true", help="replace the --plot file if it exists")
    q.add_argument("--json", action="store_true", help=_JSON_HELP)

    m = command("mass", _cmd_mass, help="window and distant mass of an encoding at given lengths (log-distance: certified bounds, Theorems 7, 8)",
                description="Window mass m_n(W) and distant mass D_n(W) = 1 - m_n(W) of the constant-content prior of an "
                "encoding, at each length n. For log-distance, certified bounds and digits on demand; with --heads, one "
                "row per head (ALiBi's standard slopes).")
    m.add_argument("encoding", nargs="?", default="log-distance", type=_name_type(), help="one of: " + ", ".join(encoding_names()) + " (default log-distance)")
    _add_encoding_flags(m)
    m.add_argument("--window", type=length, required=True, help="window W")
    m.add_argument("--n", type=length, nargs="+", required=True, help="context lengths n >= W (1e12 accepted)")
    m.add_argument("--heads", type=_int_type(1, MAX_LENGTH), help="number of heads H: one row per head (alibi: slopes 2^(-8h/H))")
    m.add_argument("--dps", type=_int_type(1, 10_000), help="log-distance: also print the window mass to this many digits (mpmath)")
    m.add_argument("--json", action="store_true", help=_JSON_HELP)

    r = command("report", _cmd_report, help="the main job: tables and figures on built-in defaults")
    r.add_argument("--out", type=_path_type, default=Path("report"), help="output folder, new or empty (default: report); index.html goes there")
    r.add_argument("--force", action="store_true", help="write into an existing folder that holds files (files of the report's names are replaced)")
    r.add_argument("--json", action="store_true", help=_JSON_HELP)

    k = command("checkpoint", _cmd_checkpoint, help="per-head positional parameters of a checkpoint against the theory (torch extra)")
    k.add_argument("path", type=_path_type, help=".safetensors, .pt, .pth or .bin state dict")
    k.add_argument("--scheme", type=_name_type(), help="positional scheme when detection is ambiguous (log-distance, kerple-log, kerple-power, alibi)")
    k.add_argument("--window", type=length, default=64, help="window W (default 64)")
    k.add_argument("--lengths", type=length, nargs=2, default=(512, 8192), metavar=("L_TRAIN", "L_EVAL"), help="training and evaluation length")
    k.add_argument("--tol", type=_real_type(MIN_TOL, 1.0, high_open=True), default=0.05, help=f"growth tolerance for the margin, in [{MIN_TOL:g}, 1) (default 0.05)")
    k.add_argument("--plot", type=_path_type, help="write figures into this new or empty folder")
    k.add_argument("--force", action="store_true", help="write figures into an existing folder that holds files")
    k.add_argument("--json", action="store_true", help=_JSON_HELP)

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
    return parser


@functools.lru_cache(maxsize=1)
def _parser():
    # parsing leaves a parser unchanged, so one serves every call in a process
    return build_parser()


# --- errors to flags ------------------------------------------------------------------------------

# library parameter names that a command spells differently
_ALIASES = {
    None: {"Lrange": "--lengths", "num_heads": "--heads", "symbol": "--expr", "asymptotic": "--expr"},
    "classify": {"n": "--window"},
    "checkpoint": {"Lrange": "--lengths", "checkpoint": "path"},
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


def _silence_stdout():
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv=None) -> int:
    """Run the command; return its exit status (0, 2 for bad input, 1 for a defect, 141 on a closed pipe)."""
    args = None
    try:
        try:
            args = _parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version (0) and argparse's one-line errors (2)
            return exc.code if isinstance(exc.code, int) else 2
        payload, lines = args.func(args)
        _emit(payload, lines, args.json)
        return 0
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
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
        sys.stderr.write(f"otprior: internal error: {_one_line(f'{type(exc).__name__}: {exc}')} (OTPRIOR_DEBUG=1 shows the traceback)\n")
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
