"""The ``otprior`` parser and :func:`main`: dispatch to the commands, map every error to one line.

Each command is a module of this package with ``add(command)``, which declares its sub-parser and
flags, and ``run(args) -> (payload, lines)``, which calls the library: ``payload`` is printed as
strict JSON with ``--json``, ``lines`` as text otherwise. :data:`COMMANDS` lists them in the order
of ``otprior --help``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

from .._output import OutputError, guarded_stderr, silence, write_stderr_line
from .._validation import ConvergenceError, DomainError, FileFormatError, PrecisionError
from . import checkpoint, classify, intervene, margin, mass, prior, report, study
from ._common import (
    EXIT_BROKEN_PIPE,
    EXIT_OUTPUT_FAILED,
    Parser,
    UsageError,
    as_flag,
    did_you_mean,
    emit,
    one_line,
    write_error,
)
from ._registry_flags import encoding_names, encoding_parameters, load_plugins
from .mass import DEFAULT_MASS_ENCODING

#: The commands, in the order of ``otprior --help``: each module's ``add``.
COMMANDS = (margin.add, classify.add, prior.add, mass.add, report.add, checkpoint.add, intervene.add, study.add)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = Parser(
        prog="otprior",
        description="Positional priors of causal attention: dilution, certified window-mass bounds, margins. "
        "Every result is stated in proofs/ with its status. Bad input: one line on stderr, exit status 2.",
    )
    parser.add_argument("--version", action="version", version=f"otprior {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="command")

    def command(name, func, **kw):
        p = sub.add_parser(name, **kw)
        if func is not None:
            p.set_defaults(func=func, _spec=p)
        return p

    for add in COMMANDS:
        add(command)
    return parser


def _parser():
    # parsing leaves a parser unchanged, so one serves every call in a process while the
    # registries stay as they are (an encoding registered later gets its sub-command)
    from .. import normalisers as N

    load_plugins()  # installed packages' encodings (entry-point group otprior.encodings), once
    return _parser_for(tuple(encoding_names()), tuple(N.names()))


@functools.lru_cache(maxsize=1)
def _parser_for(_encodings, _normalisers):
    return build_parser()


# --- errors to flags ------------------------------------------------------------------------------

# library parameter names that a command spells differently
_ALIASES = {
    None: {"Lrange": "--lengths", "asymptotic": "--expr"},
    "classify": {"n": "--window", "num_heads": "--heads", "score_bound": "--logit-bound",
                 # the structures' parameters (otprior.structures) and their flags
                 "width": "--sliding-window", "size": "--chunk", "logit": "--sink", "cap": "--softcap",
                 "block": "--global-block", "max_positions": "--absolute-positions"},
    "mass": {"num_heads": "--heads", "score_bound": "--logit-bound"},
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
    hint = did_you_mean(extra, spec._option_string_actions if spec is not None else ())
    if hint is not None:
        return hint
    flags = [x.split("=", 1)[0] for x in extra if x.startswith("--")]
    encoding = getattr(args, "encoding", None)
    if encoding is not None and flags:
        own = " ".join(as_flag(p.name) for p in encoding_parameters(encoding)) or "none"
        return f"{encoding} does not take {', '.join(dict.fromkeys(flags))} (its parameters: {own}; all its flags: otprior {args.command} {encoding} --help)"
    return f"unrecognized arguments: {' '.join(extra)}"


def _silence_stdout():
    silence("stdout")


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
        emit(payload, lines, args.json)
        return getattr(args, "exit_status", 0)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OutputError as exc:
        _silence_stdout()
        write_error(str(exc))
        return EXIT_OUTPUT_FAILED
    except KeyboardInterrupt:
        return 130
    except (DomainError, UsageError, PrecisionError, ConvergenceError, FileFormatError) as exc:
        write_error(_message(args, exc))
        return 2
    except MemoryError:
        write_error("out of memory: an allocation escaped the caps of otprior.limits (please report it)")
        return 1
    except Exception as exc:
        if os.environ.get("OTPRIOR_DEBUG"):
            raise
        write_stderr_line(f"otprior: internal error: {one_line(f'{type(exc).__name__}: {exc}')} (OTPRIOR_DEBUG=1 shows the traceback)")
        return 1

