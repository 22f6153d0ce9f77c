"""Flags generated from the registries of encodings and normalisers, shared by ``classify`` and ``mass``.

Each registered encoding is a sub-command (``otprior classify ENCODING``) with one flag per
constructor parameter (:func:`otprior.encodings.parameters`): ``--r1`` for ``r1``, with the
parameter's type (:meth:`~otprior._registry.Parameter.convert`), its documentation as help, its
choices, and required when the class has no default; :func:`build_encoding` hands the values
to :func:`otprior.encodings.get`. Normalisers (:mod:`otprior.normalisers`) are chosen with
``--normaliser NAME``, their parameters spelled ``--NAME-PARAMETER``. An encoding registered at
run time gets its sub-command and flags the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import re
import typing

from .. import limits
from .._output import one_line, write_stderr_line
from .._validation import ALPHA, BAND_SCORE_BOUND, OFFSET, SCORE_BOUND, DomainError
from ._common import JSON_HELP, MAX_LENGTH, Parser, UsageError, add_renamed, as_flag, int_type, text_of

#: Constructor parameters that hold Python objects (callables, weight matrices): they are set
#: from the library, and no flag is generated for them.
LIBRARY_ONLY = {"bias": ("asymptotic",), "fire": ("f", "mlp")}
#: Largest magnitude of a real-valued encoding or normaliser parameter on the command line
#: (but those of :data:`SHARED_DOMAINS`).
MAX_PARAMETER_MAGNITUDE = 1e12
#: Encoding parameters whose domain the library defines once (``otprior._validation``): their flags
#: accept exactly that domain, as the API does, and their help states it. Normaliser parameters
#: are not looked up here (entmax's ``alpha`` is another quantity than the log-distance exponent).
#: ``mass`` evaluates Theorem 10's band, so its ``--logit-bound`` takes :data:`MASS_DOMAINS`.
SHARED_DOMAINS = {"alpha": ALPHA, "offset": OFFSET, "logit_bound": SCORE_BOUND}
MASS_DOMAINS = {**SHARED_DOMAINS, "logit_bound": BAND_SCORE_BOUND}
#: Values beyond which a parameter is "huge" when the library overflows on it (see ``refuse_overflow``).
HUGE = 1e6
#: Longest text one flag takes (a per-head list, a bucket table, an expression).
MAX_FLAG_CHARS = 100_000


#: Entry-point group through which an installed package offers its encodings to the command line:
#: ``[project.entry-points."otprior.encodings"]`` with ``NAME = "package.module"``, a module that
#: registers its encodings when imported (``@otprior.encodings.register``).
PLUGIN_GROUP = "otprior.encodings"


@functools.lru_cache(maxsize=1)
def load_plugins() -> tuple:
    """Import, once per process, the modules that installed packages declare under the entry-point
    group :data:`PLUGIN_GROUP`, so that their registered encodings get sub-commands and flags like
    the built-in ones. A module that fails to import is left out with one warning line on stderr
    naming it and why; the command goes on. Returns the entry points that failed, as text.

    Only packages installed in the environment (their metadata declares the group) are imported:
    the same trust as any installed package; no file or variable names code to run."""
    from importlib.metadata import entry_points

    failed = []
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()
        except Exception as exc:  # a broken plugin is the plugin's defect: named, then left out
            failed.append(f"{ep.name} = {ep.value}")
            write_stderr_line(one_line(f"otprior: warning: the encoding plugin {ep.name} = {ep.value} (entry point "
                                       f"group {PLUGIN_GROUP}) failed to load and is left out: {type(exc).__name__}: {exc}"))
    return tuple(failed)


def encoding_names() -> list:
    """The registered encoding names (:func:`otprior.encodings.names`)."""
    from .. import encodings as E

    return list(E.names())


def encoding_parameters(name) -> tuple:
    """The registry's :class:`~otprior._registry.Parameter` records of encoding ``name`` that the
    command line offers as flags (all but :data:`LIBRARY_ONLY`)."""
    from .. import encodings as E

    skip = LIBRARY_ONLY.get(name, ())
    return tuple(p for p in E.parameters(name) if p.name not in skip)


def normaliser_flag(normaliser: str, parameter: str) -> str:
    """The flag of a normaliser's parameter: ``--NORMALISER-PARAMETER`` (e.g. ``--ssmax-s``)."""
    return f"--{normaliser}-{parameter.replace('_', '-')}"


def normaliser_dest(normaliser: str, parameter: str) -> str:
    return f"normaliser:{normaliser}:{parameter}"


def parameter_kinds(p) -> set:
    kinds = set(typing.get_args(p.type)) or {p.type}
    kinds.discard(type(None))
    return kinds


def parameter_type(p, *, per_head: bool, shared_domains: dict | None = None):
    """The argparse type of a registry parameter: :meth:`Parameter.convert`, then the command
    line's own guards (finite numbers within :data:`MAX_PARAMETER_MAGNITUDE`, integers also
    written as ``1e6``). With ``per_head``, a number may be a comma-separated list, one value
    per head, handed to the class as a tuple (the class refuses it when it has no heads).
    ``shared_domains`` (:data:`SHARED_DOMAINS` for encodings) replaces the guards by the
    library's own domain of the parameters it names."""
    kinds = parameter_kinds(p)
    integer = kinds <= {int}
    numeric = kinds <= {int, float} and not kinds <= {bool}
    whole = int_type(-MAX_LENGTH, MAX_LENGTH)

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
        shared = (shared_domains or {}).get(p.name)
        if shared is not None and numeric and not (math.isfinite(value) and value in shared):
            why = f" ({shared.reason})" if shared.reason else ""
            raise argparse.ArgumentTypeError(f"{text.strip()[:80]!r} is outside the valid domain: a finite number in {shared}{why}")
        if shared is None and numeric and (not math.isfinite(value) or abs(value) > (MAX_LENGTH if integer else MAX_PARAMETER_MAGNITUDE)):
            bound = f"{MAX_LENGTH:.0e}" if integer else f"{MAX_PARAMETER_MAGNITUDE:g}"
            raise argparse.ArgumentTypeError(f"{text.strip()[:80]!r} is outside the valid domain: a finite number within +-{bound}")
        return value

    def parse(text):
        text = text_of(text)
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


def plain(doc: str) -> str:
    """A docstring line as help text: reST maths and literals unmarked, ``%`` escaped for argparse."""
    doc = re.sub(r":math:`([^`]*)`", r"\1", doc).replace("``", "")
    doc = re.sub(r"\\infty(?![A-Za-z])", "oo", doc)  # D_\infty(W) -> D_oo(W), as the command prints it
    # TeX groups as plain text: e^{-mW} -> e^(-mW), d^{r_2} -> d^(r_2), x^{2} -> x^2, H_{W} -> H_W
    doc = re.sub(r"\^\{([^{}]*)\}", lambda m: "^" + (m.group(1) if len(m.group(1)) == 1 else f"({m.group(1)})"), doc)
    doc = re.sub(r"_\{([^{}]*)\}", r"_\1", doc)
    doc = re.sub(r"(?<=[A-Za-z0-9_}])\\([A-Za-z]+)", r" \1", doc)
    doc = re.sub(r"\\[,;!]", " ", re.sub(r"\\([A-Za-z]+)", r"\1", doc))
    return re.sub(r"(?<=\S)  +", " ", doc).replace("%", "%%")


def help_text(p, prefix="", domain=None) -> str:
    text = prefix + plain(p.doc or p.name)
    if domain is not None:
        text += f", in {domain}"
    if not p.required and p.default is not None and not callable(p.default):
        text += f" (default {p.default})"
    return text


def add_encoding_flags(parser, name, shared_domains=SHARED_DOMAINS) -> None:
    """One flag per parameter of encoding ``name`` (``--r1``, ``--logit-bound``, ...); the class's
    former keyword names (its ``renamed`` table) as refused flags that name the new ones. The
    parameters that ``shared_domains`` names take the library's domain given there."""
    from .. import encodings as E
    from .._registry import renamed_parameters

    cls = E.lookup(name)
    add_renamed(parser, {as_flag(old): as_flag(new) for old, new in renamed_parameters(cls).items()}, getattr(cls, "renamed_reason", ""))
    group = parser.add_argument_group(f"parameters of {name}")
    for p in encoding_parameters(name):
        kw = {"dest": p.name, "type": parameter_type(p, per_head=True, shared_domains=shared_domains),
              "help": help_text(p, domain=shared_domains.get(p.name)), "metavar": p.name.upper()}
        if p.choices is not None:
            kw["choices"] = p.choices
            del kw["metavar"]
        if parameter_kinds(p) <= {bool}:
            kw["metavar"] = "{true,false}"
        if p.required:
            kw["required"] = True
        else:
            kw["default"] = None  # absent: the class's default
        group.add_argument(as_flag(p.name), **kw)


def add_normaliser_flags(parser) -> None:
    """``--normaliser NAME`` and each normaliser's parameters as ``--NAME-PARAMETER``."""
    from .. import normalisers as N

    names = N.names()
    group = parser.add_argument_group(
        "normaliser", "the normalisation of the attention row (default softmax); its parameters are spelled --NAME-PARAMETER"
    )
    group.add_argument("--normaliser", choices=names, default=None, metavar="NAME", help="one of: " + ", ".join(names))
    for name in names:
        for p in N.parameters(name):
            kw = {"dest": normaliser_dest(name, p.name), "type": parameter_type(p, per_head=False), "default": None,
                  "help": help_text(p, f"{name}: "), "metavar": p.name.upper()}
            if p.choices is not None:
                kw["choices"] = p.choices
                del kw["metavar"]
            group.add_argument(normaliser_flag(name, p.name), **kw)


def given_flags(args, params) -> dict:
    return {p.name: getattr(args, p.name) for p in params if getattr(args, p.name, None) is not None}


def build_encoding(name, given: dict):
    """Encoding ``name`` from the flags given (``otprior.encodings.get``); a refusal names the flag."""
    from .. import encodings as E

    params = {p.name: p for p in encoding_parameters(name)}
    for key in given:
        if key not in params:
            raise UsageError(f"{name} does not take {as_flag(key)}")
    try:
        enc = E.get(name, **given)
    except DomainError as exc:
        if exc.parameter in params and not isinstance(exc, limits.ResourceError):
            raise UsageError(f"{as_flag(exc.parameter)}: {exc}") from None
        raise
    if enc.heads is not None:  # one verdict or row per head: a count of printed items
        limits.check_count(enc.heads, "heads", enc.heads)
    return enc


@contextlib.contextmanager
def refuse_overflow(given: dict):
    """An ``OverflowError`` from the library on huge parameters becomes a refusal naming them
    (values beyond :data:`HUGE`); with no huge parameter it is a defect and passes on."""
    try:
        yield
    except OverflowError as exc:
        huge = [k for k, v in given.items() if any(isinstance(x, (int, float)) and abs(x) > HUGE for x in (v if isinstance(v, tuple) else (v,)))]
        if not huge:
            raise
        flags = ", ".join(as_flag(k) for k in huge)
        raise UsageError(f"{flags}: values this large overflow double precision here ({exc}); give values within +-{HUGE:g}") from None


def build_normaliser(args):
    """The normaliser of ``--normaliser`` with its ``--NAME-PARAMETER`` flags (None: softmax)."""
    from .. import normalisers as N

    chosen = getattr(args, "normaliser", None)
    given = {}
    for name in N.names():
        for p in N.parameters(name):
            value = getattr(args, normaliser_dest(name, p.name), None)
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


def encoding_commands(command, name, func, help, description, add_common, shared_domains=SHARED_DOMAINS):
    """A subcommand with one sub-parser per registered encoding (its own flags, with the domains of
    ``shared_domains``, then ``add_common``)."""
    p = command(name, None, help=help, description=description,
                epilog=f"Each encoding's own flags: otprior {name} ENCODING --help. Every encoding also takes --json: {JSON_HELP}.")
    encodings = p.add_subparsers(dest="encoding", required=True, parser_class=Parser, metavar="ENCODING", title="encodings")
    from .. import encodings as E

    for enc in encoding_names():
        doc = plain((E.lookup(enc).__doc__ or enc).strip().split("\n")[0])
        e = encodings.add_parser(enc, help=doc, description=f"otprior {name} {enc}: {doc}")
        e.set_defaults(func=func, _spec=e)
        add_encoding_flags(e, enc, shared_domains)
        add_common(e, enc)
    return p
