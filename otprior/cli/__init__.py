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

The library computes and returns data; this package parses, validates and prints. One module per
command (:mod:`otprior.cli.margin`, :mod:`~otprior.cli.classify`, :mod:`~otprior.cli.prior`,
:mod:`~otprior.cli.mass`, :mod:`~otprior.cli.report`, :mod:`~otprior.cli.checkpoint`,
:mod:`~otprior.cli.intervene`, :mod:`~otprior.cli.study`), each an ``add(command)`` that declares
its flags and a ``run(args)`` that calls the library and returns ``(payload, lines)``; they share
one parser helper (:mod:`otprior.cli._common`: the parser, the argument types, the one-line
errors, "did you mean", the output) and the flags generated from the registries
(:mod:`otprior.cli._registry_flags`); :mod:`otprior.cli._main` dispatches.

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
    An installed package offers its own encodings to the command through the entry-point group
    ``otprior.encodings`` (a module that registers them when imported; see CONTRIBUTING.md).

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

from .._json import to_strict_json
from ._common import EXIT_BROKEN_PIPE, EXIT_OUTPUT_FAILED, EXIT_PREDICTION_FAILED, UsageError
from ._main import COMMANDS, build_parser, main
from ._registry_flags import build_encoding, build_normaliser, encoding_names, encoding_parameters, normaliser_flag
from .classify import build_structure

__all__ = [
    "main",
    "build_parser",
    "build_encoding",
    "build_normaliser",
    "build_structure",
    "UsageError",
    "encoding_names",
    "encoding_parameters",
    "normaliser_flag",
    "to_strict_json",
    "COMMANDS",
    "EXIT_BROKEN_PIPE",
    "EXIT_OUTPUT_FAILED",
    "EXIT_PREDICTION_FAILED",
]
