"""``otprior checkpoint PATH``: per-head positional parameters of a checkpoint against the theory (torch extra).

The torch adapter reads and analyses (:func:`otprior.torch.load_checkpoint`,
:func:`otprior.torch.analyse_checkpoint`, :func:`otprior.torch.measurement.measure_checkpoint`);
this module checks the flags and files first, prints the report and writes the figures.
"""

from __future__ import annotations

import argparse
import re

from .. import limits
from .._output import check_folder
from .._validation import TOL, DomainError, FileFormatError, Interval
from ._common import (
    EXIT_PREDICTION_FAILED,
    JSON_HELP,
    LENGTH,
    MAX_LENGTH,
    UsageError,
    close_figures,
    domain_type,
    figure_of,
    input_path,
    int_type,
    name_type,
    path_type,
    save_figures,
    text_of,
    torch_api,
)


def _mapping_type(text):
    """``TENSOR=ROLE``: a tensor name (or a regular expression over the names) and its role."""
    text = text_of(text)
    tensor, sep, role = text.rpartition("=")
    if not sep or not tensor.strip() or not re.fullmatch(r"[a-z_]{1,64}", role.strip()):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not TENSOR=ROLE (a tensor name or pattern, '=', a role such as slope)")
    if len(tensor) > 1000 or "\x00" in tensor:
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: a tensor name of at most 1000 characters, without NUL")
    return tensor.strip(), role.strip()


_mapping_type.__name__ = "mapping"



MEASURE_DEFAULT_MAX = 4096  # longest length --measure runs without --lengths (attention maps are n x n per head)


def run(args):
    input_path(args.path, "path", directory_ok=True)
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
    api = torch_api("checkpoint")
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
        from ..torch.measurement import measure_checkpoint

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
        figures = {"parameters.png": figure_of(report.plot())}
        if measurement is not None:
            from ..torch.measurement import plot_measurement

            for stack, layer in sorted({(r["stack"], r["layer"]) for r in measurement.rows}):
                name = f"measured_{stack + '_' if stack else ''}layer{layer}.png"
                figures[name] = figure_of(plot_measurement(measurement, layer, stack=stack))
        try:
            paths = save_figures(figures, args.plot, args.force)
        finally:
            close_figures(figures.values())
        payload["plots"] = paths
        lines += [f"plot written to {p}" for p in paths]
    return payload, lines


#: The tolerance of ``--measure`` as :func:`otprior.torch.measurement.measure_checkpoint` checks it.
MEASURE_TOL = Interval(0.0, 1.0, low_open=True, high_open=True)


def add(command):
    k = command("checkpoint", run, help="per-head positional parameters of a checkpoint against the theory (torch extra)",
                description="Read the positional parameters of a checkpoint (a model folder: config.json with safetensors, "
                "sharded or not, or pytorch_model.bin; a single .safetensors/.pt/.pth/.bin/.ckpt file; a per-layer "
                "pipeline folder) and give per layer and head the verdict, the parameter that decides it, its distance "
                "to the boundary and the predicted distant masses; with --measure, the running model's masses beside "
                "them. The scheme and the lengths come from the config and the tensors; flags override.")
    k.add_argument("path", type=path_type, help="a model folder or a checkpoint file")
    k.add_argument("--scheme", type=name_type(), help="confirm the positional scheme (an encoding name; refused when the tensors or config contradict it)")
    k.add_argument("--num-heads", type=int_type(1, MAX_LENGTH), help="head count where no tensor stores one per head (ALiBi with implied slopes)")
    k.add_argument("--mapping", type=_mapping_type, nargs="+", metavar="TENSOR=ROLE",
                   help="tensor names (or patterns) and their roles, for layouts the names do not reveal (shape-checked; needs --scheme)")
    k.add_argument("--window", type=LENGTH, help="window W (default min(64, L0/2))")
    k.add_argument("--lengths", type=int_type(2, MAX_LENGTH), nargs="+", metavar="L",
                   help="2 to 64 increasing context lengths (default: the training length found and 8 times it)")
    k.add_argument("--tol", type=domain_type(TOL), default=0.05,
                   help=f"growth tolerance for the margin (power-law schemes), in {TOL} (default 0.05)")
    k.add_argument("--implementation", choices=("transformers", "original"), default="transformers",
                   help="whose code to model where they differ: transformers' class (default) or the family's original (MPT)")
    k.add_argument("--measure", action="store_true", help="also run the model on --text and measure each head's masses (reference model or transformers folder)")
    k.add_argument("--measure-tol", type=domain_type(MEASURE_TOL), default=1e-4,
                   help=f"largest |model's positional part - prediction| accepted by --measure, in {MEASURE_TOL} (the positional "
                   "part runs in float32; default 1e-4); above it the prediction FAILED and the exit status is 3")
    k.add_argument("--text", type=path_type, help="text file the model reads with --measure (bytes, within the read cap)")
    k.add_argument("--plot", type=path_type, help="write figures into this new or empty folder")
    k.add_argument("--force", action="store_true", help="write figures into an existing folder that holds files")
    k.add_argument("--json", action="store_true", help=JSON_HELP)
